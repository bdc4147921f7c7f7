// C++ face of mmops::correlation: the public API against a loop reference,
// mmcv's known vectors, autograd from C++, finite differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "test_support.h"

namespace {

struct Options {
  std::vector<int64_t> kernel, stride, padding, dilation, dilation_patch;
  int64_t max_displacement;
};

int64_t out_side(int64_t size, int64_t k, int64_t s, int64_t p, int64_t d) {
  const int64_t num = size + 2 * p - d * (k - 1) - 1;
  return num < 0 ? 0 : num / s + 1;
}

// The definition in double loops.
at::Tensor reference(const at::Tensor& x1, const at::Tensor& x2, const Options& o) {
  const int64_t n_ = x1.size(0), c_ = x1.size(1), h = x1.size(2), w = x1.size(3);
  const int64_t patch = 2 * o.max_displacement + 1;
  const int64_t oh_ = out_side(h, o.kernel[0], o.stride[0], o.padding[0], o.dilation[0]);
  const int64_t ow_ = out_side(w, o.kernel[1], o.stride[1], o.padding[1], o.dilation[1]);
  at::Tensor out = at::zeros({n_, patch, patch, oh_, ow_}, at::kDouble);
  auto a = x1.accessor<double, 4>();
  auto b = x2.accessor<double, 4>();
  auto r = out.accessor<double, 5>();
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t ph = 0; ph < patch; ++ph)
      for (int64_t pw = 0; pw < patch; ++pw)
        for (int64_t oh = 0; oh < oh_; ++oh)
          for (int64_t ow = 0; ow < ow_; ++ow) {
            const int64_t dy = (ph - o.max_displacement) * o.dilation_patch[0];
            const int64_t dx = (pw - o.max_displacement) * o.dilation_patch[1];
            double sum = 0.0;
            for (int64_t i = 0; i < o.kernel[0]; ++i)
              for (int64_t j = 0; j < o.kernel[1]; ++j) {
                const int64_t y = oh * o.stride[0] - o.padding[0] + i * o.dilation[0];
                const int64_t x = ow * o.stride[1] - o.padding[1] + j * o.dilation[1];
                if (y < 0 || y >= h || x < 0 || x >= w || y + dy < 0 || y + dy >= h || x + dx < 0 || x + dx >= w) {
                  continue;
                }
                for (int64_t c = 0; c < c_; ++c) {
                  sum += a[n][c][y][x] * b[n][c][y + dy][x + dx];
                }
              }
            r[n][ph][pw][oh][ow] = sum;
          }
  return out;
}

at::Tensor call(const at::Tensor& x1, const at::Tensor& x2, const Options& o) {
  return mmops::correlation(x1, x2, o.kernel, o.max_displacement, o.stride, o.padding, o.dilation, o.dilation_patch);
}

const std::vector<Options> kOptions = {
    {{1, 1}, {1, 1}, {0, 0}, {1, 1}, {1, 1}, 1},
    {{3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2},
    {{3, 2}, {2, 1}, {1, 0}, {2, 1}, {1, 2}, 1},
};

TEST(Correlation, MatchesLoopReference) {
  at::manual_seed(0);
  const at::Tensor x1 = at::randn({2, 3, 6, 7}, at::kDouble), x2 = at::randn({2, 3, 6, 7}, at::kDouble);
  for (const Options& o : kOptions) {
    const at::Tensor out = call(x1, x2, o);
    const at::Tensor exp = reference(x1, x2, o);
    EXPECT_EQ(out.sizes(), exp.sizes());
    EXPECT_TRUE(at::allclose(out, exp, 1e-12, 1e-12));
  }
}

TEST(Correlation, MmcvKnownVectors) {
  // mmcv's tests/test_ops/test_correlation.py: max_displacement 0 on 3 x 3 maps
  const at::Tensor x1 = at::tensor({1., 2., 3., 0., 1., 2., 3., 5., 2.}, at::kDouble).view({1, 1, 3, 3});
  const at::Tensor x2 = at::tensor({1., 2., 3., 3., 1., 2., 8., 5., 2.}, at::kDouble).view({1, 1, 3, 3});
  const at::Tensor a = x1.clone().requires_grad_(true), b = x2.clone().requires_grad_(true);
  const at::Tensor out = mmops::correlation(a, b, {1, 1}, 0);
  EXPECT_TRUE(at::equal(out, at::tensor({1., 4., 9., 0., 1., 4., 24., 25., 4.}, at::kDouble).view({1, 1, 1, 3, 3})));
  out.sum().backward();
  EXPECT_TRUE(at::equal(a.grad(), x2));
  EXPECT_TRUE(at::equal(b.grad(), x1));
}

TEST(Correlation, FiniteDifferences) {
  at::manual_seed(1);
  const Options& o = kOptions[2];
  const at::Tensor x1 = at::randn({1, 2, 5, 6}, at::kDouble), x2 = at::randn({1, 2, 5, 6}, at::kDouble);
  const at::Tensor weights = at::randn(call(x1, x2, o).sizes(), at::kDouble);
  mmops_test::expect_finite_differences([&](const at::Tensor& x) { return (call(x, x2, o) * weights).sum(); }, x1, 3);
  mmops_test::expect_finite_differences([&](const at::Tensor& x) { return (call(x1, x, o) * weights).sum(); }, x2, 3);
}

TEST(Correlation, EmptyInputs) {
  const at::Tensor x = at::randn({0, 3, 5, 6}).requires_grad_(true);
  const at::Tensor out = mmops::correlation(x, x);
  EXPECT_EQ(out.sizes(), at::IntArrayRef({0, 3, 3, 5, 6}));
  out.sum().backward();
  EXPECT_EQ(x.grad().sizes(), x.sizes());
  const at::Tensor no_channels = at::randn({2, 0, 5, 6});
  EXPECT_TRUE(at::equal(mmops::correlation(no_channels, no_channels), at::zeros({2, 3, 3, 5, 6})));
}

TEST(Correlation, ErrorsNameTheArgument) {
  const at::Tensor x = at::randn({2, 3, 5, 6});
  EXPECT_ERROR_MENTIONS(mmops::correlation(x[0], x), "expected input1 to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::correlation(x, x.narrow(1, 0, 2)), "expected input2 of the shape of input1");
  EXPECT_ERROR_MENTIONS(mmops::correlation(x, x.to(at::kDouble)), "expected input2 to have the dtype");
  EXPECT_ERROR_MENTIONS(mmops::correlation(x, x, {0, 1}), "expected kernel_size in [1, 1024]");
  EXPECT_ERROR_MENTIONS(mmops::correlation(x, x, {1, 1}, -1), "expected max_displacement in [0, 1024]");
  EXPECT_ERROR_MENTIONS(mmops::correlation(x, x, {1, 1}, 1, {0, 1}), "expected stride in");
  EXPECT_ERROR_MENTIONS(mmops::correlation(x, x, {1, 1}, 1, {1, 1}, {1}), "expected padding to be an int or a pair");
}

TEST(Correlation, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(2);
  const at::Tensor x1 = at::randn({2, 16, 12, 40}), x2 = at::randn({2, 16, 12, 40});
  for (const Options& o : kOptions) {
    for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
      // fresh leaves: x.to(kFloat) would be x itself, and a later dtype's copy of it a non-leaf
      const auto leaf = [&](const at::Tensor& x, bool cuda) {
        const at::Tensor t = x.to(dtype).clone();
        return (cuda ? t.cuda() : t).requires_grad_(true);
      };
      const at::Tensor ac = leaf(x1, true), bc = leaf(x2, true), ah = leaf(x1, false), bh = leaf(x2, false);
      const at::Tensor oc = call(ac, bc, o), oh = call(ah, bh, o);
      EXPECT_TRUE(at::equal(oc.cpu(), oh)) << dtype; // the same sums in the same order
      const at::Tensor go = at::randn(oh.sizes()).to(dtype);
      oc.backward(go.cuda());
      oh.backward(go);
      EXPECT_TRUE(at::equal(ac.grad().cpu(), ah.grad())) << dtype;
      EXPECT_TRUE(at::equal(bc.grad().cpu(), bh.grad())) << dtype;
    }
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry correlation_api{
    "mmops::correlation", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::correlation(a[0].toTensor(), a[1].toTensor(), a[2].toIntVector(),
                                                       a[3].toInt(), a[4].toIntVector(), a[5].toIntVector(),
                                                       a[6].toIntVector(), a[7].toIntVector())};
    }};

} // namespace

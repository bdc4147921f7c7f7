// C++ face of mmops::upfirdn2d: the public API against a loop reference,
// hand-computed vectors, autograd from C++ (first and second order), finite
// differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <vector>

#include "test_support.h"

namespace {

// The definition in double loops: output (oy, ox) sums x[iy][ix] * kernel[kh - 1 - ky][kw - 1 - kx]
// over the taps whose position m = o * down - pad0 + k in the zero-inserted signal is a multiple
// of up with m / up inside the input.
at::Tensor reference(const at::Tensor& x, const at::Tensor& k, std::vector<int64_t> up, std::vector<int64_t> down,
                     std::vector<int64_t> pad) {
  const int64_t n_ = x.size(0), c_ = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t kh = k.size(0), kw = k.size(1);
  const int64_t out_h = (h * up[1] + pad[2] + pad[3] - kh) / down[1] + 1;
  const int64_t out_w = (w * up[0] + pad[0] + pad[1] - kw) / down[0] + 1;
  at::Tensor out = at::zeros({n_, c_, out_h, out_w}, at::kDouble);
  auto in = x.accessor<double, 4>();
  auto kk = k.accessor<double, 2>();
  auto o = out.accessor<double, 4>();
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t c = 0; c < c_; ++c)
      for (int64_t oy = 0; oy < out_h; ++oy)
        for (int64_t ox = 0; ox < out_w; ++ox) {
          double acc = 0;
          for (int64_t ky = 0; ky < kh; ++ky) {
            const int64_t my = oy * down[1] - pad[2] + ky;
            if (my < 0 || my % up[1] != 0 || my / up[1] >= h)
              continue;
            for (int64_t kx = 0; kx < kw; ++kx) {
              const int64_t mx = ox * down[0] - pad[0] + kx;
              if (mx < 0 || mx % up[0] != 0 || mx / up[0] >= w)
                continue;
              acc += in[n][c][my / up[1]][mx / up[0]] * kk[kh - 1 - ky][kw - 1 - kx];
            }
          }
          o[n][c][oy][ox] = acc;
        }
  return out;
}

TEST(Upfirdn2d, MatchesLoopReference) {
  at::manual_seed(0);
  struct Config {
    int64_t kh, kw;
    std::vector<int64_t> up, down, pad;
  };
  const std::vector<Config> configs = {{4, 4, {2, 2}, {1, 1}, {2, 1, 2, 1}},
                                       {4, 4, {1, 1}, {2, 2}, {1, 1, 1, 1}},
                                       {3, 2, {3, 1}, {1, 2}, {0, 2, 1, 0}},
                                       {2, 5, {2, 3}, {3, 2}, {-2, 3, 4, -3}}};
  for (const Config& c : configs) {
    const at::Tensor x = at::randn({2, 3, 6, 7}, at::kDouble);
    const at::Tensor k = at::randn({c.kh, c.kw}, at::kDouble);
    const at::Tensor out = mmops::upfirdn2d(x, k, c.up, c.down, c.pad);
    const at::Tensor expected = reference(x, k, c.up, c.down, c.pad);
    EXPECT_EQ(out.sizes(), expected.sizes());
    EXPECT_TRUE(at::allclose(out, expected, 1e-12, 1e-12)) << c.kh << "x" << c.kw;
  }
}

TEST(Upfirdn2d, KnownVectors) {
  // up 2 along x, kernel [[1, 2, 3, 4]], pad x (2, 1): the full convolution of [1, 0, 2, 0]
  // with [1, 2, 3, 4] is [1, 2, 5, 8, 6, 8, 0]; pads (2, 1) keep [2, 5, 8, 6]
  const at::Tensor x = at::tensor({1.0, 2.0}, at::kDouble).view({1, 1, 1, 2});
  const at::Tensor k = at::tensor({1.0, 2.0, 3.0, 4.0}, at::kDouble).view({1, 4});
  EXPECT_TRUE(at::equal(mmops::upfirdn2d(x, k, {2, 1}, {1, 1}, {2, 1, 0, 0}),
                        at::tensor({2.0, 5.0, 8.0, 6.0}, at::kDouble).view({1, 1, 1, 4})));
  // down 2 and a crop: [1..6] with [[1, 1]], pad x (-1, 0) -> [2 + 3, 4 + 5]
  const at::Tensor row = at::arange(1, 7, at::kDouble).view({1, 1, 1, 6});
  EXPECT_TRUE(at::equal(mmops::upfirdn2d(row, at::ones({1, 2}, at::kDouble), {1, 1}, {2, 1}, {-1, 0, 0, 0}),
                        at::tensor({5.0, 9.0}, at::kDouble).view({1, 1, 1, 2})));
}

TEST(Upfirdn2d, FiniteDifferencesAndSecondOrder) {
  at::manual_seed(1);
  const at::Tensor x0 = at::randn({1, 2, 4, 5}, at::kDouble);
  const at::Tensor k = at::randn({4, 4}, at::kDouble);
  const std::vector<int64_t> up = {2, 2}, down = {1, 1}, pad = {2, 1, 2, 1};
  const at::Tensor weights = at::randn({1, 2, 8, 10}, at::kDouble);
  mmops_test::expect_finite_differences(
      [&](const at::Tensor& x) { return (mmops::upfirdn2d(x, k, up, down, pad) * weights).sum(); }, x0, 3);
  // the gradient of |grad_x sum(out^2)|^2, against finite differences of that first-order gradient
  const auto penalty = [&](const at::Tensor& x) {
    const at::Tensor xg = x.detach().requires_grad_(true);
    const at::Tensor out = mmops::upfirdn2d(xg, k, up, down, pad);
    const at::Tensor g = torch::autograd::grad({out.pow(2).sum()}, {xg}, {}, true, true)[0];
    return g.pow(2).sum();
  };
  const at::Tensor xg = x0.clone().requires_grad_(true);
  const at::Tensor out = mmops::upfirdn2d(xg, k, up, down, pad);
  const at::Tensor g = torch::autograd::grad({out.pow(2).sum()}, {xg}, {}, true, true)[0];
  const at::Tensor gg = torch::autograd::grad({g.pow(2).sum()}, {xg})[0];
  for (int64_t i = 0; i < x0.numel(); i += 4) {
    at::Tensor plus = x0.clone(), minus = x0.clone();
    plus.view(-1)[i] += 1e-6;
    minus.view(-1)[i] -= 1e-6;
    const double numeric = (penalty(plus).item<double>() - penalty(minus).item<double>()) / 2e-6;
    EXPECT_NEAR(gg.view(-1)[i].item<double>(), numeric, 1e-5) << "element " << i;
  }
}

TEST(Upfirdn2d, EmptyInputs) {
  const at::Tensor x = at::randn({0, 3, 4, 5}).requires_grad_(true);
  const at::Tensor out = mmops::upfirdn2d(x, at::ones({2, 2}), {2, 2}, {1, 1}, {1, 0, 1, 0});
  EXPECT_EQ(out.sizes(), at::IntArrayRef({0, 3, 8, 10}));
  out.sum().backward();
  EXPECT_EQ(x.grad().sizes(), x.sizes());
}

TEST(Upfirdn2d, ErrorsNameTheArgument) {
  const at::Tensor x = at::randn({2, 3, 5, 6});
  const at::Tensor k = at::ones({3, 3});
  EXPECT_ERROR_MENTIONS(mmops::upfirdn2d(x[0], k), "expected input to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::upfirdn2d(x, k[0]), "expected kernel to be a 2-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::upfirdn2d(x, k, {0, 1}), "expected up factors in [1, 2^16]");
  EXPECT_ERROR_MENTIONS(mmops::upfirdn2d(x, k, {1, 1}, {1, -1}), "expected down factors in [1, 2^16]");
  EXPECT_ERROR_MENTIONS(mmops::upfirdn2d(x, k, {1, 1}, {1, 1}, {0, 0, -3, -3}), "output of at least 1 x 1");
  EXPECT_ERROR_MENTIONS(mmops::upfirdn2d(x, k, {1, 1}, {1, 1}, {0, 0, 0}), "expected pad to hold 4 values");
  EXPECT_ERROR_MENTIONS(mmops::upfirdn2d(x.to(at::kInt), k), "floating point dtype");
}

TEST(Upfirdn2d, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(2);
  const at::Tensor x0 = at::randn({2, 4, 19, 37});
  const at::Tensor k = at::randn({4, 4});
  for (const auto& [up, down] : std::vector<std::pair<int64_t, int64_t>>{{2, 1}, {1, 2}, {1, 1}, {3, 2}}) {
    for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
      const at::Tensor x = x0.to(dtype);
      const at::Tensor oc = mmops::upfirdn2d(x.cuda(), k.cuda(), {up, up}, {down, down}, {2, 1, 2, 1});
      const at::Tensor oh = mmops::upfirdn2d(x, k, {up, up}, {down, down}, {2, 1, 2, 1});
      const double tol = dtype == at::kDouble ? 1e-10 : (dtype == at::kFloat ? 1e-5 : 5e-2);
      EXPECT_TRUE(oc.cpu().to(at::kDouble).allclose(oh.to(at::kDouble), tol, tol)) << up << " " << down << " " << dtype;
    }
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry upfirdn2d_api{
    "mmops::upfirdn2d", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::upfirdn2d(a[0].toTensor(), a[1].toTensor(), a[2].toIntVector(),
                                                     a[3].toIntVector(), a[4].toIntVector())};
    }};

} // namespace

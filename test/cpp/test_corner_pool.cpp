// C++ face of mmops::corner_pool: the public API against a loop reference (the
// window of each output, nearest maximum first), autograd from C++, finite
// differences, the tie rule, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "test_support.h"

namespace {

const std::vector<std::string> kModes{"top", "bottom", "left", "right"};

// The argmax of every output along the pooled axis, from the definition: the
// window of (h, w), walked from the nearest position outwards; the first NaN,
// else the first position holding the window's maximum.
at::Tensor argmax_reference(const at::Tensor& x, const std::string& mode) {
  const bool h_axis = mode == "top" || mode == "bottom";
  const bool towards_end = mode == "top" || mode == "left";
  at::Tensor arg = at::empty(x.sizes(), at::kLong);
  auto a = arg.accessor<int64_t, 4>();
  auto s = x.accessor<double, 4>();
  const int64_t length = h_axis ? x.size(2) : x.size(3);
  for (int64_t n = 0; n < x.size(0); ++n)
    for (int64_t c = 0; c < x.size(1); ++c)
      for (int64_t h = 0; h < x.size(2); ++h)
        for (int64_t w = 0; w < x.size(3); ++w) {
          const int64_t k = h_axis ? h : w;
          auto value = [&](int64_t j) { return h_axis ? s[n][c][j][w] : s[n][c][h][j]; };
          int64_t best = k;
          bool nan = std::isnan(value(k));
          for (int64_t j = k; towards_end ? j < length : j >= 0; j += towards_end ? 1 : -1) {
            if (nan) {
              break;
            }
            if (std::isnan(value(j))) {
              best = j;
              nan = true;
            } else if (value(j) > value(best)) {
              best = j;
            }
          }
          a[n][c][h][w] = best;
        }
  return arg;
}

int64_t dim_of(const std::string& mode) {
  return mode == "top" || mode == "bottom" ? 2 : 3;
}

TEST(CornerPool, MatchesLoopReference) {
  at::manual_seed(0);
  for (const auto& mode : kModes) {
    for (const bool ties : {false, true}) {
      const at::Tensor x =
          ties ? at::randint(-2, 3, {2, 3, 7, 40}, at::kDouble) : at::randn({2, 3, 7, 40}, at::kDouble);
      const at::Tensor go = at::randint(-4, 5, x.sizes(), at::kDouble);
      const at::Tensor arg = argmax_reference(x, mode);
      const at::Tensor xg = x.clone().requires_grad_(true);
      const at::Tensor out = mmops::corner_pool(xg, mode);
      out.backward(go);
      EXPECT_TRUE(at::equal(out, at::take_along_dim(x, arg, dim_of(mode)))) << mode;
      EXPECT_TRUE(at::equal(xg.grad(), at::zeros_like(x).scatter_add_(dim_of(mode), arg, go))) << mode;
      // channels_last gives the same values, in channels_last
      const at::Tensor cl = mmops::corner_pool(x.contiguous(at::MemoryFormat::ChannelsLast), mode);
      EXPECT_TRUE(cl.is_contiguous(at::MemoryFormat::ChannelsLast)) << mode;
      EXPECT_TRUE(at::equal(cl, out)) << mode;
    }
  }
}

TEST(CornerPool, MmcvKnownVector) {
  // mmcv's tests/test_ops/test_corner_pool.py, right pool of its second row
  const at::Tensor x = at::tensor({2.0, 1.0, 3.0, 0.0, 2.0}).view({1, 1, 1, 5});
  EXPECT_TRUE(at::equal(mmops::corner_pool(x, "right"), at::tensor({2.0, 2.0, 3.0, 3.0, 3.0}).view({1, 1, 1, 5})));
  EXPECT_TRUE(at::equal(mmops::corner_pool(x, "left"), at::tensor({3.0, 3.0, 3.0, 2.0, 2.0}).view({1, 1, 1, 5})));
}

TEST(CornerPool, TiesGoToTheNearestPosition) {
  const at::Tensor x = at::tensor({1.0, 3.0, 3.0, 2.0, 3.0}, at::kDouble).view({1, 1, 5, 1}).requires_grad_(true);
  mmops::corner_pool(x, "bottom")
      .backward(at::tensor({1.0, 10.0, 100.0, 1000.0, 10000.0}, at::kDouble).view({1, 1, 5, 1}));
  EXPECT_TRUE(at::equal(x.grad().flatten(), at::tensor({1.0, 10.0, 1100.0, 0.0, 10000.0}, at::kDouble)));
}

TEST(CornerPool, FiniteDifferences) {
  at::manual_seed(1);
  // distinct values: the argmax does not move under the perturbation
  const at::Tensor x0 = at::randperm(2 * 2 * 4 * 5, at::kDouble).div(3).view({2, 2, 4, 5});
  const at::Tensor weights = at::randn({2, 2, 4, 5}, at::kDouble);
  for (const auto& mode : kModes) {
    auto loss = [&](const at::Tensor& x) { return (mmops::corner_pool(x, mode) * weights).sum(); };
    const at::Tensor x = x0.clone().requires_grad_(true);
    loss(x).backward();
    const double eps = 1e-6;
    torch::NoGradGuard no_grad;
    for (int64_t i = 0; i < x0.numel(); i += 3) {
      at::Tensor plus = x0.clone(), minus = x0.clone();
      plus.view(-1)[i] += eps;
      minus.view(-1)[i] -= eps;
      const double numeric = (loss(plus).item<double>() - loss(minus).item<double>()) / (2 * eps);
      EXPECT_NEAR(x.grad().view(-1)[i].item<double>(), numeric, 1e-6) << mode << " input element " << i;
    }
  }
}

TEST(CornerPool, EmptyInputs) {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{0, 2, 3, 4}, {2, 3, 0, 4}, {2, 3, 4, 0}}) {
    const at::Tensor x = at::randn(shape).requires_grad_(true);
    const at::Tensor out = mmops::corner_pool(x, "top");
    EXPECT_EQ(out.sizes(), x.sizes());
    out.sum().backward();
    EXPECT_EQ(x.grad().sizes(), x.sizes());
  }
}

TEST(CornerPool, ErrorsNameTheArgument) {
  const at::Tensor x = at::randn({2, 3, 4, 5});
  EXPECT_ERROR_MENTIONS(mmops::corner_pool(x[0], "top"), "expected input to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::corner_pool(x.to(at::kInt), "top"), "expected input to have a floating point dtype");
  EXPECT_ERROR_MENTIONS(mmops::corner_pool(x, "corner"), "mode must be \"top\", \"bottom\", \"left\" or \"right\"");
}

TEST(CornerPool, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(2);
  const at::Tensor x0 = at::randint(-3, 4, {2, 5, 37, 100});
  const at::Tensor go0 = at::randn({2, 5, 37, 100});
  for (const auto& mode : kModes) {
    for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
      for (auto format : {at::MemoryFormat::Contiguous, at::MemoryFormat::ChannelsLast}) {
        const at::Tensor xh = x0.to(dtype).contiguous(format).requires_grad_(true);
        const at::Tensor xc = x0.to(dtype).cuda().contiguous(format).requires_grad_(true);
        const at::Tensor oh = mmops::corner_pool(xh, mode), oc = mmops::corner_pool(xc, mode);
        EXPECT_TRUE(at::equal(oc.cpu(), oh)) << mode << " " << dtype;
        oh.backward(go0.to(dtype));
        oc.backward(go0.to(dtype).cuda());
        EXPECT_TRUE(at::equal(xc.grad().cpu(), xh.grad())) << mode << " " << dtype;
      }
    }
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry corner_pool_api{
    "mmops::corner_pool", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::corner_pool(a[0].toTensor(), a[1].toStringRef())};
    }};

} // namespace

// C++ face of mmops::rotated_feature_align: the public API against a loop
// reference, autograd from C++, finite differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

#include <cmath>

namespace {

// mmcv's border-clamped bilinear sample of plane (n, c) at (y, x), as loops.
double sample(const at::TensorAccessor<double, 4>& f, int64_t n, int64_t c, double y, double x) {
  const int64_t H = f.size(2), W = f.size(3);
  if (!(y >= -1 && y <= H && x >= -1 && x <= W)) {
    return 0.0;
  }
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x), y1 = y0 + 1, x1 = x0 + 1;
  if (y0 >= H - 1) {
    y0 = y1 = H - 1;
    y = static_cast<double>(y0);
  }
  if (x0 >= W - 1) {
    x0 = x1 = W - 1;
    x = static_cast<double>(x0);
  }
  const double ly = y - y0, lx = x - x0;
  return (1 - ly) * (1 - lx) * f[n][c][y0][x0] + (1 - ly) * lx * f[n][c][y0][x1] + ly * (1 - lx) * f[n][c][y1][x0] +
         ly * lx * f[n][c][y1][x1];
}

at::Tensor reference(const at::Tensor& features, const at::Tensor& boxes, double scale, int points) {
  at::Tensor out = features.clone();
  auto f = features.accessor<double, 4>();
  auto b = boxes.accessor<double, 4>();
  auto o = out.accessor<double, 4>();
  for (int64_t n = 0; n < features.size(0); ++n)
    for (int64_t h = 0; h < features.size(2); ++h)
      for (int64_t w = 0; w < features.size(3); ++w) {
        const double cy = b[n][h][w][0] * scale, cx = b[n][h][w][1] * scale;
        std::vector<std::pair<double, double>> pts{{cy, cx}};
        if (points == 5) {
          const double hw = b[n][h][w][2] * scale / 2, hh = b[n][h][w][3] * scale / 2, a = b[n][h][w][4];
          const double wx = std::cos(a) * hw, wy = std::sin(a) * hw, hx = -std::sin(a) * hh, hy = std::cos(a) * hh;
          for (const auto& [sx, sy] : std::vector<std::pair<int, int>>{{1, 1}, {-1, 1}, {-1, -1}, {1, -1}}) {
            pts.emplace_back(cy + sx * wy + sy * hy, cx + sx * wx + sy * hx);
          }
        }
        for (int64_t c = 0; c < features.size(1); ++c)
          for (const auto& [y, x] : pts) {
            o[n][c][h][w] += sample(f, n, c, y, x);
          }
      }
  return out;
}

at::Tensor random_boxes(int64_t N, int64_t H, int64_t W, double scale) {
  const at::Tensor r = at::rand({N, H, W, 5}, at::kDouble);
  return at::stack({(r.select(3, 0) * (H + 4) - 2) / scale, (r.select(3, 1) * (W + 4) - 2) / scale,
                    r.select(3, 2) * W / scale, r.select(3, 3) * H / scale, (r.select(3, 4) * 2 - 1) * M_PI},
                   3);
}

TEST(RotatedFeatureAlign, MatchesLoopReference) {
  at::manual_seed(0);
  for (const int points : {1, 5}) {
    for (const double scale : {1.0, 0.5, 0.125}) {
      const at::Tensor f = at::randn({2, 3, 5, 7}, at::kDouble);
      const at::Tensor b = random_boxes(2, 5, 7, scale);
      const at::Tensor expected = reference(f, b, scale, points);
      EXPECT_TRUE(at::allclose(mmops::rotated_feature_align(f, b, scale, points), expected, 1e-12, 1e-12))
          << points << " " << scale;
      const at::Tensor cl = f.contiguous(at::MemoryFormat::ChannelsLast);
      const at::Tensor out = mmops::rotated_feature_align(cl, b, scale, points);
      EXPECT_TRUE(out.is_contiguous(at::MemoryFormat::ChannelsLast));
      EXPECT_TRUE(at::allclose(out, expected, 1e-12, 1e-12)) << "channels_last " << points << " " << scale;
    }
  }
}

TEST(RotatedFeatureAlign, FiniteDifferences) {
  at::manual_seed(1);
  const at::Tensor f0 = at::randn({1, 2, 4, 5}, at::kDouble);
  const at::Tensor b = random_boxes(1, 4, 5, 0.5);
  const at::Tensor weights = at::randn({1, 2, 4, 5}, at::kDouble);
  auto loss = [&](const at::Tensor& f) { return (mmops::rotated_feature_align(f, b, 0.5, 5) * weights).sum(); };
  const at::Tensor f = f0.clone().requires_grad_(true);
  loss(f).backward();
  const double eps = 1e-6;
  torch::NoGradGuard no_grad;
  for (int64_t i = 0; i < f0.numel(); ++i) {
    at::Tensor plus = f0.clone(), minus = f0.clone();
    plus.view(-1)[i] += eps;
    minus.view(-1)[i] -= eps;
    const double numeric = (loss(plus).item<double>() - loss(minus).item<double>()) / (2 * eps);
    EXPECT_NEAR(f.grad().view(-1)[i].item<double>(), numeric, 1e-6) << "features element " << i;
  }
}

TEST(RotatedFeatureAlign, EmptyInputs) {
  const at::Tensor f = at::randn({2, 0, 3, 4}).requires_grad_(true);
  const at::Tensor out = mmops::rotated_feature_align(f, at::zeros({2, 3, 4, 5}), 0.5, 5);
  EXPECT_EQ(out.sizes(), at::IntArrayRef({2, 0, 3, 4}));
  out.sum().backward();
  EXPECT_EQ(f.grad().sizes(), f.sizes());
}

TEST(RotatedFeatureAlign, ErrorsNameTheArgument) {
  const at::Tensor f = at::randn({1, 2, 3, 4});
  const at::Tensor b = at::zeros({1, 3, 4, 5});
  EXPECT_ERROR_MENTIONS(mmops::rotated_feature_align(f[0], b), "expected features to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::rotated_feature_align(f, b.narrow(3, 0, 4)), "best_rbboxes to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::rotated_feature_align(f, b.narrow(1, 0, 2)), "expected best_rbboxes of shape");
  EXPECT_ERROR_MENTIONS(mmops::rotated_feature_align(f, b.to(at::kDouble)), "dtype of features");
  EXPECT_ERROR_MENTIONS(mmops::rotated_feature_align(f, b, 0.125, 3), "points must be 1 or 5");
  EXPECT_ERROR_MENTIONS(mmops::rotated_feature_align(f, b, 0.0, 1), "spatial_scale must be a positive");
}

TEST(RotatedFeatureAlign, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(2);
  const at::Tensor f0 = at::randn({2, 40, 9, 13});
  const at::Tensor b0 = random_boxes(2, 9, 13, 0.25).to(at::kFloat);
  for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    for (const int points : {1, 5}) {
      const at::Tensor fc = f0.to(dtype).cuda().detach().requires_grad_(true);
      const at::Tensor fh = f0.to(dtype).detach().requires_grad_(true);
      const at::Tensor oc = mmops::rotated_feature_align(fc, b0.to(dtype).cuda(), 0.25, points);
      const at::Tensor oh = mmops::rotated_feature_align(fh, b0.to(dtype), 0.25, points);
      const double tol = dtype == at::kFloat || dtype == at::kDouble ? 1e-5 : 5e-2;
      EXPECT_TRUE(at::allclose(oc.cpu().to(at::kDouble), oh.to(at::kDouble), tol, tol)) << dtype;
      oc.sum().backward();
      oh.sum().backward();
      EXPECT_TRUE(at::allclose(fc.grad().cpu().to(at::kDouble), fh.grad().to(at::kDouble), tol, tol)) << dtype;
    }
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry rotated_feature_align_api{
    "mmops::rotated_feature_align", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{
          mmops::rotated_feature_align(a[0].toTensor(), a[1].toTensor(), a[2].toDouble(), a[3].toInt())};
    }};

} // namespace

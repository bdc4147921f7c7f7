// C++ face of mmops::diff_iou_rotated_2d / _3d: the public API, mmcv's known
// vectors, finite differences of the analytic backward, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <cmath>

#include "test_support.h"

namespace {

// [1, n, 5 or 7] pairs: box2 is box1 moved by up to `spread`.
std::pair<at::Tensor, at::Tensor> random_pairs(int64_t n, bool three_d, double spread) {
  const auto options = at::TensorOptions().dtype(at::kDouble);
  const int64_t dims = three_d ? 3 : 2;
  auto boxes = [&](const at::Tensor& centre) {
    return at::cat({centre, at::rand({1, n, dims}, options) * 5 + 1, (at::rand({1, n, 1}, options) * 2 - 1) * M_PI}, 2);
  };
  const at::Tensor centre = at::rand({1, n, dims}, options) * 10;
  return {boxes(centre), boxes(centre + (at::rand({1, n, dims}, options) * 2 - 1) * spread)};
}

at::Tensor call(bool three_d, const at::Tensor& a, const at::Tensor& b) {
  return three_d ? mmops::diff_iou_rotated_3d(a, b) : mmops::diff_iou_rotated_2d(a, b);
}

TEST(DiffIouRotated, MmcvKnownVectors) {
  const double q = M_PI / 4, r = M_PI / 2;
  const at::Tensor b1 = at::tensor({0.5, 0.5, 1.0, 1.0, 0.0}).repeat({5}).reshape({1, 5, 5});
  const at::Tensor b2 = at::tensor({0.5, 0.5, 1.0, 1.0, 0.0, 0.5, 0.5, 1.0, 1.0, r,   0.5, 0.5, 1.0,
                                    1.0, q,   1.0, 1.0, 1.0, 1.0, 0.0, 1.5, 1.5, 1.0, 1.0, 0.0})
                            .reshape({1, 5, 5});
  EXPECT_TRUE(at::allclose(mmops::diff_iou_rotated_2d(b1.to(at::kFloat), b2.to(at::kFloat)),
                           at::tensor({1.0, 1.0, 0.7071, 1.0 / 7, 0.0}, at::kFloat).reshape({1, 5}), 0, 1e-4));
  const at::Tensor c1 = at::tensor({0.5, 0.5, 0.5, 1.0, 1.0, 1.0, 0.0}).repeat({5}).reshape({1, 5, 7});
  const at::Tensor c2 =
      at::tensor({0.5, 0.5, 0.5, 1.0, 1.0, 1.0, 0.0, 0.5, 0.5, 0.5, 1.0,  1.0,  2.0,  r,   0.5, 0.5, 0.5, 1.0,
                  1.0, 1.0, q,   1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, -1.5, -1.5, -1.5, 2.5, 2.5, 2.5, 0.0})
          .reshape({1, 5, 7});
  EXPECT_TRUE(at::allclose(mmops::diff_iou_rotated_3d(c1, c2),
                           at::tensor({1.0, 0.5, 0.7071, 1.0 / 15, 0.0}, at::kDouble).reshape({1, 5}), 0, 1e-4));
}

TEST(DiffIouRotated, FiniteDifferenceGradient) {
  at::manual_seed(3);
  for (bool three_d : {false, true}) {
    auto [b1, b2] = random_pairs(6, three_d, 1.5);
    b1.requires_grad_(true);
    b2.requires_grad_(true);
    const at::Tensor w = at::rand({1, 6}, at::kDouble);
    (call(three_d, b1, b2) * w).sum().backward();
    const double eps = 1e-6;
    for (const at::Tensor& x : {b1, b2}) {
      const at::Tensor numeric = at::zeros_like(x);
      for (int64_t k = 0; k < x.numel(); ++k) {
        at::NoGradGuard no_grad;
        const double old = x.view({-1})[k].item<double>();
        x.view({-1})[k] = old + eps;
        const double plus = (call(three_d, b1, b2) * w).sum().item<double>();
        x.view({-1})[k] = old - eps;
        const double minus = (call(three_d, b1, b2) * w).sum().item<double>();
        x.view({-1})[k] = old;
        numeric.view({-1})[k] = (plus - minus) / (2 * eps);
      }
      EXPECT_TRUE(at::allclose(x.grad(), numeric, 1e-5, 1e-6)) << three_d << "\n" << x.grad() << numeric;
    }
  }
}

TEST(DiffIouRotated, IdenticalAndDegenerateBoxes) {
  const at::Tensor same = at::tensor({3.0, -2.0, 4.0, 2.0, 0.7, 1.0, 1.0, 0.0, 2.0, 0.3}).reshape({1, 2, 5});
  const at::Tensor good = at::tensor({3.0, -2.0, 4.0, 2.0, 0.7, 1.0, 1.0, 2.0, 2.0, 0.3}).reshape({1, 2, 5});
  const at::Tensor a = same.clone().requires_grad_(true);
  const at::Tensor iou = mmops::diff_iou_rotated_2d(a, good);
  EXPECT_EQ(iou[0][0].item<double>(), 1.0);
  EXPECT_EQ(iou[0][1].item<double>(), 0.0); // w = 0
  iou.sum().backward();
  EXPECT_TRUE(at::isfinite(a.grad()).all().item<bool>());
  EXPECT_TRUE((a.grad()[0][1] == 0).all().item<bool>());
}

TEST(DiffIouRotated, EmptyInputs) {
  const at::Tensor e = at::zeros({0, 3, 7}).requires_grad_(true);
  const at::Tensor out = mmops::diff_iou_rotated_3d(e, e);
  EXPECT_EQ(out.sizes(), at::IntArrayRef({0, 3}));
  out.sum().backward();
  EXPECT_EQ(e.grad().sizes(), e.sizes());
}

TEST(DiffIouRotated, BadArgumentsRaiseClearErrors) {
  EXPECT_ERROR_MENTIONS(mmops::diff_iou_rotated_2d(at::zeros({2, 3, 4}), at::zeros({2, 3, 5})),
                        "expected box1 to be a 3-D tensor of shape [B, N, 5]");
  EXPECT_ERROR_MENTIONS(mmops::diff_iou_rotated_3d(at::zeros({2, 3, 7}), at::zeros({2, 4, 7})),
                        "expected box3d2 of the shape of box3d1");
  EXPECT_ERROR_MENTIONS(mmops::diff_iou_rotated_2d(at::zeros({2, 3, 5}), at::zeros({2, 3, 5}, at::kDouble)),
                        "expected box2 to have the dtype of box1");
  EXPECT_ERROR_MENTIONS(mmops::diff_iou_rotated_2d(at::zeros({2, 3, 5}, at::kInt), at::zeros({2, 3, 5}, at::kInt)),
                        "floating point dtype, but got Int");
}

TEST(DiffIouRotated, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(7);
  for (bool three_d : {false, true}) {
    auto [b1, b2] = random_pairs(5000, three_d, 2.0);
    for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
      const at::Tensor cpu = call(three_d, b1.to(dtype), b2.to(dtype));
      const at::Tensor gpu = call(three_d, b1.to(dtype).cuda(), b2.to(dtype).cuda()).cpu();
      EXPECT_TRUE(at::allclose(gpu, cpu, 1e-4, 1e-5)) << three_d << dtype;
    }
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry diff_iou_rotated_2d_api{
    "mmops::diff_iou_rotated_2d", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::diff_iou_rotated_2d(a[0].toTensor(), a[1].toTensor())};
    }};
const mmops_test::CppApiEntry diff_iou_rotated_3d_api{
    "mmops::diff_iou_rotated_3d", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::diff_iou_rotated_3d(a[0].toTensor(), a[1].toTensor())};
    }};

} // namespace

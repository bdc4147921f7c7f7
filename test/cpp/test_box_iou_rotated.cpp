// C++ face of mmops::box_iou_rotated and box_iou_quadri: the public API, mmcv's
// known vectors, exact small cases, errors, CUDA == CPU. Not differentiable
// (mmcv has no gradient either): no finite-difference check.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <cmath>

#include "test_support.h"

namespace {

at::Tensor random_rotated(int64_t n, double image, at::ScalarType dtype) {
  const auto options = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor xy = at::rand({n, 2}, options) * image;
  const at::Tensor wh = at::rand({n, 2}, options) * 8.0 + 0.5;
  const at::Tensor a = (at::rand({n, 1}, options) * 2 - 1) * M_PI;
  return at::cat({xy, wh, a}, 1).to(dtype);
}

// [N, 8] corners of [N, 5] boxes.
at::Tensor corners(const at::Tensor& boxes) {
  const at::Tensor b = boxes.to(at::kDouble);
  const at::Tensor c = b.select(1, 4).cos(), s = b.select(1, 4).sin();
  const at::Tensor ux = c * b.select(1, 2) / 2, uy = s * b.select(1, 2) / 2;
  const at::Tensor vx = -s * b.select(1, 3) / 2, vy = c * b.select(1, 3) / 2;
  const at::Tensor x = b.select(1, 0), y = b.select(1, 1);
  return at::stack(
      {x - ux - vx, y - uy - vy, x + ux - vx, y + uy - vy, x + ux + vx, y + uy + vy, x - ux + vx, y - uy + vy}, 1);
}

TEST(BoxIouRotated, MmcvKnownVectors) {
  const at::Tensor b1 =
      at::tensor({1.0, 1.0, 3.0, 4.0, 0.5, 2.0, 2.0, 3.0, 4.0, 0.6, 7.0, 7.0, 8.0, 8.0, 0.4}, at::kFloat)
          .reshape({3, 5});
  const at::Tensor b2 =
      at::tensor({0.0, 2.0, 2.0, 5.0, 0.3, 2.0, 1.0, 3.0, 3.0, 0.5, 5.0, 5.0, 6.0, 7.0, 0.4}, at::kFloat)
          .reshape({3, 5});
  const at::Tensor iou =
      at::tensor({0.3708, 0.4351, 0.0, 0.1104, 0.4487, 0.0424, 0.0, 0.0, 0.3622}, at::kFloat).reshape({3, 3});
  const at::Tensor iof =
      at::tensor({0.4959, 0.5306, 0.0, 0.1823, 0.5420, 0.1832, 0.0, 0.0, 0.4404}, at::kFloat).reshape({3, 3});
  EXPECT_TRUE(at::allclose(mmops::box_iou_rotated(b1, b2), iou, 0, 1e-4));
  EXPECT_TRUE(at::allclose(mmops::box_iou_rotated(b1, b2, "iof"), iof, 0, 1e-4));
  EXPECT_TRUE(at::allclose(mmops::box_iou_rotated(b1, b2, "iou", true), iou.diagonal(), 0, 1e-4));
  const at::Tensor flip = at::tensor({1.0, 1.0, 1.0, 1.0, -1.0}, at::kFloat);
  EXPECT_TRUE(at::allclose(mmops::box_iou_rotated(b1 * flip, b2 * flip, "iou", false, false), iou, 0, 1e-4));
}

TEST(BoxIouRotated, ExactSmallCases) {
  const auto pair = [](std::vector<double> a, std::vector<double> b) {
    return mmops::box_iou_rotated(at::tensor(a).reshape({1, 5}), at::tensor(b).reshape({1, 5})).item<double>();
  };
  EXPECT_EQ(pair({3.7, -2.1, 5.3, 0.9, 0.3}, {3.7, -2.1, 5.3, 0.9, 0.3}), 1.0);
  EXPECT_NEAR(pair({0, 0, 4, 2, 0}, {1, 0, 4, 2, 0}), 0.6, 1e-12);
  EXPECT_NEAR(pair({0, 0, 4, 2, 0}, {0, 0, 4, 2, M_PI / 2}), 1.0 / 3.0, 1e-12);
  EXPECT_EQ(pair({0, 0, 2, 2, 0}, {2, 2, 2, 2, 0}), 0.0);
  EXPECT_EQ(pair({0, 0, 0, 2, 0}, {0, 0, 2, 2, 0}), 0.0);
  EXPECT_EQ(pair({NAN, 0, 2, 2, 0}, {0, 0, 2, 2, 0}), 0.0);
  // quadrilaterals: the corners of rotated boxes give the rotated IoU
  at::manual_seed(3);
  const at::Tensor b1 = random_rotated(6, 10.0, at::kDouble), b2 = random_rotated(5, 10.0, at::kDouble);
  EXPECT_TRUE(
      at::allclose(mmops::box_iou_quadri(corners(b1), corners(b2)), mmops::box_iou_rotated(b1, b2), 1e-9, 1e-12));
  EXPECT_EQ(mmops::box_iou_rotated(b1.slice(0, 0, 0), b2).sizes(), (std::vector<int64_t>{0, 5}));
}

TEST(BoxIouRotated, BadArgumentsRaiseClearErrors) {
  EXPECT_ERROR_MENTIONS(mmops::box_iou_rotated(at::zeros({3, 4}), at::zeros({2, 5})),
                        "expected boxes1 to be a 2-D tensor of shape [N, 5]");
  EXPECT_ERROR_MENTIONS(mmops::box_iou_rotated(at::zeros({3, 5}), at::zeros({2, 5}), "giou"),
                        "mode must be \"iou\" or \"iof\", but got \"giou\"");
  EXPECT_ERROR_MENTIONS(mmops::box_iou_rotated(at::zeros({3, 5}), at::zeros({2, 5}), "iou", true),
                        "aligned=True needs as many boxes1 as boxes2, but got 3 and 2");
  EXPECT_ERROR_MENTIONS(mmops::box_iou_quadri(at::zeros({3, 8}), at::zeros({2, 8}, at::kDouble)),
                        "expected boxes2 to have the dtype of boxes1");
  EXPECT_ERROR_MENTIONS(mmops::box_iou_quadri(at::zeros({3, 5}), at::zeros({2, 8})),
                        "mmops::box_iou_quadri: expected boxes1 to be a 2-D tensor of shape [N, 8]");
}

TEST(BoxIouRotated, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(7);
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    const at::Tensor b1 = random_rotated(300, 100.0, dtype), b2 = random_rotated(500, 100.0, dtype);
    EXPECT_TRUE(at::allclose(mmops::box_iou_rotated(b1.cuda(), b2.cuda()).cpu().to(at::kDouble),
                             mmops::box_iou_rotated(b1, b2).to(at::kDouble), 1e-2, 1e-3));
    const at::Tensor q1 = corners(b1).to(dtype), q2 = corners(b2).to(dtype);
    EXPECT_TRUE(at::allclose(mmops::box_iou_quadri(q1.cuda(), q2.cuda(), "iof").cpu().to(at::kDouble),
                             mmops::box_iou_quadri(q1, q2, "iof").to(at::kDouble), 1e-2, 1e-3));
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry box_iou_rotated_api{
    "mmops::box_iou_rotated", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{
          mmops::box_iou_rotated(a[0].toTensor(), a[1].toTensor(), a[2].toStringRef(), a[3].toBool(), a[4].toBool())};
    }};
const mmops_test::CppApiEntry box_iou_quadri_api{
    "mmops::box_iou_quadri", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{
          mmops::box_iou_quadri(a[0].toTensor(), a[1].toTensor(), a[2].toStringRef(), a[3].toBool())};
    }};

} // namespace

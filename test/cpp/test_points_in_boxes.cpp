// C++ face of mmops::points_in_boxes_part / _all: the public API on mmcv's
// known vectors, the boundary rule, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

#include <cmath>

namespace {

at::Tensor mmcv_points() {
  return at::tensor({1.0,   2.0,   3.3,  1.2,   2.5,   3.0,  0.8, 2.1, 3.5,   1.6, 2.6, 3.6,  0.8,   1.2,   3.9,
                     -9.2,  21.0,  18.2, 3.8,   7.9,   6.3,  4.7, 3.5, -12.2, 3.8, 7.6, -2.0, -10.6, -12.9, -20.0,
                     -16.0, -18.0, 9.0,  -21.3, -52.0, -5.0, 0.0, 0.0, 0.0,   6.0, 7.0, 8.0,  -2.0,  -3.0,  -4.0})
      .reshape({1, 15, 3});
}

at::Tensor mmcv_boxes() {
  return at::tensor({1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.3, -10.0, 23.0, 16.0, 10.0, 20.0, 20.0, 0.5}).reshape({1, 2, 7});
}

TEST(PointsInBoxes, MmcvKnownVectors) {
  for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    const at::Tensor points = mmcv_points().to(dtype), boxes = mmcv_boxes().to(dtype);
    at::Tensor expected = at::zeros({1, 15, 2}, at::kInt);
    expected.slice(1, 0, 5).select(2, 0).fill_(1);
    expected[0][5][1] = 1;
    EXPECT_TRUE(at::equal(mmops::points_in_boxes_all(points, boxes), expected)) << dtype;
    const at::Tensor first = mmops::points_in_boxes_part(points, boxes);
    EXPECT_EQ(first.scalar_type(), at::kInt);
    EXPECT_TRUE(at::equal(
        first, at::tensor({0, 0, 0, 0, 0, 1, -1, -1, -1, -1, -1, -1, -1, -1, -1}, at::kInt).reshape({1, 15})));
  }
}

TEST(PointsInBoxes, BoundaryRuleAndNonFinite) {
  const at::Tensor box = at::tensor({0.0, 0.0, 0.0, 2.0, 4.0, 2.0, 0.0}, at::kDouble).reshape({1, 1, 7});
  const double nan = std::nan("");
  // centre, side face x, top face, bottom face, NaN
  const at::Tensor points =
      at::tensor({0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, nan, 0.0, 1.0}, at::kDouble)
          .reshape({1, 5, 3});
  EXPECT_TRUE(at::equal(mmops::points_in_boxes_all(points, box).view({-1}), at::tensor({1, 0, 1, 1, 0}, at::kInt)));
}

TEST(PointsInBoxes, EmptyAndErrors) {
  EXPECT_EQ(mmops::points_in_boxes_all(at::zeros({2, 0, 3}), at::zeros({2, 4, 7})).sizes(),
            (std::vector<int64_t>{2, 0, 4}));
  EXPECT_EQ(mmops::points_in_boxes_part(at::zeros({2, 5, 3}), at::zeros({2, 0, 7})).sizes(),
            (std::vector<int64_t>{2, 5}));
  EXPECT_ERROR_MENTIONS(mmops::points_in_boxes_all(at::zeros({2, 3}), at::zeros({1, 3, 7})),
                        "expected points to be a 3-D tensor of shape [B, N, 3]");
  EXPECT_ERROR_MENTIONS(mmops::points_in_boxes_part(at::zeros({2, 3, 3}), at::zeros({1, 3, 7})),
                        "expected boxes to have the batch size of points (2), but got 1");
  EXPECT_ERROR_MENTIONS(mmops::points_in_boxes_part(at::zeros({1, 3, 3}), at::zeros({1, 3, 7}, at::kDouble)),
                        "expected boxes to have the dtype of points");
}

TEST(PointsInBoxes, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(4);
  const at::Tensor boxes = at::cat({at::rand({2, 300, 2}) * 40 - 20, at::rand({2, 300, 1}),
                                    at::rand({2, 300, 3}) * 5 + 1, at::rand({2, 300, 1}) * 6 - 3},
                                   2);
  const at::Tensor points = at::rand({2, 5000, 3}) * 44 - 22;
  EXPECT_TRUE(at::equal(mmops::points_in_boxes_all(points.cuda(), boxes.cuda()).cpu(),
                        mmops::points_in_boxes_all(points, boxes)));
  EXPECT_TRUE(at::equal(mmops::points_in_boxes_part(points.cuda(), boxes.cuda()).cpu(),
                        mmops::points_in_boxes_part(points, boxes)));
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry points_in_boxes_part_api{
    "mmops::points_in_boxes_part", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::points_in_boxes_part(a[0].toTensor(), a[1].toTensor())};
    }};
const mmops_test::CppApiEntry points_in_boxes_all_api{
    "mmops::points_in_boxes_all", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::points_in_boxes_all(a[0].toTensor(), a[1].toTensor())};
    }};

} // namespace

// C++ face of mmops::points_in_polygons: the public API on mmcv's known
// vectors and the boundary rule, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

namespace {

TEST(PointsInPolygons, MmcvKnownVectors) {
  const at::Tensor points =
      at::tensor({300.0, 300.0, 400.0, 400.0, 100.0, 100.0, 300.0, 250.0, 100.0, 0.0}).reshape({5, 2});
  const at::Tensor polygons = at::tensor({200.0, 200.0, 400.0, 400.0, 500.0, 200.0, 400.0, 100.0, //
                                          400.0, 400.0, 500.0, 500.0, 600.0, 300.0, 500.0, 200.0, //
                                          300.0, 300.0, 600.0, 700.0, 700.0, 700.0, 700.0, 100.0})
                                  .reshape({3, 8});
  const at::Tensor expected =
      at::tensor({0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0}).reshape({5, 3});
  for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    EXPECT_TRUE(at::equal(mmops::points_in_polygons(points.to(dtype), polygons.to(dtype)), expected.to(dtype)));
  }
}

TEST(PointsInPolygons, BoundaryRuleAndNonFinite) {
  const at::Tensor square = at::tensor({0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0}).reshape({1, 8});
  const double nan = std::nan("");
  const at::Tensor points = at::tensor({0.5, 0.5, 0.0, 0.5, 0.5, 1.0, 0.0, 0.0, nan, 0.5}).reshape({5, 2});
  EXPECT_TRUE(at::equal(mmops::points_in_polygons(points, square).view({-1}), at::tensor({1.0, 0.0, 1.0, 0.0, 0.0})));
}

TEST(PointsInPolygons, EmptyAndErrors) {
  EXPECT_EQ(mmops::points_in_polygons(at::zeros({0, 2}), at::zeros({3, 8})).sizes(), (std::vector<int64_t>{0, 3}));
  EXPECT_ERROR_MENTIONS(mmops::points_in_polygons(at::zeros({2, 3}), at::zeros({3, 8})),
                        "expected points to be a 2-D tensor of shape [N, 2]");
  EXPECT_ERROR_MENTIONS(mmops::points_in_polygons(at::zeros({2, 2}), at::zeros({3, 8}, at::kDouble)),
                        "expected polygons to have the dtype of points");
}

TEST(PointsInPolygons, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(4);
  const at::Tensor points = at::rand({5000, 2}) * 100.0;
  const at::Tensor polygons = at::rand({70, 8}) * 100.0;
  EXPECT_TRUE(at::equal(mmops::points_in_polygons(points.cuda(), polygons.cuda()).cpu(),
                        mmops::points_in_polygons(points, polygons)));
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry points_in_polygons_api{
    "mmops::points_in_polygons", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::points_in_polygons(a[0].toTensor(), a[1].toTensor())};
    }};

} // namespace

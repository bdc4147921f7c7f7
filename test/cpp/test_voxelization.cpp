// C++ face of mmops::hard_voxelize, dynamic_voxelize and dynamic_scatter: the public
// API on hand-derived vectors (mmcv's floor rule, boundaries, NaN), a finite-difference
// gradient check of every reduction, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "test_support.h"

namespace {

const std::vector<double> kVoxel = {0.5, 0.5, 0.5};
const std::vector<double> kRange = {0.0, -40.0, -3.0, 70.4, 40.0, 1.0}; // 141 x 160 x 8 voxels

at::Tensor known_points() {
  const double nan = std::nan("");
  return at::tensor({0.1,  -39.9, -2.9, 1.0,  // (0, 0, 0)
                     10.2, 0.3,   0.6,  2.0,  // (7, 80, 20)
                     0.4,  -39.6, -2.6, 3.0,  // (0, 0, 0)
                     70.4, 0.0,   0.0,  4.0,  // (6, 80, 140): inside the rounded grid
                     5.0,  40.0,  0.0,  5.0,  // y == y_max: out
                     nan,  0.0,   0.0,  6.0,  // out
                     0.0,  -40.0, -3.0, 7.0,  // the range minimum: (0, 0, 0)
                     70.5, 0.0,   0.0,  8.0}) // x cell 141: out
      .reshape({8, 4});
}

TEST(Voxelization, DynamicKnownVector) {
  const at::Tensor expected =
      at::tensor({0, 0, 0, 7, 80, 20, 0, 0, 0, 6, 80, 140, -1, -1, -1, -1, -1, -1, 0, 0, 0, -1, -1, -1}, at::kInt)
          .reshape({8, 3});
  for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    EXPECT_TRUE(at::equal(mmops::dynamic_voxelize(known_points().to(dtype), kVoxel, kRange), expected));
  }
}

TEST(Voxelization, HardKnownVector) {
  const at::Tensor points = known_points().to(at::kFloat);
  const auto [voxels, coors, num] = mmops::hard_voxelize(points, kVoxel, kRange, /*max_points=*/2, /*max_voxels=*/20);
  EXPECT_TRUE(at::equal(coors, at::tensor({0, 0, 0, 7, 80, 20, 6, 80, 140}, at::kInt).reshape({3, 3})));
  EXPECT_TRUE(at::equal(num, at::tensor({2, 1, 1}, at::kInt)));
  EXPECT_TRUE(at::equal(voxels[0], points.index_select(0, at::tensor({0, 2}, at::kLong))));
  EXPECT_TRUE(at::equal(voxels[1][1], at::zeros({4})));
  // max_voxels = 1: only the voxel of the first point; max_points = 3: point 6 joins it
  const auto [v1, c1, n1] = mmops::hard_voxelize(points, kVoxel, kRange, 3, 1);
  EXPECT_EQ(c1.size(0), 1);
  EXPECT_TRUE(at::equal(v1[0], points.index_select(0, at::tensor({0, 2, 6}, at::kLong))));
}

TEST(DynamicScatter, Values) {
  const at::Tensor feats = at::tensor({1.0, -2.0, 3.0, 4.0, 5.0, 0.0, 7.0, 8.0, -1.0, 6.0}).reshape({5, 2});
  const at::Tensor coors = at::tensor({0, 1, 2, 0, 0, 1, 0, 1, 2, -1, 0, 0, 0, 0, 1}, at::kInt).reshape({5, 3});
  const at::Tensor expected_coors = at::tensor({0, 0, 1, 0, 1, 2}, at::kInt).reshape({2, 3});
  const std::vector<std::pair<std::string, std::vector<double>>> cases = {
      {"sum", {2.0, 10.0, 6.0, -2.0}}, {"mean", {1.0, 5.0, 3.0, -1.0}}, {"max", {3.0, 6.0, 5.0, 0.0}}};
  for (const auto& [reduce, values] : cases) {
    const auto [out, out_coors] = mmops::dynamic_scatter(feats, coors, reduce);
    EXPECT_TRUE(at::equal(out_coors, expected_coors)) << reduce;
    EXPECT_TRUE(at::allclose(out, at::tensor(values).reshape({2, 2}))) << reduce;
  }
}

TEST(DynamicScatter, FiniteDifferences) {
  at::manual_seed(3);
  const at::Tensor feats = at::randn({12, 3}, at::kDouble);
  const at::Tensor coors = at::randint(-1, 3, {12, 2}, at::kInt);
  for (const char* reduce : {"sum", "mean", "max"}) {
    mmops_test::expect_finite_differences(
        [&](const at::Tensor& x) {
          const at::Tensor out = std::get<0>(mmops::dynamic_scatter(x, coors, reduce));
          return (out * at::arange(out.numel(), at::kDouble).reshape(out.sizes())).sum();
        },
        feats);
  }
}

TEST(Voxelization, EmptyAndErrors) {
  const auto [voxels, coors, num] = mmops::hard_voxelize(at::zeros({0, 4}), kVoxel, kRange, 5, 10);
  EXPECT_EQ(voxels.sizes(), (std::vector<int64_t>{0, 5, 4}));
  EXPECT_EQ(std::get<0>(mmops::dynamic_scatter(at::zeros({0, 3}), at::zeros({0, 3}, at::kInt), "mean")).sizes(),
            (std::vector<int64_t>{0, 3}));
  EXPECT_ERROR_MENTIONS(mmops::dynamic_voxelize(at::zeros({2, 2}), kVoxel, kRange),
                        "expected points to be a 2-D tensor of shape [N, ndim] with ndim >= 3");
  EXPECT_ERROR_MENTIONS(mmops::hard_voxelize(at::zeros({2, 4}), kVoxel, kRange, 0, 10),
                        "expected max_points in [1, 2147483647], but got 0");
  EXPECT_ERROR_MENTIONS(mmops::dynamic_voxelize(at::zeros({2, 4}), {0.5, 0.5}, kRange),
                        "expected voxel_size to have 3 values");
  EXPECT_ERROR_MENTIONS(mmops::dynamic_scatter(at::zeros({2, 2}), at::zeros({2, 3}), "max"),
                        "expected coors to have dtype int32");
  EXPECT_ERROR_MENTIONS(mmops::dynamic_scatter(at::zeros({2, 2}), at::zeros({2, 3}, at::kInt), "min"),
                        "reduce must be \"sum\", \"mean\" or \"max\"");
}

TEST(Voxelization, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(4);
  const at::Tensor points =
      at::rand({20000, 4}) * at::tensor({80.0, 90.0, 5.0, 1.0}) - at::tensor({5.0, 45.0, 3.5, 0.0});
  const auto cpu = mmops::hard_voxelize(points, kVoxel, kRange, 5, 3000);
  const auto gpu = mmops::hard_voxelize(points.cuda(), kVoxel, kRange, 5, 3000);
  EXPECT_TRUE(at::equal(std::get<0>(gpu).cpu(), std::get<0>(cpu)));
  EXPECT_TRUE(at::equal(std::get<1>(gpu).cpu(), std::get<1>(cpu)));
  EXPECT_TRUE(at::equal(std::get<2>(gpu).cpu(), std::get<2>(cpu)));
  const at::Tensor coors = mmops::dynamic_voxelize(points, kVoxel, kRange);
  EXPECT_TRUE(at::equal(mmops::dynamic_voxelize(points.cuda(), kVoxel, kRange).cpu(), coors));
  for (const char* reduce : {"sum", "mean", "max"}) {
    const auto c = mmops::dynamic_scatter(points, coors, reduce);
    const auto g = mmops::dynamic_scatter(points.cuda(), coors.cuda(), reduce);
    EXPECT_TRUE(at::equal(std::get<1>(g).cpu(), std::get<1>(c))) << reduce;
    EXPECT_TRUE(at::equal(std::get<0>(g).cpu(), std::get<0>(c))) << reduce; // the same order of additions
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry dynamic_voxelize_api{
    "mmops::dynamic_voxelize", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{
          mmops::dynamic_voxelize(a[0].toTensor(), a[1].toDoubleVector(), a[2].toDoubleVector())};
    }};

const mmops_test::CppApiEntry hard_voxelize_api{"mmops::hard_voxelize", [](const mmops_test::ApiArgs& a) {
                                                  const auto [voxels, coors, num] = mmops::hard_voxelize(
                                                      a[0].toTensor(), a[1].toDoubleVector(), a[2].toDoubleVector(),
                                                      a[3].toInt(), a[4].toInt());
                                                  return mmops_test::ApiOutputs{voxels, coors, num};
                                                }};

const mmops_test::CppApiEntry dynamic_scatter_api{"mmops::dynamic_scatter", [](const mmops_test::ApiArgs& a) {
                                                    const auto [feats, coors] = mmops::dynamic_scatter(
                                                        a[0].toTensor(), a[1].toTensor(), a[2].toStringRef());
                                                    return mmops_test::ApiOutputs{feats, coors};
                                                  }};

} // namespace

// C++ face of mmops::furthest_point_sample(_with_dist): the public API on
// mmcv's known vectors, ties, num_points > N, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

namespace {

at::Tensor mmcv_xyz() {
  return at::tensor({-0.2748, 1.0020,  -1.1674, 0.1015,  1.3952,  -1.2681, -0.8070, 2.4137,  -0.5845, -1.0001,
                     2.1982,  -0.5859, 0.3841,  1.8983,  -0.7431, -1.0696, 3.0758,  -0.1899, -0.2559, 3.5521,
                     -0.1402, 0.8164,  4.0081,  -0.1839, -1.1000, 3.0213,  -0.8205, -0.0518, 3.7251,  -0.3950})
      .reshape({2, 5, 3});
}

at::Tensor square_matrix(const at::Tensor& xyz) {
  return (xyz.unsqueeze(1) - xyz.unsqueeze(2)).pow(2).sum(-1);
}

TEST(FurthestPointSample, MmcvKnownVectors) {
  const at::Tensor expected = at::tensor({0, 2, 4, 0, 2, 1}, at::kInt).reshape({2, 3});
  for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    const at::Tensor xyz = mmcv_xyz().to(dtype);
    EXPECT_TRUE(at::equal(mmops::furthest_point_sample(xyz, 3), expected)) << dtype;
    EXPECT_TRUE(at::equal(mmops::furthest_point_sample_with_dist(square_matrix(xyz), 3), expected)) << dtype;
  }
}

TEST(FurthestPointSample, TiesLowestIndexAndRepeats) {
  // a unit square twice: 3 (the diagonal), then 1 and 2 (tied with their copies), then index 0
  const at::Tensor square = at::tensor({0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0}).reshape({4, 3});
  const at::Tensor out = mmops::furthest_point_sample(at::cat({square, square}).unsqueeze(0), 6);
  EXPECT_TRUE(at::equal(out, at::tensor({0, 3, 1, 2, 0, 0}, at::kInt).reshape({1, 6})));
}

TEST(FurthestPointSample, EmptyAndErrors) {
  EXPECT_EQ(mmops::furthest_point_sample(at::zeros({0, 4, 3}), 2).sizes(), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(mmops::furthest_point_sample(at::zeros({2, 0, 3}), 0).sizes(), (std::vector<int64_t>{2, 0}));
  EXPECT_ERROR_MENTIONS(mmops::furthest_point_sample(at::zeros({2, 4, 2}), 2),
                        "expected points_xyz to be a 3-D tensor of shape [B, N, 3]");
  EXPECT_ERROR_MENTIONS(mmops::furthest_point_sample(at::zeros({2, 4, 3}), -1), "expected num_points >= 0");
  EXPECT_ERROR_MENTIONS(mmops::furthest_point_sample(at::zeros({2, 0, 3}), 1), "expected num_points == 0 when");
  EXPECT_ERROR_MENTIONS(mmops::furthest_point_sample_with_dist(at::zeros({2, 4, 3}), 2),
                        "expected points_dist to be a 3-D tensor of shape [B, N, N]");
}

TEST(FurthestPointSample, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(3);
  for (int64_t n : {100, 5000, 20000, 40000}) {
    const at::Tensor xyz = at::rand({2, n, 3});
    EXPECT_TRUE(at::equal(mmops::furthest_point_sample(xyz.cuda(), 64).cpu(), mmops::furthest_point_sample(xyz, 64)))
        << n;
  }
  const at::Tensor dist = square_matrix(at::rand({2, 700, 3}));
  EXPECT_TRUE(at::equal(mmops::furthest_point_sample_with_dist(dist.cuda(), 50).cpu(),
                        mmops::furthest_point_sample_with_dist(dist, 50)));
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry furthest_point_sample_api{
    "mmops::furthest_point_sample", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::furthest_point_sample(a[0].toTensor(), a[1].toInt())};
    }};

const mmops_test::CppApiEntry furthest_point_sample_with_dist_api{
    "mmops::furthest_point_sample_with_dist", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::furthest_point_sample_with_dist(a[0].toTensor(), a[1].toInt())};
    }};

} // namespace

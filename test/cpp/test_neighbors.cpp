// C++ face of the neighbour queries (ball_query, stack_ball_query, knn,
// three_nn): the public API against brute force, the fill and tie rules,
// errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

namespace {

// [B, M, N] squared distances, dx * dx + dy * dy + dz * dz as the kernels sum them.
at::Tensor squared_distances(const at::Tensor& centers, const at::Tensor& points) {
  const at::Tensor d = centers.unsqueeze(2) - points.unsqueeze(1);
  const at::Tensor dx = d.select(3, 0), dy = d.select(3, 1), dz = d.select(3, 2);
  return dx * dx + dy * dy + dz * dz;
}

TEST(Neighbors, BallQueryMatchesBruteForce) {
  at::manual_seed(1);
  const at::Tensor xyz = at::rand({2, 100, 3}, at::kDouble);
  const at::Tensor centers = at::rand({2, 12, 3}, at::kDouble);
  const int64_t samples = 6;
  const at::Tensor out = mmops::ball_query(0.1, 0.3, samples, xyz, centers);
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{2, 12, samples}));
  const at::Tensor d2 = squared_distances(centers, xyz);
  const at::Tensor inside = d2.eq(0).logical_or(d2.ge(0.01).logical_and(d2.lt(0.09)));
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < 12; ++i) {
      const at::Tensor hits = inside[b][i].nonzero().flatten();
      std::vector<int64_t> expected(samples, hits.numel() ? hits[0].item<int64_t>() : 0);
      for (int64_t s = 0; s < std::min<int64_t>(samples, hits.numel()); ++s) {
        expected[s] = hits[s].item<int64_t>();
      }
      for (int64_t s = 0; s < samples; ++s) {
        EXPECT_EQ(out[b][i][s].item<int64_t>(), expected[s]) << b << " " << i << " " << s;
      }
    }
  }
}

TEST(Neighbors, StackBallQueryEmptyBallAndCounts) {
  const at::Tensor xyz = at::tensor({5.0, 5.0, 5.0, 0.1, 0.0, 0.0, 0.0, 2.0, 0.0}).reshape({3, 3});
  const at::Tensor centers = at::zeros({2, 3}, at::kDouble);
  const at::Tensor out =
      mmops::stack_ball_query(0.5, 3, xyz, centers, at::tensor({2, 1}, at::kInt), at::tensor({1, 1}, at::kInt));
  // batch 0: point 1 only (repeated); batch 1: an empty ball
  EXPECT_TRUE(at::equal(out, at::tensor({1, 1, 1, -1, 0, 0}, at::kInt).reshape({2, 3})));
  EXPECT_ERROR_MENTIONS(
      mmops::stack_ball_query(0.5, 3, xyz, centers, at::tensor({2, 2}, at::kInt), at::tensor({1, 1}, at::kInt)),
      "expected xyz_batch_cnt to sum to the number of points in xyz (3), but got 4");
}

TEST(Neighbors, KnnTiesAndLayout) {
  const at::Tensor xyz =
      at::tensor({1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.5, 0.0}).reshape({1, 5, 3});
  const at::Tensor center = at::zeros({1, 1, 3}, at::kDouble);
  const at::Tensor out = mmops::knn(4, xyz, center);
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{1, 4, 1}));
  EXPECT_TRUE(at::equal(out.flatten(), at::tensor({2, 4, 0, 1}, at::kInt)));
  EXPECT_TRUE(at::equal(mmops::knn(4, xyz.transpose(1, 2), center.transpose(1, 2), true), out));
  EXPECT_ERROR_MENTIONS(mmops::knn(0, xyz, center), "k must lie in [1, 100], but got 0");
}

TEST(Neighbors, ThreeNNMatchesKnn) {
  at::manual_seed(2);
  const at::Tensor target = at::rand({2, 40, 3});
  const at::Tensor source = at::rand({2, 30, 3});
  const auto [dist, idx] = mmops::three_nn(target, source);
  EXPECT_TRUE(at::equal(idx, mmops::knn(3, source, target).transpose(1, 2)));
  const at::Tensor d2 = squared_distances(target, source).gather(2, idx.to(at::kLong));
  EXPECT_TRUE(at::allclose(dist, d2.sqrt(), 1e-6, 1e-7));
  EXPECT_ERROR_MENTIONS(mmops::three_nn(target, source.to(at::kDouble)), "expected source to have the dtype of target");
}

TEST(Neighbors, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(3);
  const at::Tensor xyz = at::rand({2, 3000, 3});
  const at::Tensor centers = at::rand({2, 500, 3});
  EXPECT_TRUE(at::equal(mmops::ball_query(0.0, 0.1, 16, xyz.cuda(), centers.cuda()).cpu(),
                        mmops::ball_query(0.0, 0.1, 16, xyz, centers)));
  EXPECT_TRUE(at::equal(mmops::knn(16, xyz.cuda(), centers.cuda()).cpu(), mmops::knn(16, xyz, centers)));
  EXPECT_TRUE(at::equal(std::get<1>(mmops::three_nn(centers.cuda(), xyz.cuda())).cpu(),
                        std::get<1>(mmops::three_nn(centers, xyz))));
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry ball_query_api{
    "mmops::ball_query", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{
          mmops::ball_query(a[0].toDouble(), a[1].toDouble(), a[2].toInt(), a[3].toTensor(), a[4].toTensor())};
    }};

const mmops_test::CppApiEntry stack_ball_query_api{
    "mmops::stack_ball_query", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::stack_ball_query(a[0].toDouble(), a[1].toInt(), a[2].toTensor(),
                                                            a[3].toTensor(), a[4].toTensor(), a[5].toTensor())};
    }};

const mmops_test::CppApiEntry knn_api{
    "mmops::knn", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{
          mmops::knn(a[0].toInt(), a[1].toTensor(), a[2].toOptional<at::Tensor>(), a[3].toBool())};
    }};

const mmops_test::CppApiEntry three_nn_api{"mmops::three_nn", [](const mmops_test::ApiArgs& a) {
                                             const auto [dist, idx] = mmops::three_nn(a[0].toTensor(), a[1].toTensor());
                                             return mmops_test::ApiOutputs{dist, idx};
                                           }};

} // namespace

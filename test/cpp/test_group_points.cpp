// C++ face of mmops::gather_points, group_points and stack_group_points: the
// public API against loops, autograd from C++ with finite differences, index
// errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

namespace {

TEST(GroupPoints, GatherAndGroupMatchLoops) {
  at::manual_seed(1);
  const at::Tensor features = at::randn({2, 3, 7}, at::kDouble);
  const at::Tensor idx = at::randint(0, 7, {2, 4, 5}, at::kInt);
  const at::Tensor grouped = mmops::group_points(features, idx);
  const at::Tensor gathered = mmops::gather_points(features, idx.reshape({2, 20}));
  ASSERT_EQ(grouped.sizes(), (std::vector<int64_t>{2, 3, 4, 5}));
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t p = 0; p < 4; ++p) {
      for (int64_t s = 0; s < 5; ++s) {
        const int64_t i = idx[b][p][s].item<int32_t>();
        EXPECT_TRUE(at::equal(grouped.select(0, b).select(1, p).select(1, s), features[b].select(1, i)));
        EXPECT_TRUE(at::equal(gathered[b].select(1, p * 5 + s), features[b].select(1, i)));
      }
    }
  }
}

TEST(GroupPoints, StackedMatchesLoops) {
  at::manual_seed(2);
  const at::Tensor features = at::randn({9, 4}, at::kDouble); // batches of 4 and 5 features
  const at::Tensor fcnt = at::tensor({4, 5}, at::kInt), icnt = at::tensor({2, 3}, at::kInt);
  const at::Tensor idx = at::cat({at::randint(0, 4, {2, 3}, at::kInt), at::randint(0, 5, {3, 3}, at::kInt)});
  const at::Tensor out = mmops::stack_group_points(features, fcnt, idx, icnt);
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{5, 4, 3}));
  for (int64_t m = 0; m < 5; ++m) {
    for (int64_t s = 0; s < 3; ++s) {
      const int64_t i = idx[m][s].item<int32_t>() + (m < 2 ? 0 : 4);
      EXPECT_TRUE(at::equal(out[m].select(1, s), features[i]));
    }
  }
}

TEST(GroupPoints, FiniteDifferenceGradients) {
  at::manual_seed(3);
  const at::Tensor features = at::randn({2, 3, 6}, at::kDouble);
  const at::Tensor idx = at::randint(0, 6, {2, 4, 3}, at::kInt);
  const at::Tensor weights = at::randn({2, 3, 4, 3}, at::kDouble);
  mmops_test::expect_finite_differences(
      [&](const at::Tensor& x) { return (mmops::group_points(x, idx) * weights).sum(); }, features);
  const at::Tensor w2 = at::randn({2, 3, 4}, at::kDouble);
  mmops_test::expect_finite_differences(
      [&](const at::Tensor& x) { return (mmops::gather_points(x, idx.select(2, 0)) * w2).sum(); }, features);
  const at::Tensor fcnt = at::tensor({2, 4}, at::kInt), icnt = at::tensor({1, 3}, at::kInt);
  const at::Tensor sidx = at::tensor({0, 1, 1, 3, 3, 0, 2, 2, 1, 0, 0, 0}, at::kInt).reshape({4, 3});
  const at::Tensor w3 = at::randn({4, 3, 3}, at::kDouble);
  mmops_test::expect_finite_differences(
      [&](const at::Tensor& x) { return (mmops::stack_group_points(x, fcnt, sidx, icnt) * w3).sum(); },
      at::randn({6, 3}, at::kDouble));
}

TEST(GroupPoints, EmptyAndErrors) {
  EXPECT_EQ(mmops::gather_points(at::zeros({2, 3, 5}), at::zeros({2, 0}, at::kInt)).sizes(),
            (std::vector<int64_t>{2, 3, 0}));
  EXPECT_ERROR_MENTIONS(mmops::gather_points(at::zeros({2, 3, 5}), at::zeros({2, 4}, at::kLong)),
                        "expected indices to be int32");
  EXPECT_ERROR_MENTIONS(mmops::gather_points(at::zeros({2, 3, 5}), at::full({2, 4}, 5, at::kInt)),
                        "expected every value of indices in [0, 5)");
  EXPECT_ERROR_MENTIONS(mmops::group_points(at::zeros({2, 3, 5}), at::zeros({2, 4}, at::kInt)),
                        "expected indices to be a 3-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::stack_group_points(at::zeros({5, 3}), at::tensor({4}, at::kInt),
                                                  at::zeros({2, 3}, at::kInt), at::tensor({2}, at::kInt)),
                        "expected features_batch_cnt to sum to the 5 features");
}

TEST(GroupPoints, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(4);
  const at::Tensor features = at::randn({3, 40, 300});
  const at::Tensor idx = at::randint(0, 300, {3, 64, 16}, at::kInt);
  const at::Tensor xc = features.cuda().requires_grad_(true), xh = features.clone().requires_grad_(true);
  const at::Tensor oc = mmops::group_points(xc, idx.cuda()), oh = mmops::group_points(xh, idx);
  EXPECT_TRUE(at::equal(oc.cpu(), oh));
  const at::Tensor go = at::randn(oh.sizes());
  oc.backward(go.cuda());
  oh.backward(go);
  EXPECT_TRUE(at::equal(xc.grad().cpu(), xh.grad())); // the same order of additions
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry gather_points_api{
    "mmops::gather_points", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::gather_points(a[0].toTensor(), a[1].toTensor())};
    }};

const mmops_test::CppApiEntry group_points_api{
    "mmops::group_points", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::group_points(a[0].toTensor(), a[1].toTensor())};
    }};

const mmops_test::CppApiEntry stack_group_points_api{
    "mmops::stack_group_points", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{
          mmops::stack_group_points(a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), a[3].toTensor())};
    }};

} // namespace

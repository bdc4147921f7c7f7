// C++ face of mmops::roipoint_pool3d: the public API on mmcv's known vector,
// the repeat rule, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

namespace {

TEST(RoIPointPool3d, MmcvKnownVector) {
  const at::Tensor points = at::tensor({1.0, 2.0, 3.3, 1.2,  2.5,  3.0,  0.8, 2.1, 3.5, 1.6, 2.6, 3.6,
                                        0.8, 1.2, 3.9, -9.2, 21.0, 18.2, 3.8, 7.9, 6.3, 4.7, 3.5, -12.2},
                                       at::kDouble)
                                .reshape({1, 8, 3});
  const at::Tensor boxes =
      at::tensor({1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.3, -10.0, 23.0, 16.0, 10.0, 20.0, 20.0, 0.5}, at::kDouble)
          .reshape({1, 2, 7});
  const auto [pooled, empty] = mmops::roipoint_pool3d(points, points, boxes, 4);
  ASSERT_EQ(pooled.sizes(), (std::vector<int64_t>{1, 2, 4, 6}));
  EXPECT_TRUE(at::equal(pooled[0][0].slice(1, 0, 3), points[0].slice(0, 0, 4)));
  EXPECT_TRUE(at::equal(pooled[0][1].slice(1, 3, 6), points[0][5].expand({4, 3})));
  EXPECT_TRUE(at::equal(empty, at::zeros({1, 2}, at::kInt)));
}

TEST(RoIPointPool3d, EmptyBoxAndErrors) {
  const at::Tensor box = at::tensor({100.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0}, at::kFloat).reshape({1, 1, 7});
  const auto [pooled, empty] = mmops::roipoint_pool3d(at::zeros({1, 3, 3}), at::ones({1, 3, 2}), box, 5);
  EXPECT_TRUE(at::equal(pooled, at::zeros({1, 1, 5, 5})));
  EXPECT_EQ(empty.item<int>(), 1);
  EXPECT_ERROR_MENTIONS(mmops::roipoint_pool3d(at::zeros({1, 3, 3}), at::zeros({1, 3, 2}), box, 0),
                        "num_sampled_points must be in [1, 2^31 - 1], but got 0");
  EXPECT_ERROR_MENTIONS(mmops::roipoint_pool3d(at::zeros({1, 3, 3}), at::zeros({1, 4, 2}), box, 2),
                        "expected point_features to start with the [B, N] of points");
}

TEST(RoIPointPool3d, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(5);
  const at::Tensor boxes = at::cat({at::rand({2, 50, 2}) * 20 - 10, at::rand({2, 50, 1}), at::rand({2, 50, 3}) * 5 + 1,
                                    at::rand({2, 50, 1}) * 6 - 3},
                                   2);
  const at::Tensor points = at::rand({2, 6000, 3}) * 24 - 12;
  const at::Tensor feats = at::randn({2, 6000, 7});
  for (int64_t s : {1, 33, 512}) {
    const auto [pc, ec] = mmops::roipoint_pool3d(points.cuda(), feats.cuda(), boxes.cuda(), s);
    const auto [p, e] = mmops::roipoint_pool3d(points, feats, boxes, s);
    EXPECT_TRUE(at::equal(pc.cpu(), p)) << s;
    EXPECT_TRUE(at::equal(ec.cpu(), e)) << s;
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry roipoint_pool3d_api{"mmops::roipoint_pool3d", [](const mmops_test::ApiArgs& a) {
                                                    const auto [pooled, empty] =
                                                        mmops::roipoint_pool3d(a[0].toTensor(), a[1].toTensor(),
                                                                               a[2].toTensor(), a[3].toInt());
                                                    return mmops_test::ApiOutputs{pooled, empty};
                                                  }};

} // namespace

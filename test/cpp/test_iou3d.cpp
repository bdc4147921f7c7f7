// C++ face of mmops::boxes_overlap_bev, boxes_iou_bev, nms_bev and
// nms_normal_bev: the public API, mmcv's known vectors, exact small cases,
// pre/post_max_size, ties and NaN, errors, CUDA == CPU. Not differentiable
// (mmcv has no gradient either): no finite-difference check.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "test_support.h"

namespace {

std::vector<int64_t> as_vector(const at::Tensor& t) {
  const at::Tensor c = t.cpu().contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

at::Tensor rows(std::vector<double> values, int64_t cols, at::ScalarType dtype = at::kDouble) {
  const int64_t n = static_cast<int64_t>(values.size()) / cols;
  return at::tensor(values, at::kDouble).reshape({n, cols}).to(dtype);
}

// Detector-like [N, 5] (x1, y1, x2, y2, ry) boxes: jittered copies of a few objects.
at::Tensor clustered_xyxyr(int64_t n, int64_t objects, double image) {
  const auto options = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor centres = at::rand({objects, 2}, options) * image;
  const at::Tensor pick = at::randint(0, objects, {n}, at::kLong);
  const at::Tensor xy = centres.index_select(0, pick) + at::randn({n, 2}, options);
  const at::Tensor half = at::rand({n, 2}, options) * 3 + 2;
  return at::cat({xy - half, xy + half, at::rand({n, 1}, options) * 3}, 1);
}

TEST(Iou3d, MmcvKnownVectors) {
  // mmcv tests/test_ops/test_iou3d.py
  const at::Tensor a = rows({1, 1, 1, 2, 2, 2, 0, 2, 2, 2, 2, 2, 2, 0, 3, 3, 3, 3, 2, 2, 0}, 7, at::kFloat);
  const at::Tensor b =
      rows({1, 1, 1, 2, 2, 2, 0, 1, 1, 1, 2, 2, 2, M_PI / 2, 1, 1, 1, 2, 2, 2, M_PI / 4}, 7, at::kFloat);
  const double octagon = (8 + 8 * std::sqrt(2.0)) / (3 + 2 * std::sqrt(2.0));
  const at::Tensor overlap = rows({4, 4, octagon, 1, 1, 1, 0, 0, 0}, 3, at::kFloat);
  EXPECT_TRUE(at::allclose(mmops::boxes_overlap_bev(a, b), overlap, 0, 1e-4));
  const at::Tensor a5 = rows({1, 1, 3, 4, 0.5, 2, 2, 3, 4, 0.6, 7, 7, 8, 8, 0.4}, 5, at::kFloat);
  const at::Tensor b5 = rows({0, 2, 2, 5, 0.3, 2, 1, 3, 3, 0.5, 5, 5, 6, 7, 0.4}, 5, at::kFloat);
  const at::Tensor iou = rows({0.2621, 0.2948, 0, 0.0549, 0.1587, 0, 0, 0, 0}, 3, at::kFloat);
  EXPECT_TRUE(at::allclose(mmops::boxes_iou_bev(a5, b5), iou, 0, 1e-4));
  const at::Tensor boxes = rows({6, 3, 8, 7, 2, 3, 6, 9, 11, 1, 3, 7, 10, 12, 1, 1, 4, 13, 7, 3}, 5, at::kFloat);
  const at::Tensor scores = at::tensor({0.6, 0.9, 0.7, 0.2}, at::kFloat);
  EXPECT_EQ(as_vector(mmops::nms_bev(boxes, scores, 0.3)), (std::vector<int64_t>{1, 0, 3}));
  EXPECT_EQ(as_vector(mmops::nms_normal_bev(boxes, scores, 0.3)), (std::vector<int64_t>{1, 0, 3}));
}

TEST(Iou3d, ExactSmallCases) {
  const auto overlap = [](std::vector<double> p, std::vector<double> q) {
    return mmops::boxes_overlap_bev(rows(p, 7), rows(q, 7)).item<double>();
  };
  const auto iou = [](std::vector<double> p, std::vector<double> q) {
    return mmops::boxes_iou_bev(rows(p, 5), rows(q, 5)).item<double>();
  };
  // identical: the area, IoU exactly 1; touching: exactly 0
  EXPECT_NEAR(overlap({3.7, -2.1, 0, 5.3, 0.9, 1, 0.3}, {3.7, -2.1, 9, 5.3, 0.9, 2, 0.3}), 5.3 * 0.9, 1e-12);
  EXPECT_EQ(iou({-1.2, 0.4, 3.1, 2.2, 0.7}, {-1.2, 0.4, 3.1, 2.2, 0.7}), 1.0);
  EXPECT_EQ(iou({0, 0, 2, 1, 0}, {2, 0, 3, 1, 0}), 0.0);
  EXPECT_EQ(iou({0, 0, 2, 1, 0}, {2, 1, 3, 2, 0}), 0.0);
  EXPECT_NEAR(iou({0, 0, 4, 2, 0}, {1, 0, 5, 2, 0}), 0.6, 1e-12);
  // the heading turns the x side towards +y
  EXPECT_NEAR(overlap({0, 0, 0, 4, 1, 1, M_PI / 4}, {1, 1, 0, 0.5, 0.5, 1, 0}), 0.25, 1e-12);
  EXPECT_EQ(overlap({0, 0, 0, 4, 1, 1, -M_PI / 4}, {1, 1, 0, 0.5, 0.5, 1, 0}), 0.0);
  // degenerate and non-finite boxes overlap nothing
  EXPECT_EQ(overlap({0, 0, 0, 0, 2, 1, 0}, {0, 0, 0, 2, 2, 1, 0}), 0.0);
  EXPECT_EQ(iou({NAN, 0, 2, 2, 0}, {0, 0, 2, 2, 0}), 0.0);
  EXPECT_EQ(iou({0, 0, INFINITY, 2, 0}, {0, 0, 2, 2, 0}), 0.0);
  EXPECT_EQ(mmops::boxes_iou_bev(at::zeros({0, 5}), at::zeros({4, 5})).sizes(), (std::vector<int64_t>{0, 4}));
}

TEST(Iou3d, NmsOrderPreAndPost) {
  std::vector<double> values;
  for (int k = 0; k < 4; ++k) {
    values.insert(values.end(), {0.0, 0.0, 4.0, 2.0, 0.3});
  }
  values.insert(values.end(), {20.0, 20.0, 22.0, 22.0, 0.0});
  const at::Tensor boxes = rows(values, 5);
  EXPECT_EQ(as_vector(mmops::nms_bev(boxes, at::tensor({0.5, 0.5, 0.5, 0.5, 0.1}), 0.5)), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(as_vector(mmops::nms_bev(boxes, at::tensor({0.2, NAN, 0.9, 0.3, NAN}), 0.5)), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(as_vector(mmops::nms_normal_bev(boxes, at::tensor({0.2, NAN, 0.9, 0.3, NAN}), 0.5)),
            (std::vector<int64_t>{2, 4}));
  // pre_max_size: the best boxes only (the disjoint box 4 has the lowest score)
  const at::Tensor scores = at::tensor({0.9, 0.8, 0.7, 0.6, 0.5});
  EXPECT_EQ(as_vector(mmops::nms_bev(boxes, scores, 0.5, 4)), (std::vector<int64_t>{0}));
  EXPECT_EQ(as_vector(mmops::nms_bev(boxes, scores, 1.0, std::nullopt, 3)), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(mmops::nms_bev(boxes, scores, 0.5, 0).numel(), 0);
  EXPECT_EQ(mmops::nms_bev(boxes.slice(0, 0, 0), scores.slice(0, 0, 0), 0.5).numel(), 0);
  // nms_bev decides on boxes_iou_bev's IoU: a greedy pass over it gives the same
  at::manual_seed(5);
  const at::Tensor many = clustered_xyxyr(200, 10, 60.0);
  const at::Tensor many_scores = at::rand({200}, at::kDouble);
  const at::Tensor iou = mmops::boxes_iou_bev(many, many);
  const std::vector<int64_t> order = as_vector(std::get<1>(many_scores.sort(/*stable=*/true, 0, true)));
  std::vector<bool> removed(200, false);
  std::vector<int64_t> expected;
  for (size_t s = 0; s < order.size(); ++s) {
    if (removed[order[s]]) {
      continue;
    }
    expected.push_back(order[s]);
    for (size_t t = s + 1; t < order.size(); ++t) {
      removed[order[t]] = removed[order[t]] || iou[order[s]][order[t]].item<double>() > 0.3;
    }
  }
  EXPECT_GT(expected.size(), 5u);
  EXPECT_LT(expected.size(), 150u);
  EXPECT_EQ(as_vector(mmops::nms_bev(many, many_scores, 0.3)), expected);
}

TEST(Iou3d, BadArgumentsRaiseClearErrors) {
  EXPECT_ERROR_MENTIONS(mmops::boxes_overlap_bev(at::zeros({3, 5}), at::zeros({2, 7})),
                        "expected boxes_a to be a 2-D tensor of shape [N, 7] (x, y, z, dx, dy, dz, heading)");
  EXPECT_ERROR_MENTIONS(mmops::boxes_iou_bev(at::zeros({3, 5}), at::zeros({2, 5}, at::kDouble)),
                        "expected boxes_b to have the dtype of boxes_a (Float), but got Double");
  EXPECT_ERROR_MENTIONS(mmops::nms_bev(at::zeros({3, 5}), at::zeros({2}), 0.5),
                        "expected scores to be a 1-D tensor of shape [N]");
  EXPECT_ERROR_MENTIONS(mmops::nms_bev(at::zeros({3, 5}), at::zeros({3}), 0.5, -1),
                        "pre_max_size must be None or >= 0, but got -1");
  EXPECT_ERROR_MENTIONS(mmops::nms_normal_bev(at::zeros({3, 5}), at::zeros({3}), NAN), "thresh must be a number");
}

TEST(Iou3d, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(11);
  const at::Tensor boxes = clustered_xyxyr(3000, 100, 500.0);
  const at::Tensor scores = at::rand({3000}, at::kDouble);
  EXPECT_TRUE(at::allclose(mmops::boxes_iou_bev(boxes.cuda(), boxes.cuda()).cpu(), mmops::boxes_iou_bev(boxes, boxes),
                           1e-9, 1e-9));
  for (double thr : {0.0, 0.3, 0.7}) {
    EXPECT_EQ(as_vector(mmops::nms_bev(boxes.cuda(), scores.cuda(), thr, 2000, 100)),
              as_vector(mmops::nms_bev(boxes, scores, thr, 2000, 100)));
    EXPECT_EQ(as_vector(mmops::nms_normal_bev(boxes.cuda(), scores.cuda(), thr)),
              as_vector(mmops::nms_normal_bev(boxes, scores, thr)));
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry boxes_overlap_bev_api{
    "mmops::boxes_overlap_bev", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::boxes_overlap_bev(a[0].toTensor(), a[1].toTensor())};
    }};
const mmops_test::CppApiEntry boxes_iou_bev_api{
    "mmops::boxes_iou_bev", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::boxes_iou_bev(a[0].toTensor(), a[1].toTensor())};
    }};
const mmops_test::CppApiEntry nms_bev_api{
    "mmops::nms_bev", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::nms_bev(a[0].toTensor(), a[1].toTensor(), a[2].toDouble(),
                                                   a[3].toOptional<int64_t>(), a[4].toOptional<int64_t>())};
    }};
const mmops_test::CppApiEntry nms_normal_bev_api{
    "mmops::nms_normal_bev", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::nms_normal_bev(a[0].toTensor(), a[1].toTensor(), a[2].toDouble())};
    }};

} // namespace

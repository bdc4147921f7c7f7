// C++ face of mmops::nms_rotated and nms_quadri: the public API, mmcv's known
// vectors, labels, ties and NaN, errors, CUDA == CPU. Not differentiable.

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

const std::vector<double> kMmcvBoxes = {6.0, 3.0, 8.0,  7.0,  0.5, 3.0, 6.0, 9.0,  11.0, 0.6,
                                        3.0, 7.0, 10.0, 12.0, 0.3, 1.0, 4.0, 13.0, 7.0,  0.6};
const std::vector<double> kMmcvQuads = {1.0, 1.0, 3.0, 4.0, 4.0, 4.0, 4.0, 1.0, 2.0, 2.0, 3.0, 4.0, 4.0, 2.0, 3.0, 1.0,
                                        7.0, 7.0, 8.0, 8.0, 9.0, 7.0, 8.0, 6.0, 0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 2.0, 0.0};

TEST(NmsRotated, MmcvKnownVectors) {
  const at::Tensor boxes = at::tensor(kMmcvBoxes, at::kFloat).reshape({4, 5});
  const at::Tensor scores = at::tensor({0.7, 0.8, 0.5, 0.9}, at::kFloat);
  const at::Tensor labels = at::tensor({1.0, 0.0, 1.0, 0.0}, at::kFloat);
  EXPECT_EQ(as_vector(mmops::nms_rotated(boxes, scores, 0.5)), (std::vector<int64_t>{3, 1, 0}));
  // Labels separate classes (mmcv's CPU kernel ignores them): box 2 is only suppressed by box 1.
  EXPECT_EQ(as_vector(mmops::nms_rotated(boxes, scores, 0.5, labels)), (std::vector<int64_t>{3, 1, 0, 2}));
  const at::Tensor quads = at::tensor(kMmcvQuads, at::kFloat).reshape({4, 8});
  EXPECT_EQ(as_vector(mmops::nms_quadri(quads, scores, 0.3)), (std::vector<int64_t>{3, 1, 2}));
  EXPECT_EQ(as_vector(mmops::nms_quadri(quads, scores, 0.3, labels)), (std::vector<int64_t>{3, 1, 0, 2}));
}

TEST(NmsRotated, LabelsTiesAndNan) {
  std::vector<double> rows;
  for (int k = 0; k < 4; ++k) {
    rows.insert(rows.end(), {0.0, 0.0, 4.0, 2.0, 0.3});
  }
  rows.insert(rows.end(), {20.0, 20.0, 2.0, 2.0, 0.0});
  const at::Tensor boxes = at::tensor(rows).reshape({5, 5});
  EXPECT_EQ(as_vector(mmops::nms_rotated(boxes, at::tensor({0.5, 0.5, 0.5, 0.5, 0.1}), 0.5)),
            (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(as_vector(mmops::nms_rotated(boxes, at::tensor({0.2, NAN, 0.9, 0.3, NAN}), 0.5)),
            (std::vector<int64_t>{2, 4}));
  const at::Tensor labels = at::tensor({0, 1, 0, 1, 0}, at::kLong);
  EXPECT_EQ(as_vector(mmops::nms_rotated(boxes, at::tensor({0.9, 0.8, 0.7, 0.6, 0.5}), 0.5, labels)),
            (std::vector<int64_t>{0, 1, 4}));
  EXPECT_EQ(mmops::nms_rotated(boxes.slice(0, 0, 0), at::zeros({0}, at::kDouble), 0.5).numel(), 0);
}

TEST(NmsRotated, BadArgumentsRaiseClearErrors) {
  EXPECT_ERROR_MENTIONS(mmops::nms_rotated(at::zeros({3, 4}), at::zeros({3}), 0.5),
                        "expected boxes to be a 2-D tensor of shape [N, 5]");
  EXPECT_ERROR_MENTIONS(mmops::nms_rotated(at::zeros({3, 5}), at::zeros({2}), 0.5),
                        "expected scores to be a 1-D tensor of shape [N]");
  EXPECT_ERROR_MENTIONS(mmops::nms_rotated(at::zeros({3, 5}), at::zeros({3}), NAN), "iou_threshold must be a number");
  EXPECT_ERROR_MENTIONS(mmops::nms_quadri(at::zeros({3, 8}), at::zeros({3}), 0.5, at::zeros({3}, at::kBool)),
                        "expected labels to have an integer or floating point dtype, but got Bool");
}

TEST(NmsRotated, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(11);
  const auto options = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor centres = at::rand({100, 2}, options) * 500;
  const at::Tensor pick = at::randint(0, 100, {3000}, at::kLong);
  const at::Tensor boxes = at::cat({centres.index_select(0, pick) + at::randn({3000, 2}, options),
                                    at::rand({3000, 2}, options) * 6 + 4, at::rand({3000, 1}, options) * 3},
                                   1);
  const at::Tensor scores = at::rand({3000}, options);
  const at::Tensor labels = at::randint(0, 3, {3000}, at::kLong);
  for (double thr : {0.0, 0.3, 0.7}) {
    EXPECT_EQ(as_vector(mmops::nms_rotated(boxes.cuda(), scores.cuda(), thr)),
              as_vector(mmops::nms_rotated(boxes, scores, thr)));
    EXPECT_EQ(as_vector(mmops::nms_rotated(boxes.cuda(), scores.cuda(), thr, labels.cuda())),
              as_vector(mmops::nms_rotated(boxes, scores, thr, labels)));
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry nms_rotated_api{
    "mmops::nms_rotated", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::nms_rotated(a[0].toTensor(), a[1].toTensor(), a[2].toDouble(),
                                                       mmops_test::optional_tensor(a[3]), a[4].toBool())};
    }};
const mmops_test::CppApiEntry nms_quadri_api{
    "mmops::nms_quadri", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{
          mmops::nms_quadri(a[0].toTensor(), a[1].toTensor(), a[2].toDouble(), mmops_test::optional_tensor(a[3]))};
    }};

} // namespace

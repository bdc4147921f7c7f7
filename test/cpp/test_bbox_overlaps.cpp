// C++ face of mmops::bbox_overlaps: the public API, mmcv's known vectors,
// finite differences and autograd from C++, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

namespace {

at::Tensor random_boxes(int64_t n, double image, double side, at::ScalarType dtype) {
  const auto options = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor xy = at::rand({n, 2}, options) * image;
  const at::Tensor wh = at::rand({n, 2}, options) * side + 0.5;
  return at::cat({xy, xy + wh}, 1).to(dtype);
}

TEST(BBoxOverlaps, MmcvKnownVectors) {
  const at::Tensor b1 = at::tensor({1.0, 1.0, 3.0, 4.0, 2.0, 2.0, 3.0, 4.0, 7.0, 7.0, 8.0, 8.0}).reshape({3, 4});
  const at::Tensor b2 = at::tensor({0.0, 2.0, 2.0, 5.0, 2.0, 1.0, 3.0, 3.0}).reshape({2, 4});
  const at::Tensor expected = at::tensor({1.0 / 3.0, 0.5, 0.2, 0.5, 0.0, 0.0}).reshape({3, 2});
  EXPECT_TRUE(at::allclose(mmops::bbox_overlaps(b1, b2, "iou", false, 1), expected, 1e-6, 1e-6));
  EXPECT_TRUE(at::allclose(mmops::bbox_overlaps(b1.slice(0, 0, 2), b2, "iou", true, 1), at::tensor({1.0 / 3.0, 0.5}),
                           1e-6, 1e-6));
  // iof: over the area of bboxes1's box (offset 0: [0,0,2,2] vs [1,1,3,3] -> 1/4)
  const at::Tensor a = at::tensor({0.0, 0.0, 2.0, 2.0}).reshape({1, 4});
  const at::Tensor b = at::tensor({1.0, 1.0, 3.0, 3.0}).reshape({1, 4});
  EXPECT_FLOAT_EQ(mmops::bbox_overlaps(a, b, "iof").item<float>(), 0.25f);
  EXPECT_FLOAT_EQ(mmops::bbox_overlaps(a, b).item<float>(), 1.0f / 7.0f);
}

TEST(BBoxOverlaps, FiniteDifferenceGradient) {
  at::manual_seed(5);
  for (const char* mode : {"iou", "iof"}) {
    for (bool aligned : {false, true}) {
      const at::Tensor b1 = random_boxes(4, 10.0, 8.0, at::kDouble).requires_grad_(true);
      const at::Tensor b2 = random_boxes(aligned ? 4 : 3, 10.0, 8.0, at::kDouble).requires_grad_(true);
      const at::Tensor w = at::randn(mmops::bbox_overlaps(b1, b2, mode, aligned).sizes(), at::kDouble);
      (mmops::bbox_overlaps(b1, b2, mode, aligned) * w).sum().backward();
      const double eps = 1e-6;
      for (const at::Tensor& x : {b1, b2}) {
        const at::Tensor numeric = at::zeros_like(x);
        for (int64_t k = 0; k < x.numel(); ++k) {
          at::NoGradGuard no_grad;
          const double old = x.view({-1})[k].item<double>();
          x.view({-1})[k] = old + eps;
          const double plus = (mmops::bbox_overlaps(b1, b2, mode, aligned) * w).sum().item<double>();
          x.view({-1})[k] = old - eps;
          const double minus = (mmops::bbox_overlaps(b1, b2, mode, aligned) * w).sum().item<double>();
          x.view({-1})[k] = old;
          numeric.view({-1})[k] = (plus - minus) / (2 * eps);
        }
        EXPECT_TRUE(at::allclose(x.grad(), numeric, 1e-5, 1e-6)) << mode << aligned << "\n" << x.grad() << numeric;
      }
    }
  }
}

TEST(BBoxOverlaps, BadArgumentsRaiseClearErrors) {
  EXPECT_ERROR_MENTIONS(mmops::bbox_overlaps(at::zeros({3, 4}), at::zeros({2, 4}), "giou"),
                        "mode must be \"iou\" or \"iof\", but got \"giou\"");
  EXPECT_ERROR_MENTIONS(mmops::bbox_overlaps(at::zeros({3, 4}), at::zeros({2, 4}), "iou", false, 3),
                        "offset must be 0 or 1, but got 3");
  EXPECT_ERROR_MENTIONS(mmops::bbox_overlaps(at::zeros({3, 4}), at::zeros({2, 4}), "iou", true),
                        "aligned=True needs as many bboxes1 as bboxes2");
  EXPECT_ERROR_MENTIONS(mmops::bbox_overlaps(at::zeros({3, 4}), at::zeros({2, 4}, at::kDouble)),
                        "expected bboxes2 to have the dtype of bboxes1");
}

TEST(BBoxOverlaps, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(7);
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    const at::Tensor boxes = random_boxes(3000, 400.0, 60.0, dtype);
    EXPECT_TRUE(at::allclose(mmops::bbox_overlaps(boxes.cuda(), boxes.slice(0, 0, 100).cuda()).cpu().to(at::kDouble),
                             mmops::bbox_overlaps(boxes, boxes.slice(0, 0, 100)).to(at::kDouble), 1e-2, 1e-3));
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry bbox_overlaps_api{
    "mmops::bbox_overlaps", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{
          mmops::bbox_overlaps(a[0].toTensor(), a[1].toTensor(), a[2].toStringRef(), a[3].toBool(), a[4].toInt())};
    }};

} // namespace

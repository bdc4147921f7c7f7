// C++ face of mmops::roi_align_rotated: the public API, autograd from C++,
// finite differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

#include <cmath>
#include <vector>

namespace {

at::Tensor rotated_roi(std::initializer_list<double> values) {
  return at::tensor(std::vector<double>(values), at::kDouble).reshape({-1, 6});
}

TEST(RoIAlignRotated, MmcvKnownVector) {
  // mmcv's test: 2x2 map, roi (0.5, 0.5, 1, 1) turned a quarter, sampling_ratio 2, aligned.
  const at::Tensor input = at::tensor({1.0, 2.0, 3.0, 4.0}, at::kDouble).reshape({1, 1, 2, 2}).requires_grad_(true);
  const at::Tensor out = mmops::roi_align_rotated(input, rotated_roi({0, 0.5, 0.5, 1, 1, M_PI / 2}), {2, 2}, 1.0, 2);
  const at::Tensor expected = at::tensor({1.5, 1.0, 1.75, 1.25}, at::kDouble).reshape({1, 1, 2, 2});
  EXPECT_TRUE(at::allclose(out, expected, 0, 1e-12)) << out;
  out.sum().backward();
  const at::Tensor grad = at::tensor({3.0625, 0.4375, 0.4375, 0.0625}, at::kDouble).reshape({1, 1, 2, 2});
  EXPECT_TRUE(at::allclose(input.grad(), grad, 0, 1e-12)) << input.grad();
}

TEST(RoIAlignRotated, ThetaZeroIsRoIAlign) {
  at::manual_seed(0);
  const at::Tensor input = at::randn({2, 3, 9, 11}, at::kDouble);
  const at::Tensor rois = rotated_roi({0, 4.2, 3.1, 5.5, 4.4, 0, 1, 6.0, 5.0, 3.3, 6.1, 0});
  const at::Tensor boxes =
      at::tensor({0.0, 1.45, 0.9, 6.95, 5.3, 1.0, 4.35, 1.95, 7.65, 8.05}, at::kDouble).reshape({-1, 5});
  const at::Tensor out = mmops::roi_align_rotated(input, rois, {3, 2}, 1.0, 0, true, false);
  const at::Tensor expected = mmops::roi_align(input, boxes, {3, 2}, 1.0, 0, "avg", true);
  EXPECT_TRUE(at::allclose(out, expected, 1e-10, 1e-10));
}

TEST(RoIAlignRotated, FiniteDifferences) {
  at::manual_seed(1);
  const at::Tensor input = at::randn({2, 2, 7, 8}, at::kDouble);
  const at::Tensor rois = rotated_roi({0, 3.6, 3.2, 4.4, 3.3, 0.7, 1, 4.2, 3.1, 5.7, 4.6, -2.2});
  const at::Tensor weights = at::randn({2, 2, 3, 2}, at::kDouble);
  auto loss = [&](const at::Tensor& x) {
    return (mmops::roi_align_rotated(x, rois, {3, 2}, 1.0, 0, true, true) * weights).sum();
  };
  mmops_test::expect_finite_differences(loss, input, 3);
}

TEST(RoIAlignRotated, ErrorsNameTheArgument) {
  const at::Tensor input = at::randn({2, 3, 6, 6});
  const at::Tensor rois = at::zeros({4, 6});
  EXPECT_ERROR_MENTIONS(mmops::roi_align_rotated(input[0], rois, {2, 2}), "expected input to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::roi_align_rotated(input, rois.slice(1, 0, 5), {2, 2}), "[K, 6]");
  EXPECT_ERROR_MENTIONS(mmops::roi_align_rotated(input, rois.to(at::kDouble), {2, 2}), "dtype of input");
  EXPECT_ERROR_MENTIONS(mmops::roi_align_rotated(input, rois, {0, 2}), "output_size");
  EXPECT_ERROR_MENTIONS(mmops::roi_align_rotated(input, rois, {2, 2}, -1.0), "spatial_scale");
  EXPECT_ERROR_MENTIONS(mmops::roi_align_rotated(input, rois, {2, 2}, 1.0, -1), "sampling_ratio");
  at::Tensor bad = rois.clone();
  bad[1][0] = 2;
  EXPECT_ERROR_MENTIONS(mmops::roi_align_rotated(input, bad, {2, 2}), "batch index");
}

TEST(RoIAlignRotated, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(2);
  const at::Tensor input = at::randn({2, 40, 13, 17});
  const at::Tensor rois = at::cat(
      {at::randint(0, 2, {9, 1}), at::rand({9, 2}) * 14, at::rand({9, 2}) * 8 + 1, (at::rand({9, 1}) * 2 - 1) * M_PI},
      1);
  mmops_test::expect_cuda_matches_cpu(
      [](const at::Tensor& x, const at::Tensor& r) {
        return mmops::roi_align_rotated(x, r, {3, 4}, 0.5, 0, true, false);
      },
      input, rois);
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry roi_align_rotated_api{"mmops::roi_align_rotated", [](const mmops_test::ApiArgs& a) {
                                                      return mmops_test::ApiOutputs{mmops::roi_align_rotated(
                                                          a[0].toTensor(), a[1].toTensor(), a[2].toIntVector(),
                                                          a[3].toDouble(), a[4].toInt(), a[5].toBool(), a[6].toBool())};
                                                    }};

} // namespace

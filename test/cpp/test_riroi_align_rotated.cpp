// C++ face of mmops::riroi_align_rotated: the public API, autograd from C++,
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

TEST(RiRoIAlignRotated, MmcvKnownVector) {
  // mmcv's test, second roi (1, 1, 3, 3, pi / 2), 8 orientations: output channel 0.
  const at::Tensor features = at::tensor({1., 2., 3., 4., 1., 2.,  4.,  3.,  4.,  3.,  2.,  1.,  1., 2., 5., 6.,
                                          3., 4., 7., 8., 9., 10., 13., 14., 11., 12., 15., 16., 1., 1., 2., 2.},
                                         at::kDouble)
                                  .reshape({1, 8, 2, 2});
  const at::Tensor out =
      mmops::riroi_align_rotated(features, rotated_roi({0, 1, 1, 3, 3, M_PI / 2}), {2, 2}, 1.0, 2, 8, false);
  const at::Tensor expected = at::tensor({7.6562, 12.5625, 4.0, 6.6250}, at::kDouble).reshape({2, 2});
  EXPECT_TRUE(at::allclose(out[0][0], expected, 0, 1e-3)) << out[0][0];
}

TEST(RiRoIAlignRotated, WholeStepShiftsOrientations) {
  at::manual_seed(0);
  const at::Tensor features = at::randn({1, 8, 9, 9}, at::kDouble);
  // theta = 2pi / 4: orientation o reads o - 1 (mod 4) of its group
  const at::Tensor rois = rotated_roi({0, 4.2, 3.9, 5.0, 4.0, M_PI / 2});
  const at::Tensor out = mmops::riroi_align_rotated(features, rois, {2, 3}, 1.0, 2, 4, false);
  const at::Tensor base = mmops::roi_align_rotated(features, rois, {2, 3}, 1.0, 2, false, false);
  const at::Tensor index = at::tensor({3, 0, 1, 2, 7, 4, 5, 6}, at::kLong);
  EXPECT_TRUE(at::allclose(out, base.index_select(1, index), 1e-10, 1e-10));
}

TEST(RiRoIAlignRotated, FiniteDifferences) {
  at::manual_seed(1);
  const at::Tensor input = at::randn({2, 4, 7, 8}, at::kDouble);
  const at::Tensor rois = rotated_roi({0, 3.6, 3.2, 4.4, 3.3, 0.7, 1, 4.2, 3.1, 5.7, 4.6, -2.2});
  const at::Tensor weights = at::randn({2, 4, 3, 2}, at::kDouble);
  auto loss = [&](const at::Tensor& x) {
    return (mmops::riroi_align_rotated(x, rois, {3, 2}, 1.0, 0, 4, true) * weights).sum();
  };
  mmops_test::expect_finite_differences(loss, input, 3);
}

TEST(RiRoIAlignRotated, ErrorsNameTheArgument) {
  const at::Tensor features = at::randn({2, 8, 6, 6});
  const at::Tensor rois = at::zeros({4, 6});
  EXPECT_ERROR_MENTIONS(mmops::riroi_align_rotated(features[0], rois, {2, 2}), "expected features to be a 4-D");
  EXPECT_ERROR_MENTIONS(mmops::riroi_align_rotated(features, rois.slice(1, 0, 5), {2, 2}), "[K, 6]");
  EXPECT_ERROR_MENTIONS(mmops::riroi_align_rotated(features, rois, {2, 2}, 1.0, 0, 3), "multiple of num_orientations");
  EXPECT_ERROR_MENTIONS(mmops::riroi_align_rotated(features, rois, {2, 2}, 1.0, 0, 0), "num_orientations");
  EXPECT_ERROR_MENTIONS(mmops::riroi_align_rotated(features, rois, {2, 2}, 1.0, -2), "num_samples");
  at::Tensor bad = rois.clone();
  bad[1][0] = -1;
  EXPECT_ERROR_MENTIONS(mmops::riroi_align_rotated(features, bad, {2, 2}), "batch index");
}

TEST(RiRoIAlignRotated, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(2);
  const at::Tensor input = at::randn({2, 48, 13, 17});
  const at::Tensor rois = at::cat({at::randint(0, 2, {9, 1}), at::rand({9, 2}) * 14, at::rand({9, 2}) * 8 + 1,
                                   (at::rand({9, 1}) * 2 - 1) * 3 * M_PI},
                                  1);
  mmops_test::expect_cuda_matches_cpu(
      [](const at::Tensor& x, const at::Tensor& r) {
        return mmops::riroi_align_rotated(x, r, {3, 4}, 0.5, 0, 8, true);
      },
      input, rois);
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry riroi_align_rotated_api{
    "mmops::riroi_align_rotated", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::riroi_align_rotated(a[0].toTensor(), a[1].toTensor(), a[2].toIntVector(),
                                                               a[3].toDouble(), a[4].toInt(), a[5].toInt(),
                                                               a[6].toBool())};
    }};

} // namespace

// C++ face of mmops::roiaware_pool3d: the public API on a hand-made case,
// autograd from C++, finite differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

#include <string>

namespace {

// One roi [0, 2]^3 cut into 2 x 1 x 1 voxels; points 0, 1 in voxel x = 0, point 2 in x = 1, point 3 outside.
at::Tensor unit_roi() {
  return at::tensor({1.0, 1.0, 0.0, 2.0, 2.0, 2.0, 0.0}, at::kDouble).reshape({1, 7});
}

at::Tensor four_points() {
  return at::tensor({0.5, 1.0, 1.0, 0.2, 0.5, 0.5, 1.5, 1.5, 1.5, 3.0, 1.0, 1.0}, at::kDouble).reshape({4, 3});
}

TEST(RoIAwarePool3d, KnownValuesForwardAndBackward) {
  const at::Tensor feats = at::tensor({1.0, 4.0, 3.0, 2.0, 7.0, 5.0, 9.0, 9.0}, at::kDouble).reshape({4, 2});
  const at::Tensor f = feats.clone().requires_grad_(true);
  const at::Tensor out = mmops::roiaware_pool3d(unit_roi(), four_points(), f, {2, 1, 1}, 128, "max");
  EXPECT_TRUE(at::equal(out.view({-1}), at::tensor({3.0, 4.0, 7.0, 5.0}, at::kDouble)));
  out.sum().backward();
  EXPECT_TRUE(at::equal(f.grad(), at::tensor({0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0}, at::kDouble).reshape({4, 2})));
  const at::Tensor avg = mmops::roiaware_pool3d(unit_roi(), four_points(), feats, {2, 1, 1}, 128, "avg");
  EXPECT_TRUE(at::equal(avg.view({-1}), at::tensor({2.0, 3.0, 7.0, 5.0}, at::kDouble)));
}

TEST(RoIAwarePool3d, FiniteDifferences) {
  at::manual_seed(3);
  const at::Tensor rois =
      at::tensor({1.0, 1.0, 0.0, 2.0, 2.0, 2.0, 0.3, 1.2, 0.8, 0.2, 3.0, 2.5, 1.5, -0.4}, at::kDouble).reshape({2, 7});
  const at::Tensor pts = at::rand({40, 3}, at::kDouble) * 2.4 - at::tensor({-0.2, -0.2, 0.1}, at::kDouble);
  const at::Tensor feats = at::randn({40, 3}, at::kDouble);
  for (const char* mode : {"max", "avg"}) {
    const at::Tensor weights = at::randn({2, 2, 2, 1, 3}, at::kDouble);
    auto loss = [&](const at::Tensor& f) {
      return (mmops::roiaware_pool3d(rois, pts, f, {2, 2, 1}, 5, mode) * weights).sum();
    };
    mmops_test::expect_finite_differences(loss, feats, 1);
  }
}

TEST(RoIAwarePool3d, Errors) {
  const at::Tensor feats = at::zeros({4, 2}, at::kDouble);
  EXPECT_ERROR_MENTIONS(mmops::roiaware_pool3d(unit_roi().slice(1, 0, 6), four_points(), feats, {2, 1, 1}),
                        "expected rois to be a 2-D tensor of shape [N, 7]");
  EXPECT_ERROR_MENTIONS(mmops::roiaware_pool3d(unit_roi(), four_points(), feats, {2, 0, 1}), "out_size values");
  EXPECT_ERROR_MENTIONS(mmops::roiaware_pool3d(unit_roi(), four_points(), feats, {2, 1, 1}, 0),
                        "max_pts_per_voxel must be in [1");
  EXPECT_ERROR_MENTIONS(mmops::roiaware_pool3d(unit_roi(), four_points(), feats, {2, 1, 1}, 8, "sum"),
                        "mode must be \"max\" or \"avg\", but got \"sum\"");
  EXPECT_ERROR_MENTIONS(mmops::roiaware_pool3d(unit_roi(), four_points(), feats.slice(0, 0, 3), {2, 1, 1}),
                        "expected pts_feature to have one row per point");
}

TEST(RoIAwarePool3d, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(6);
  const at::Tensor rois =
      at::cat({at::rand({30, 2}) * 10 - 5, at::rand({30, 1}), at::rand({30, 3}) * 5 + 2, at::rand({30, 1}) * 6 - 3}, 1)
          .to(at::kDouble);
  const at::Tensor pts = (at::rand({4000, 3}) * 14 - 7).to(at::kDouble);
  const at::Tensor feats = at::randn({4000, 6}, at::kDouble);
  for (const char* mode : {"max", "avg"}) {
    const at::Tensor fc = feats.cuda().requires_grad_(true);
    const at::Tensor fh = feats.clone().requires_grad_(true);
    const at::Tensor oc = mmops::roiaware_pool3d(rois.cuda(), pts.cuda(), fc, {6, 5, 4}, 16, mode);
    const at::Tensor oh = mmops::roiaware_pool3d(rois, pts, fh, {6, 5, 4}, 16, mode);
    EXPECT_TRUE(at::equal(oc.cpu(), oh)) << mode;
    oc.sum().backward();
    oh.sum().backward();
    EXPECT_TRUE(at::equal(fc.grad().cpu(), fh.grad())) << mode;
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry roiaware_pool3d_api{
    "mmops::roiaware_pool3d", [](const mmops_test::ApiArgs& a) {
      const std::vector<int64_t> out_size = a[3].toIntVector();
      return mmops_test::ApiOutputs{mmops::roiaware_pool3d(a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), out_size,
                                                           a[4].toInt(), a[5].toStringRef())};
    }};

} // namespace

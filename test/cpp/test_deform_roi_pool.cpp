// C++ face of mmops::deform_roi_pool: the public API, autograd from C++ (input
// and offset), finite differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

#include <cmath>
#include <optional>
#include <vector>

namespace {

at::Tensor roi(std::initializer_list<double> values) {
  return at::tensor(std::vector<double>(values), at::kDouble).reshape({-1, 5});
}

TEST(DeformRoIPool, MmcvKnownVector) {
  // mmcv's test: 4x4 map, roi (0, 0, 3, 3), 2x2 bins, 2x2 samples, no offset.
  const at::Tensor input =
      at::tensor({1., 2., 5., 6., 3., 4., 7., 8., 9., 10., 13., 14., 11., 12., 15., 16.}, at::kDouble)
          .reshape({1, 1, 4, 4})
          .requires_grad_(true);
  const at::Tensor out = mmops::deform_roi_pool(input, roi({0, 0, 0, 3, 3}), std::nullopt, {2, 2}, 1.0, 2);
  const at::Tensor expected = at::tensor({1.9375, 4.75, 7.5625, 10.375}, at::kDouble).reshape({1, 1, 2, 2});
  EXPECT_TRUE(at::allclose(out, expected, 1e-12, 1e-12)) << out;
  out.sum().backward();
  const at::Tensor grad = input.grad();
  EXPECT_NEAR(grad[0][0][0][0].item<double>(), 0.47265625, 1e-12);
  EXPECT_NEAR(grad[0][0][1][1].item<double>(), 0.390625, 1e-12);
  EXPECT_NEAR(grad[0][0][3][3].item<double>(), 0.00390625, 1e-12);
}

TEST(DeformRoIPool, OffsetShiftsTheBin) {
  // gamma * offset * roi width = 0.1 * 2.5 * 4 = 1 pixel right on a ramp along x: +1.
  const at::Tensor input = at::arange(8, at::kDouble).repeat({8, 1}).reshape({1, 1, 8, 8});
  const at::Tensor rois = roi({0, 1, 1, 5, 5});
  at::Tensor offset = at::zeros({1, 2, 1, 1}, at::kDouble);
  offset[0][0] = 2.5;
  const at::Tensor plain = mmops::deform_roi_pool(input, rois, std::nullopt, {1, 1}, 1.0, 2);
  const at::Tensor shifted = mmops::deform_roi_pool(input, rois, offset, {1, 1}, 1.0, 2);
  EXPECT_NEAR(shifted.item<double>() - plain.item<double>(), 1.0, 1e-12);
}

TEST(DeformRoIPool, FiniteDifferences) {
  at::manual_seed(0);
  const at::Tensor input = at::randn({2, 2, 7, 8}, at::kDouble);
  const at::Tensor rois = roi({0, 0.6, 1.2, 6.4, 5.3, 1, 2.2, 0.1, 7.9, 6.6, 1, -2, -2, 3, 3});
  const at::Tensor offset0 = at::randn({3, 2, 3, 2}, at::kDouble);
  const at::Tensor weights = at::randn({3, 2, 3, 2}, at::kDouble);
  auto loss = [&](const at::Tensor& x, const at::Tensor& o) {
    return (mmops::deform_roi_pool(x, rois, o, {3, 2}, 1.0, 2, 0.1) * weights).sum();
  };
  const at::Tensor x = input.clone().requires_grad_(true), o = offset0.clone().requires_grad_(true);
  loss(x, o).backward();
  const double eps = 1e-6;
  torch::NoGradGuard no_grad;
  for (int64_t i = 0; i < input.numel(); i += 5) {
    at::Tensor plus = input.clone(), minus = input.clone();
    plus.view(-1)[i] += eps;
    minus.view(-1)[i] -= eps;
    const double numeric = (loss(plus, offset0).item<double>() - loss(minus, offset0).item<double>()) / (2 * eps);
    EXPECT_NEAR(x.grad().view(-1)[i].item<double>(), numeric, 1e-6) << "input element " << i;
  }
  for (int64_t i = 0; i < offset0.numel(); ++i) {
    at::Tensor plus = offset0.clone(), minus = offset0.clone();
    plus.view(-1)[i] += eps;
    minus.view(-1)[i] -= eps;
    const double numeric = (loss(input, plus).item<double>() - loss(input, minus).item<double>()) / (2 * eps);
    EXPECT_NEAR(o.grad().view(-1)[i].item<double>(), numeric, 1e-5) << "offset element " << i;
  }
}

TEST(DeformRoIPool, ErrorsNameTheArgument) {
  const at::Tensor input = at::randn({2, 3, 6, 6});
  const at::Tensor rois = at::zeros({4, 5});
  const at::Tensor offset = at::zeros({4, 2, 2, 2});
  EXPECT_ERROR_MENTIONS(mmops::deform_roi_pool(input[0], rois, offset, {2, 2}), "expected input to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::deform_roi_pool(input, rois.slice(1, 0, 4), offset, {2, 2}), "rois");
  EXPECT_ERROR_MENTIONS(mmops::deform_roi_pool(input, rois, offset.slice(1, 0, 1), {2, 2}), "offset of shape");
  EXPECT_ERROR_MENTIONS(mmops::deform_roi_pool(input, rois, offset.to(at::kDouble), {2, 2}), "offset to have");
  EXPECT_ERROR_MENTIONS(mmops::deform_roi_pool(input, rois, offset, {0, 2}), "output_size");
  EXPECT_ERROR_MENTIONS(mmops::deform_roi_pool(input, rois, offset, {2, 2}, -1.0), "spatial_scale");
  EXPECT_ERROR_MENTIONS(mmops::deform_roi_pool(input, rois, offset, {2, 2}, 1.0, -1), "sampling_ratio");
  EXPECT_ERROR_MENTIONS(mmops::deform_roi_pool(input, rois, offset, {2, 2}, 1.0, 0, NAN), "gamma");
  at::Tensor bad = rois.clone();
  bad[1][0] = 2;
  EXPECT_ERROR_MENTIONS(mmops::deform_roi_pool(input, bad, offset, {2, 2}), "batch index");
}

TEST(DeformRoIPool, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(1);
  const at::Tensor input = at::randn({2, 40, 13, 17});
  const at::Tensor rois = at::cat({at::randint(0, 2, {9, 1}), at::rand({9, 2}) * 12, at::rand({9, 2}) * 12 + 6}, 1);
  const at::Tensor offset = at::randn({9, 2, 3, 4});
  for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    const at::Tensor x = input.to(dtype), r = rois.to(dtype), o = offset.to(dtype);
    const at::Tensor xc = x.cuda().requires_grad_(true), xh = x.clone().requires_grad_(true);
    const at::Tensor oc = o.cuda().requires_grad_(true), oh = o.clone().requires_grad_(true);
    const at::Tensor yc = mmops::deform_roi_pool(xc, r.cuda(), oc, {3, 4}, 0.5);
    const at::Tensor yh = mmops::deform_roi_pool(xh, r, oh, {3, 4}, 0.5);
    EXPECT_TRUE(at::allclose(yc.cpu().to(at::kDouble), yh.to(at::kDouble), 1e-2, 1e-2)) << dtype;
    yc.sum().backward();
    yh.sum().backward();
    EXPECT_TRUE(at::allclose(xc.grad().cpu().to(at::kDouble), xh.grad().to(at::kDouble), 1e-2, 1e-2)) << dtype;
    EXPECT_TRUE(at::allclose(oc.grad().cpu().to(at::kDouble), oh.grad().to(at::kDouble), 5e-2, 5e-2)) << dtype;
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry deform_roi_pool_api{
    "mmops::deform_roi_pool", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::deform_roi_pool(a[0].toTensor(), a[1].toTensor(),
                                                           mmops_test::optional_tensor(a[2]), a[3].toIntVector(),
                                                           a[4].toDouble(), a[5].toInt(), a[6].toDouble())};
    }};

} // namespace

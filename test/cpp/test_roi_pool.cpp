// C++ face of mmops::roi_pool: the public API, autograd from C++, finite
// differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

#include <string>

namespace {

at::Tensor ramp() {
  return at::arange(16, at::kDouble).reshape({1, 1, 4, 4});
}

at::Tensor roi(std::initializer_list<double> values) {
  return at::tensor(std::vector<double>(values), at::kDouble).reshape({-1, 5});
}

TEST(RoIPool, KnownVectorForwardAndBackward) {
  // 4x4 ramp, box over the map, 2x2 bins of 2x2 pixels: the bottom-right pixel of each bin.
  const at::Tensor input = ramp().requires_grad_(true);
  const at::Tensor out = mmops::roi_pool(input, roi({0, 0, 0, 3, 3}), {2, 2});
  EXPECT_TRUE(at::equal(out, at::tensor({5.0, 7.0, 13.0, 15.0}, at::kDouble).reshape({1, 1, 2, 2}))) << out;
  out.sum().backward();
  const at::Tensor expected =
      at::tensor({0., 0., 0., 0., 0., 1., 0., 1., 0., 0., 0., 0., 0., 1., 0., 1.}, at::kDouble).reshape({1, 1, 4, 4});
  EXPECT_TRUE(at::equal(input.grad(), expected)) << input.grad();
}

TEST(RoIPool, RoundsBoxCornersHalfAwayFromZero) {
  // (0.8, 1.2, 5, 5) * 0.5 = (0.4, 0.6, 2.5, 2.5) -> x 0..3, y 1..3: max is 15.
  const at::Tensor out = mmops::roi_pool(ramp(), roi({0, 0.8, 1.2, 5, 5}), {1, 1}, 0.5);
  EXPECT_EQ(out.item<double>(), 15.0);
  // (0.4, 0.4, 1.4, 1.4) -> pixels 0..1 -> max 5
  EXPECT_EQ(mmops::roi_pool(ramp(), roi({0, 0.4, 0.4, 1.4, 1.4}), {1, 1}).item<double>(), 5.0);
}

TEST(RoIPool, EmptyBinsAndNonFiniteBoxesGiveZeros) {
  const at::Tensor input = (ramp() + 1).requires_grad_(true);
  const at::Tensor rois = roi({0, 10, 10, 12, 12, 0, NAN, 0, 2, 2, 0, 0, 0, INFINITY, 2});
  const at::Tensor out = mmops::roi_pool(input, rois, {2, 2});
  EXPECT_TRUE(at::equal(out, at::zeros_like(out))) << out;
  out.sum().backward();
  EXPECT_TRUE(at::equal(input.grad(), at::zeros_like(input))) << input.grad();
}

TEST(RoIPool, FiniteDifferences) {
  // distinct values 0.25 apart: the argmax does not move under a 1e-6 step
  at::manual_seed(0);
  const at::Tensor input = (at::randperm(2 * 2 * 7 * 8, at::kDouble).reshape({2, 2, 7, 8}) / 4.0);
  const at::Tensor rois = roi({0, 0.6, 1.2, 6.4, 5.3, 1, 2.2, 0.1, 7.9, 6.6, 1, -2, -2, 3, 3});
  const at::Tensor weights = at::randn({3, 2, 3, 2}, at::kDouble);
  auto loss = [&](const at::Tensor& x) { return (mmops::roi_pool(x, rois, {3, 2}) * weights).sum(); };
  const at::Tensor x = input.clone().requires_grad_(true);
  loss(x).backward();
  const at::Tensor analytic = x.grad();
  const double eps = 1e-6;
  torch::NoGradGuard no_grad;
  for (int64_t i = 0; i < input.numel(); i += 3) {
    at::Tensor plus = input.clone(), minus = input.clone();
    plus.view(-1)[i] += eps;
    minus.view(-1)[i] -= eps;
    const double numeric = (loss(plus).item<double>() - loss(minus).item<double>()) / (2 * eps);
    EXPECT_NEAR(analytic.view(-1)[i].item<double>(), numeric, 1e-6) << "element " << i;
  }
}

TEST(RoIPool, ErrorsNameTheArgument) {
  const at::Tensor input = at::randn({2, 3, 6, 6});
  const at::Tensor rois = at::zeros({4, 5});
  EXPECT_ERROR_MENTIONS(mmops::roi_pool(input[0], rois, {2, 2}), "expected input to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::roi_pool(input, rois.slice(1, 0, 4), {2, 2}), "rois");
  EXPECT_ERROR_MENTIONS(mmops::roi_pool(input, rois.to(at::kDouble), {2, 2}), "dtype of input");
  EXPECT_ERROR_MENTIONS(mmops::roi_pool(input, rois, {0, 2}), "output_size");
  EXPECT_ERROR_MENTIONS(mmops::roi_pool(input, rois, {2, 2}, -1.0), "spatial_scale");
  at::Tensor bad = rois.clone();
  bad[1][0] = 2;
  EXPECT_ERROR_MENTIONS(mmops::roi_pool(input, bad, {2, 2}), "batch index");
}

TEST(RoIPool, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(1);
  const at::Tensor input = at::randn({2, 40, 13, 17});
  const at::Tensor rois = at::cat({at::randint(0, 2, {9, 1}), at::rand({9, 2}) * 12, at::rand({9, 2}) * 12 + 6}, 1);
  for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    const at::Tensor x = input.to(dtype), r = rois.to(dtype);
    const at::Tensor xc = x.cuda().requires_grad_(true), xh = x.clone().requires_grad_(true);
    const at::Tensor oc = mmops::roi_pool(xc, r.cuda(), {3, 4}, 0.5);
    const at::Tensor oh = mmops::roi_pool(xh, r, {3, 4}, 0.5);
    EXPECT_TRUE(at::equal(oc.cpu(), oh)) << dtype;
    oc.sum().backward();
    oh.sum().backward();
    EXPECT_TRUE(at::allclose(xc.grad().cpu().to(at::kDouble), xh.grad().to(at::kDouble), 1e-2, 1e-2)) << dtype;
  }
}

TEST(RoIPool, CudaDoubleMatchesCpuInEveryLayout) {
  // double runs the roi-major kernel on a channels-last copy (channels_last_cuda): C = 70 and
  // H * W = 135 leave partial 64-wide transpose tiles on both axes.
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(3);
  const at::Tensor wide = at::randn({2, 70, 9, 30}, at::kDouble);
  const at::Tensor rois =
      at::cat({at::randint(0, 2, {6, 1}), at::rand({6, 2}) * 10, at::rand({6, 2}) * 10 + 8}, 1).to(at::kDouble);
  const at::Tensor nchw = wide.slice(3, 0, 15).contiguous();
  for (const at::Tensor& x : {nchw, nchw.contiguous(at::MemoryFormat::ChannelsLast), wide.slice(3, 0, 15)}) {
    const at::Tensor expected = mmops::roi_pool(x, rois, {3, 4}, 0.75);
    const at::Tensor out = mmops::roi_pool(x.cuda(), rois.cuda(), {3, 4}, 0.75);
    EXPECT_TRUE(at::equal(out.cpu(), expected)) << x.strides();
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry roi_pool_api{
    "mmops::roi_pool", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{
          mmops::roi_pool(a[0].toTensor(), a[1].toTensor(), a[2].toIntVector(), a[3].toDouble())};
    }};

} // namespace

// C++ face of mmops::ps_roi_align and mmops::ps_roi_pool: the public API,
// autograd from C++, finite differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

#include <functional>
#include <string>

namespace {

// A 4x4 ramp (value 4 y + x) in every one of `channels` channels.
at::Tensor ramp(int64_t channels) {
  return at::arange(16, at::kDouble).reshape({1, 1, 4, 4}).expand({1, channels, 4, 4}).contiguous();
}

at::Tensor roi(std::initializer_list<double> values) {
  return at::tensor(std::vector<double>(values), at::kDouble).reshape({-1, 5});
}

TEST(PSRoIPool, KnownVectorsAndChannelMapping) {
  // box (0, 0)-(4, 4), 2x2 bins: [0, 2) and [2, 4) clamped to [2, 3) (the last row and
  // column are never pooled, as torchvision's forward)
  const at::Tensor out = mmops::ps_roi_pool(ramp(4), roi({0, 0, 0, 4, 4}), {2, 2});
  EXPECT_TRUE(at::equal(out, at::tensor({2.5, 4.0, 8.5, 10.0}, at::kDouble).reshape({1, 1, 2, 2}))) << out;
  // channel c * 4 + bin holds the constant c * 4 + bin: output (c, bin) reads it
  const at::Tensor x = at::arange(8, at::kDouble).reshape({1, 8, 1, 1}).expand({1, 8, 3, 3}).contiguous();
  const at::Tensor mapped = mmops::ps_roi_pool(x, roi({0, 0, 0, 3, 3}), {2, 2});
  EXPECT_TRUE(at::equal(mapped, at::arange(8, at::kDouble).reshape({1, 2, 2, 2}))) << mapped;
}

TEST(PSRoIAlign, KnownVectors) {
  // (0.5, 0.5)-(2.5, 2.5) - 0.5 = (0, 0)-(2, 2); one sample at each bin centre of the ramp
  const at::Tensor out = mmops::ps_roi_align(ramp(4), roi({0, 0.5, 0.5, 2.5, 2.5}), {2, 2}, 1.0, 1);
  EXPECT_TRUE(at::allclose(out, at::tensor({2.5, 3.5, 6.5, 7.5}, at::kDouble).reshape({1, 1, 2, 2}))) << out;
  // zero-size box, adaptive grid: no sample, 0 (torchvision: NaN)
  EXPECT_EQ(mmops::ps_roi_align(ramp(1), roi({0, 1, 1, 1, 1}), {1, 1}).item<double>(), 0.0);
  // a non-finite box pools zeros
  EXPECT_EQ(mmops::ps_roi_align(ramp(1), roi({0, 1, NAN, 3, 3}), {1, 1}, 1.0, 2).item<double>(), 0.0);
}

void finite_differences(const std::function<at::Tensor(const at::Tensor&)>& op, const at::Tensor& input, int64_t rois) {
  at::manual_seed(0);
  const at::Tensor weights = at::randn({rois, 2, 3, 2}, at::kDouble);
  auto loss = [&](const at::Tensor& x) { return (op(x) * weights).sum(); };
  const at::Tensor x = input.clone().requires_grad_(true);
  loss(x).backward();
  const at::Tensor analytic = x.grad();
  EXPECT_GT(analytic.abs().sum().item<double>(), 0.0);
  const double eps = 1e-6;
  torch::NoGradGuard no_grad;
  for (int64_t i = 0; i < input.numel(); i += 5) {
    at::Tensor plus = input.clone(), minus = input.clone();
    plus.view(-1)[i] += eps;
    minus.view(-1)[i] -= eps;
    const double numeric = (loss(plus).item<double>() - loss(minus).item<double>()) / (2 * eps);
    EXPECT_NEAR(analytic.view(-1)[i].item<double>(), numeric, 1e-6) << "element " << i;
  }
}

TEST(PSRoIAlign, FiniteDifferences) {
  at::manual_seed(1);
  const at::Tensor input = at::randn({2, 12, 7, 8}, at::kDouble);
  const at::Tensor rois = roi({0, 0.6, 1.2, 6.4, 5.3, 1, 2.2, 0.1, 7.9, 6.6, 1, -2, -2, 3, 3});
  finite_differences([&](const at::Tensor& x) { return mmops::ps_roi_align(x, rois, {3, 2}, 1.0, -1); }, input, 3);
  finite_differences([&](const at::Tensor& x) { return mmops::ps_roi_align(x, rois, {3, 2}, 0.5, 2); }, input, 3);
}

TEST(PSRoIPool, FiniteDifferences) {
  at::manual_seed(2);
  const at::Tensor input = at::randn({2, 12, 7, 8}, at::kDouble);
  const at::Tensor rois = roi({0, 0.6, 1.2, 6.4, 5.3, 1, 2.2, 0.1, 7.9, 6.6, 1, -2, -2, 3, 3});
  finite_differences([&](const at::Tensor& x) { return mmops::ps_roi_pool(x, rois, {3, 2}, 1.0); }, input, 3);
}

TEST(PSRoI, ErrorsNameTheArgument) {
  const at::Tensor input = at::randn({2, 12, 6, 6});
  const at::Tensor rois = at::zeros({4, 5});
  EXPECT_ERROR_MENTIONS(mmops::ps_roi_align(input[0], rois, {2, 2}), "expected input to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::ps_roi_pool(input, rois.slice(1, 0, 4), {2, 2}), "rois");
  EXPECT_ERROR_MENTIONS(mmops::ps_roi_align(input, rois.to(at::kDouble), {2, 2}), "dtype of input");
  EXPECT_ERROR_MENTIONS(mmops::ps_roi_pool(input, rois, {0, 2}), "output_size");
  EXPECT_ERROR_MENTIONS(mmops::ps_roi_pool(input, rois, {2, 5}, 1.0), "multiple of output_size");
  EXPECT_ERROR_MENTIONS(mmops::ps_roi_align(input, rois, {2, 2}, -1.0), "spatial_scale");
  EXPECT_ERROR_MENTIONS(mmops::ps_roi_align(input, rois, {2, 2}, 1.0, 600), "sampling_ratio");
  at::Tensor bad = rois.clone();
  bad[1][0] = 2;
  EXPECT_ERROR_MENTIONS(mmops::ps_roi_pool(input, bad, {2, 2}), "batch index");
  EXPECT_ERROR_MENTIONS(mmops::ps_roi_align(input, bad, {2, 2}), "batch index");
}

TEST(PSRoI, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(3);
  const at::Tensor input = at::randn({2, 10 * 12, 21, 37});
  const at::Tensor rois = at::cat({at::randint(0, 2, {40, 1}), at::rand({40, 2}) * 30, at::rand({40, 2}) * 30 + 6}, 1);
  for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    for (bool align : {true, false}) {
      const at::Tensor x = input.to(dtype), r = rois.to(dtype);
      const at::Tensor xc = x.cuda().requires_grad_(true), xh = x.clone().requires_grad_(true);
      auto run = [&](const at::Tensor& t, const at::Tensor& b) {
        return align ? mmops::ps_roi_align(t, b, {3, 4}, 0.5, -1) : mmops::ps_roi_pool(t, b, {3, 4}, 0.5);
      };
      const at::Tensor oc = run(xc, r.cuda()), oh = run(xh, r);
      EXPECT_TRUE(at::allclose(oc.cpu().to(at::kDouble), oh.to(at::kDouble), 1e-2, 1e-2)) << dtype << align;
      oc.sum().backward();
      oh.sum().backward();
      EXPECT_TRUE(at::allclose(xc.grad().cpu().to(at::kDouble), xh.grad().to(at::kDouble), 1e-2, 1e-2))
          << dtype << align;
    }
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry ps_roi_align_api{
    "mmops::ps_roi_align", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{
          mmops::ps_roi_align(a[0].toTensor(), a[1].toTensor(), a[2].toIntVector(), a[3].toDouble(), a[4].toInt())};
    }};

const mmops_test::CppApiEntry ps_roi_pool_api{
    "mmops::ps_roi_pool", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{
          mmops::ps_roi_pool(a[0].toTensor(), a[1].toTensor(), a[2].toIntVector(), a[3].toDouble())};
    }};

} // namespace

// C++ face of mmops::roi_align: the public API, autograd from C++, finite
// differences, errors, TorchScript source compiled in C++, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/frontend/resolver.h>
#include <torch/csrc/jit/frontend/sugared_value.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

#include <string>

namespace {

at::Tensor known_input(at::ScalarType dtype = at::kFloat) {
  return at::arange(1, 5, at::TensorOptions().dtype(dtype)).reshape({1, 1, 2, 2});
}

at::Tensor known_roi(at::ScalarType dtype = at::kFloat) {
  return at::tensor({0.0, 0.0, 0.0, 1.0, 1.0}, at::TensorOptions().dtype(dtype)).reshape({1, 5});
}

// Random rois: batch index in [0, batch), boxes partly outside a height x width image.
at::Tensor random_rois(int64_t count, int64_t batch, double height, double width, at::ScalarType dtype) {
  const auto options = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor index = at::randint(0, batch, {count, 1}, options);
  const at::Tensor x1 = at::rand({count, 1}, options) * width * 1.1 - 0.1 * width;
  const at::Tensor y1 = at::rand({count, 1}, options) * height * 1.1 - 0.1 * height;
  const at::Tensor x2 = x1 + at::rand({count, 1}, options) * width * 0.6;
  const at::Tensor y2 = y1 + at::rand({count, 1}, options) * height * 0.6;
  return at::cat({index, x1, y1, x2, y2}, 1).to(dtype);
}

TEST(RoIAlign, KnownVectorForwardAndBackward) {
  // mmcv's test vector: 2x2 map, one roi over it, 2x2 output, 2 samples per bin side.
  const at::Tensor input = known_input().requires_grad_(true);
  const at::Tensor out = mmops::roi_align(input, known_roi(), {2, 2}, 1.0, 2, "avg", true);
  const at::Tensor expected = at::tensor({1.0f, 1.25f, 1.5f, 1.75f}).reshape({1, 1, 2, 2});
  EXPECT_TRUE(at::allclose(out, expected)) << out;

  out.sum().backward();
  const at::Tensor expected_grad = at::tensor({3.0625f, 0.4375f, 0.4375f, 0.0625f}).reshape({1, 1, 2, 2});
  EXPECT_TRUE(at::allclose(input.grad(), expected_grad)) << input.grad();
}

TEST(RoIAlign, ConstantMapPoolsToTheConstantInsideTheImage) {
  const at::Tensor input = at::full({2, 3, 16, 20}, 2.5, at::kDouble);
  const at::Tensor rois = at::tensor({0.0, 2.0, 3.0, 10.0, 12.0, 1.0, 0.0, 0.0, 19.0, 15.0}, at::kDouble).reshape({2, 5});
  for (const char* mode : {"avg", "max"}) {
    for (int64_t ratio : {0, 1, 3}) {
      const at::Tensor out = mmops::roi_align(input, rois, {4, 5}, 1.0, ratio, mode, true);
      EXPECT_TRUE(at::allclose(out, at::full_like(out, 2.5))) << mode << " ratio " << ratio;
    }
  }
}

TEST(RoIAlign, MaxModeTakesTheLargestSample) {
  // One bin, 2x2 samples of a 4x4 ramp: the largest sample is the one nearest the bottom right.
  const at::Tensor input = at::arange(16, at::kDouble).reshape({1, 1, 4, 4});
  const at::Tensor roi = at::tensor({0.0, 0.0, 0.0, 4.0, 4.0}, at::kDouble).reshape({1, 5});
  const at::Tensor out = mmops::roi_align(input, roi, {1, 1}, 1.0, 2, "max", true);
  // Samples at (0.5, 0.5), (0.5, 2.5), (2.5, 0.5), (2.5, 2.5) after the -0.5 shift; max at y=x=2.5.
  EXPECT_NEAR(out.item<double>(), 2.5 * 4 + 2.5, 1e-12);
}

// Central differences in double against the C++ autograd gradient.
void check_finite_differences(const char* mode, int64_t ratio, bool aligned) {
  at::manual_seed(7);
  const at::Tensor input = at::randn({2, 2, 6, 7}, at::kDouble);
  const at::Tensor rois = random_rois(4, 2, 6.0, 7.0, at::kDouble);
  const at::Tensor weight = at::randn({4, 2, 3, 2}, at::kDouble);
  auto loss = [&](const at::Tensor& x) {
    return (mmops::roi_align(x, rois, {3, 2}, 1.0, ratio, mode, aligned) * weight).sum();
  };
  const at::Tensor x = input.clone().requires_grad_(true);
  loss(x).backward();
  const at::Tensor analytic = x.grad();

  const double eps = 1e-6;
  at::Tensor numeric = at::zeros_like(input);
  at::Tensor flat = input.clone();
  auto flat_view = flat.view({-1});
  auto numeric_view = numeric.view({-1});
  at::NoGradGuard no_grad;
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const double saved = flat_view[i].item<double>();
    flat_view[i] = saved + eps;
    const double plus = loss(flat).item<double>();
    flat_view[i] = saved - eps;
    const double minus = loss(flat).item<double>();
    flat_view[i] = saved;
    numeric_view[i] = (plus - minus) / (2 * eps);
  }
  EXPECT_TRUE(at::allclose(analytic, numeric, 1e-6, 1e-6))
      << mode << " ratio " << ratio << " max diff " << (analytic - numeric).abs().max().item<double>();
}

TEST(RoIAlign, FiniteDifferenceGradientAvg) {
  check_finite_differences("avg", 2, true);
  check_finite_differences("avg", 0, false);
}

TEST(RoIAlign, FiniteDifferenceGradientMax) {
  check_finite_differences("max", 2, true);
  check_finite_differences("max", 0, false);
}

TEST(RoIAlign, EmptyRoisForwardAndBackward) {
  const at::Tensor input = at::randn({2, 3, 5, 5}).requires_grad_(true);
  const at::Tensor rois = at::zeros({0, 5});
  const at::Tensor out = mmops::roi_align(input, rois, {2, 3});
  EXPECT_EQ(out.sizes(), (at::IntArrayRef{0, 3, 2, 3}));
  out.sum().backward();
  EXPECT_EQ(input.grad().sizes(), input.sizes());
  EXPECT_EQ(input.grad().abs().sum().item<float>(), 0.0f);
}

TEST(RoIAlign, NonFiniteRoiPoolsZeros) {
  const at::Tensor input = at::randn({1, 2, 5, 5}).requires_grad_(true);
  const at::Tensor rois = at::tensor({0.0f, NAN, 0.0f, 3.0f, 3.0f, 0.0f, 0.0f, 0.0f, INFINITY, 2.0f}).reshape({2, 5});
  for (const char* mode : {"avg", "max"}) {
    const at::Tensor out = mmops::roi_align(input, rois, {2, 2}, 1.0, 0, mode);
    EXPECT_EQ(out.abs().sum().item<float>(), 0.0f) << mode;
  }
}

TEST(RoIAlign, DoubleBackwardIsRefused) {
  const at::Tensor input = at::randn({1, 1, 4, 4}, at::kDouble).requires_grad_(true);
  const at::Tensor rois = at::tensor({0.0, 0.0, 0.0, 3.0, 3.0}, at::kDouble).reshape({1, 5});
  const at::Tensor out = mmops::roi_align(input, rois, {2, 2}, 1.0, 2);
  // A grad_output that itself requires grad asks for a differentiable backward.
  const at::Tensor grad_out = at::ones_like(out).requires_grad_(true);
  EXPECT_ERROR_MENTIONS(
      torch::autograd::grad({out}, {input}, {grad_out}, /*retain_graph=*/true, /*create_graph=*/true),
      "double backward is not implemented");
  // A plain first-order backward with create_graph still works.
  const auto grads = torch::autograd::grad({out.sum()}, {input}, {}, true, true);
  EXPECT_EQ(grads[0].sizes(), input.sizes());
}

TEST(RoIAlign, BadArgumentsRaiseClearErrors) {
  const at::Tensor input = at::randn({2, 3, 8, 8});
  const at::Tensor rois = at::tensor({0.f, 0.f, 0.f, 4.f, 4.f}).reshape({1, 5});
  EXPECT_ERROR_MENTIONS(mmops::roi_align(input[0], rois, {2, 2}), "input to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::roi_align(input, rois.slice(1, 0, 4), {2, 2}), "rois to be a 2-D tensor of shape [K, 5]");
  EXPECT_ERROR_MENTIONS(mmops::roi_align(input, rois.to(at::kDouble), {2, 2}), "rois to have the dtype of input");
  EXPECT_ERROR_MENTIONS(mmops::roi_align(input.to(at::kInt), rois.to(at::kInt), {2, 2}), "floating point");
  EXPECT_ERROR_MENTIONS(mmops::roi_align(input, rois, {0, 2}), "output_size values must be positive");
  EXPECT_ERROR_MENTIONS(mmops::roi_align(input, rois, {2, 2, 2}), "output_size to hold 2 values");
  EXPECT_ERROR_MENTIONS(mmops::roi_align(input, rois, {2, 2}, 1.0, -1), "sampling_ratio must be >= 0");
  EXPECT_ERROR_MENTIONS(mmops::roi_align(input, rois, {2, 2}, 0.0), "spatial_scale must be a positive");
  EXPECT_ERROR_MENTIONS(mmops::roi_align(input, rois, {2, 2}, 1.0, 0, "mean"), "pool_mode must be \"avg\" or \"max\"");
  const at::Tensor bad_index = at::tensor({2.f, 0.f, 0.f, 4.f, 4.f}).reshape({1, 5});
  EXPECT_ERROR_MENTIONS(mmops::roi_align(input, bad_index, {2, 2}), "batch index rois[:, 0] must lie in [0, N)");
  const at::Tensor negative_index = at::tensor({-1.f, 0.f, 0.f, 4.f, 4.f}).reshape({1, 5});
  EXPECT_ERROR_MENTIONS(mmops::roi_align(input, negative_index, {2, 2}), "rois[0, 0] = -1");
}

TEST(RoIAlign, StrictSwitchRoundTrips) {
  const bool before = mmops::strict_index_check();
  mmops::set_strict_index_check(!before);
  EXPECT_EQ(mmops::strict_index_check(), !before);
  mmops::set_strict_index_check(before);
  EXPECT_EQ(mmops::strict_index_check(), before);
}

TEST(RoIAlign, TorchScriptSourceCompiledInCpp) {
  auto unit = std::make_shared<torch::jit::CompilationUnit>();
  unit->define(std::nullopt, R"JIT(
def pool(x: Tensor, rois: Tensor) -> Tensor:
    return torch.ops.mmops.roi_align(x, rois, [2, 2], 1.0, 2, "avg", True) * 2.0
)JIT", std::make_shared<mmops_test::TorchResolver>(), nullptr);
  const at::Tensor out = unit->run_method("pool", known_input(), known_roi()).toTensor();
  const at::Tensor expected = 2 * mmops::roi_align(known_input(), known_roi(), {2, 2}, 1.0, 2);
  EXPECT_TRUE(at::allclose(out, expected)) << out;
}

TEST(RoIAlign, CudaMatchesCpuForEveryDtype) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(3);
  for (const char* mode : {"avg", "max"}) {
    for (const auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
      const at::Tensor input = at::randn({2, 5, 24, 31}).to(dtype);
      const at::Tensor rois = random_rois(16, 2, 24.0, 31.0, dtype);
      const at::Tensor grad = at::randn({16, 5, 3, 4}).to(dtype);

      const at::Tensor x_cpu = input.to(at::kFloat).detach().clone().requires_grad_(true);
      const at::Tensor out_cpu = mmops::roi_align(x_cpu, rois.to(at::kFloat), {3, 4}, 0.5, 0, mode);
      out_cpu.backward(grad.to(at::kFloat));

      const at::Tensor x_cuda = input.detach().cuda().requires_grad_(true);
      const at::Tensor out_cuda = mmops::roi_align(x_cuda, rois.cuda(), {3, 4}, 0.5, 0, mode);
      out_cuda.backward(grad.cuda());
      EXPECT_EQ(out_cuda.scalar_type(), dtype);
      EXPECT_EQ(x_cuda.grad().scalar_type(), dtype);

      const double tol = dtype == at::kFloat ? 1e-5 : dtype == at::kDouble ? 1e-5 : dtype == at::kHalf ? 1e-2 : 5e-2;
      EXPECT_TRUE(at::allclose(out_cuda.cpu().to(at::kFloat), out_cpu, tol, tol)) << mode << " " << dtype;
      EXPECT_TRUE(at::allclose(x_cuda.grad().cpu().to(at::kFloat), x_cpu.grad(), tol, tol)) << mode << " " << dtype;
    }
  }
}

TEST(RoIAlign, CudaOutOfRangeBatchIndexPoolsZerosUnlessStrict) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  const at::Tensor input = at::randn({2, 3, 8, 8}, at::kCUDA).requires_grad_(true);
  const at::Tensor rois = at::tensor({5.f, 0.f, 0.f, 4.f, 4.f, -1.f, 0.f, 0.f, 4.f, 4.f}).reshape({2, 5}).cuda();
  const at::Tensor out = mmops::roi_align(input, rois, {2, 2});
  EXPECT_EQ(out.abs().sum().item<float>(), 0.0f);
  out.sum().backward();
  EXPECT_EQ(input.grad().abs().sum().item<float>(), 0.0f);

  mmops::set_strict_index_check(true);
  EXPECT_ERROR_MENTIONS(mmops::roi_align(input, rois, {2, 2}), "batch index rois[:, 0] must lie in [0, N)");
  mmops::set_strict_index_check(false);
}

} // namespace

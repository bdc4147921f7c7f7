// C++ face of mmops::roi_align and mmops::multi_level_roi_align: the public
// API, autograd from C++, finite differences, errors, TorchScript source
// compiled in C++, CUDA == CPU; multi_level_roi_align equals roi_align on each
// roi's mmdet level and sends gradients to every level.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/frontend/resolver.h>
#include <torch/csrc/jit/frontend/sugared_value.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

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

// Central differences of loss() w.r.t. every element of `x`, which loss()
// reads: x is perturbed in place and restored.
at::Tensor numeric_gradient(const at::Tensor& x, const std::function<double()>& loss) {
  const double eps = 1e-6;
  at::NoGradGuard no_grad;
  at::Tensor numeric = at::zeros_like(x);
  auto flat = x.view({-1});
  auto numeric_flat = numeric.view({-1});
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const double saved = flat[i].item<double>();
    flat[i] = saved + eps;
    const double plus = loss();
    flat[i] = saved - eps;
    const double minus = loss();
    flat[i] = saved;
    numeric_flat[i] = (plus - minus) / (2 * eps);
  }
  return numeric;
}

// CUDA vs CPU tolerance: `full` for float and double, else by dtype.
double cuda_tolerance(at::ScalarType dtype, double full) {
  return dtype == at::kFloat || dtype == at::kDouble ? full : dtype == at::kHalf ? 1e-2 : 5e-2;
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
  const at::Tensor rois =
      at::tensor({0.0, 2.0, 3.0, 10.0, 12.0, 1.0, 0.0, 0.0, 19.0, 15.0}, at::kDouble).reshape({2, 5});
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

  const at::Tensor probe = input.clone();
  const at::Tensor numeric = numeric_gradient(probe, [&] { return loss(probe).item<double>(); });
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
  EXPECT_ERROR_MENTIONS(torch::autograd::grad({out}, {input}, {grad_out}, /*retain_graph=*/true, /*create_graph=*/true),
                        "double backward is not implemented");
  // A plain first-order backward with create_graph still works.
  const auto grads = torch::autograd::grad({out.sum()}, {input}, {}, true, true);
  EXPECT_EQ(grads[0].sizes(), input.sizes());
}

TEST(RoIAlign, BadArgumentsRaiseClearErrors) {
  const at::Tensor input = at::randn({2, 3, 8, 8});
  const at::Tensor rois = at::tensor({0.f, 0.f, 0.f, 4.f, 4.f}).reshape({1, 5});
  EXPECT_ERROR_MENTIONS(mmops::roi_align(input[0], rois, {2, 2}), "input to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::roi_align(input, rois.slice(1, 0, 4), {2, 2}),
                        "rois to be a 2-D tensor of shape [K, 5]");
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
)JIT",
               std::make_shared<mmops_test::TorchResolver>(), nullptr);
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

      const double tol = cuda_tolerance(dtype, 1e-5);
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

// ----- multi_level_roi_align: a 4-level pyramid, strides 4 to 32 -------------

const std::vector<double> kScales{0.25, 0.125, 0.0625, 0.03125};

std::vector<at::Tensor> pyramid(at::ScalarType dtype, int64_t channels = 3) {
  std::vector<at::Tensor> features;
  for (int64_t l = 0; l < 4; ++l) {
    features.push_back(at::randn({2, channels, 64 >> l, 96 >> l}, at::TensorOptions().dtype(dtype)));
  }
  return features;
}

// Boxes in a 384 x 256 image whose sides make mmdet's rule pick every level.
at::Tensor pyramid_rois(at::ScalarType dtype) {
  return at::tensor({0.0, 10.0,   12.0,   40.0,  50.0,   // side ~34  -> level 0
                     1.0, 30.0,   20.0,   150.0, 120.0,  // side ~110 -> level 0 (just below 112)
                     0.0, 5.0,    9.0,    125.0, 131.0,  // side ~121 -> level 1
                     1.0, 50.0,   40.0,   300.0, 240.0,  // side ~224 -> level 1 (just below 224)
                     0.0, 0.0,    0.0,    383.0, 255.0,  // side ~313 -> level 2
                     1.0, -200.0, -150.0, 500.0, 400.0}, // side ~620 -> level 3
                    at::TensorOptions().dtype(dtype))
      .reshape({6, 5});
}

int expected_level(const at::Tensor& roi) {
  const double w = roi[3].item<double>() - roi[1].item<double>();
  const double h = roi[4].item<double>() - roi[2].item<double>();
  const double level = std::floor(std::log2(std::sqrt(w * h) / 56.0 + 1e-6));
  return static_cast<int>(std::min(std::max(level, 0.0), 3.0));
}

TEST(MultiLevelRoIAlign, EqualsRoIAlignOnTheMmdetLevel) {
  at::manual_seed(21);
  const std::vector<at::Tensor> features = pyramid(at::kDouble);
  const at::Tensor rois = pyramid_rois(at::kDouble);
  for (const char* mode : {"avg", "max"}) {
    const at::Tensor out = mmops::multi_level_roi_align(features, rois, {7, 7}, kScales, 2, mode);
    std::vector<int> seen(4, 0);
    for (int64_t k = 0; k < rois.size(0); ++k) {
      const int level = expected_level(rois[k]);
      seen[level] += 1;
      const at::Tensor single =
          mmops::roi_align(features[level], rois.slice(0, k, k + 1), {7, 7}, kScales[level], 2, mode);
      EXPECT_TRUE(at::allclose(out.slice(0, k, k + 1), single, 1e-12, 1e-12)) << mode << " roi " << k;
    }
    for (int l = 0; l < 4; ++l) {
      EXPECT_GT(seen[l], 0) << "the test rois should cover level " << l;
    }
  }
}

TEST(MultiLevelRoIAlign, FiniteDifferenceGradientsToEveryLevel) {
  at::manual_seed(22);
  std::vector<at::Tensor> features;
  for (int64_t l = 0; l < 4; ++l) {
    features.push_back(at::randn({2, 1, 16 >> l, 24 >> l}, at::kDouble).requires_grad_(true));
  }
  const at::Tensor rois = pyramid_rois(at::kDouble);
  const at::Tensor weight = at::randn({6, 1, 2, 2}, at::kDouble);
  auto loss = [&](const std::vector<at::Tensor>& f) {
    return (mmops::multi_level_roi_align(f, rois, {2, 2}, kScales, 2, "avg") * weight).sum();
  };
  loss(features).backward();
  for (int64_t l = 0; l < 4; ++l) {
    std::vector<at::Tensor> probe;
    for (const at::Tensor& f : features) {
      probe.push_back(f.detach().clone());
    }
    const at::Tensor numeric = numeric_gradient(probe[l], [&] { return loss(probe).item<double>(); });
    EXPECT_TRUE(at::allclose(features[l].grad(), numeric, 1e-6, 1e-6)) << "level " << l;
  }
}

TEST(MultiLevelRoIAlign, BadArgumentsRaiseClearErrors) {
  const std::vector<at::Tensor> features = pyramid(at::kFloat);
  const at::Tensor rois = pyramid_rois(at::kFloat);
  EXPECT_ERROR_MENTIONS(mmops::multi_level_roi_align(features, rois, {7, 7}, {0.25, 0.125}),
                        "one spatial scale per feature map");
  std::vector<at::Tensor> mixed = features;
  mixed[1] = mixed[1].to(at::kDouble);
  EXPECT_ERROR_MENTIONS(mmops::multi_level_roi_align(mixed, rois, {7, 7}, kScales), "features[1]");
  EXPECT_ERROR_MENTIONS(mmops::multi_level_roi_align(features, rois, {7, 7}, kScales, 0, "avg", true, 0),
                        "finest_scale must be positive");
  EXPECT_ERROR_MENTIONS(mmops::multi_level_roi_align({}, rois, {7, 7}, {}), "features");
}

TEST(MultiLevelRoIAlign, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(23);
  for (const char* mode : {"avg", "max"}) {
    for (const auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
      std::vector<at::Tensor> cpu, cuda;
      for (const at::Tensor& f : pyramid(at::kFloat, 70)) {
        cpu.push_back(f.to(dtype).to(at::kFloat).detach().clone().requires_grad_(true));
        cuda.push_back(f.to(dtype).detach().cuda().requires_grad_(true));
      }
      // Both devices pool the same (rounded) boxes: bfloat16 moves them by up to a pixel.
      const at::Tensor rois = pyramid_rois(at::kFloat).to(dtype).to(at::kFloat);
      const at::Tensor grad = at::randn({6, 70, 7, 7}).to(dtype).to(at::kFloat);
      const at::Tensor out_cpu = mmops::multi_level_roi_align(cpu, rois, {7, 7}, kScales, 2, mode);
      out_cpu.backward(grad);
      const at::Tensor out_cuda = mmops::multi_level_roi_align(cuda, rois.to(dtype).cuda(), {7, 7}, kScales, 2, mode);
      out_cuda.backward(grad.to(dtype).cuda());
      const double tol = cuda_tolerance(dtype, 1e-4);
      EXPECT_TRUE(at::allclose(out_cuda.cpu().to(at::kFloat), out_cpu, tol, tol)) << mode << " " << dtype;
      if (std::string(mode) == "avg" || dtype == at::kFloat || dtype == at::kDouble) {
        for (size_t l = 0; l < cpu.size(); ++l) {
          EXPECT_TRUE(at::allclose(cuda[l].grad().cpu().to(at::kFloat), cpu[l].grad(), tol, tol))
              << mode << " " << dtype << " level " << l;
        }
      }
    }
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry roi_align_api{
    "mmops::roi_align", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::roi_align(a[0].toTensor(), a[1].toTensor(), a[2].toIntVector(),
                                                     a[3].toDouble(), a[4].toInt(), a[5].toStringRef(), a[6].toBool())};
    }};
const mmops_test::CppApiEntry multi_level_roi_align_api{
    "mmops::multi_level_roi_align", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::multi_level_roi_align(
          a[0].toTensorVector(), a[1].toTensor(), a[2].toIntVector(), a[3].toDoubleVector(), a[4].toInt(),
          a[5].toStringRef(), a[6].toBool(), a[7].toInt())};
    }};

} // namespace

namespace {

// Issue 11: sizes are bounded and never narrowed; a non-finite roi pools zeros aligned or not.
TEST(RoIAlign, SizesAreBoundedNotNarrowed) {
  const at::Tensor input = at::randn({1, 2, 6, 6});
  const at::Tensor rois = at::tensor({0.f, 0.5f, 0.5f, 4.5f, 4.5f}).reshape({1, 5});
  const int64_t wraps_to_one = (int64_t(1) << 32) + 1;
  EXPECT_ERROR_MENTIONS(mmops::roi_align(input, rois, {2, 2}, 1.0, wraps_to_one), "sampling_ratio must be at most 512");
  EXPECT_ERROR_MENTIONS(mmops::roi_align(input, rois, {2, 2}, 1.0, 10000), "sampling_ratio must be at most 512");
  EXPECT_ERROR_MENTIONS(mmops::roi_align(input, rois, {wraps_to_one, 2}), "output_size values must be at most 4096");
  const at::Tensor at_bound = mmops::roi_align(input, rois, {1, 1}, 1.0, 512);
  EXPECT_TRUE(at::isfinite(at_bound).all().item<bool>());
}

TEST(RoIAlign, NonFiniteCornerPoolsZerosUnaligned) {
  const at::Tensor input = at::randn({1, 2, 6, 6}, at::kDouble).requires_grad_();
  const double nan = std::nan("");
  const double inf = INFINITY;
  const at::Tensor rois =
      at::tensor({0., 1., 1., nan, 4., 0., 1., 1., 4., -inf, 0., 1., 1., -inf, 4.}, at::kDouble).reshape({3, 5});
  for (const char* mode : {"avg", "max"}) {
    const at::Tensor out = mmops::roi_align(input, rois, {2, 2}, 1.0, 2, mode, /*aligned=*/false);
    EXPECT_TRUE(at::equal(out, at::zeros_like(out))) << mode;
    const at::Tensor g = torch::autograd::grad({out.sum()}, {input}, {}, false, false, true)[0];
    EXPECT_TRUE(!g.defined() || at::equal(g, at::zeros_like(input))) << mode;
  }
}

} // namespace

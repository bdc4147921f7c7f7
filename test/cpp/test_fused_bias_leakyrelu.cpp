// C++ face of mmops::fused_bias_leakyrelu: the public API against a loop
// reference, known vectors, autograd from C++ (first and second order, input
// and bias), finite differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "test_support.h"

namespace {

// The definition in double loops over [N, C, inner].
at::Tensor reference(const at::Tensor& x, const at::Tensor& bias, double slope, double scale) {
  const at::Tensor flat = x.reshape({x.size(0), x.size(1), -1});
  at::Tensor out = at::empty_like(flat);
  auto in = flat.accessor<double, 3>();
  auto b = bias.accessor<double, 1>();
  auto o = out.accessor<double, 3>();
  for (int64_t n = 0; n < flat.size(0); ++n)
    for (int64_t c = 0; c < flat.size(1); ++c)
      for (int64_t i = 0; i < flat.size(2); ++i) {
        const double v = in[n][c][i] + b[c];
        o[n][c][i] = (v > 0 ? v : v * slope) * scale;
      }
  return out.view(x.sizes());
}

TEST(FusedBiasLeakyReLU, MatchesLoopReference) {
  at::manual_seed(0);
  for (const auto& shape : std::vector<std::vector<int64_t>>{{2, 3, 4, 5}, {4, 6}, {1, 2, 3, 4, 5}}) {
    const at::Tensor x = at::randn(shape, at::kDouble);
    const at::Tensor b = at::randn({shape[1]}, at::kDouble);
    EXPECT_TRUE(at::equal(mmops::fused_bias_leakyrelu(x, b, 0.1, 1.5), reference(x, b, 0.1, 1.5)));
    EXPECT_TRUE(at::allclose(mmops::fused_bias_leakyrelu(x, b), reference(x, b, 0.2, std::sqrt(2.0)), 0, 0));
  }
}

TEST(FusedBiasLeakyReLU, KnownVectorsAndGradients) {
  const at::Tensor x = at::tensor({-2.0, -0.5, 0.0, 0.5, 2.0}, at::kDouble).view({1, 1, 5}).requires_grad_(true);
  const at::Tensor b = at::tensor({0.5}, at::kDouble).requires_grad_(true);
  const at::Tensor out = mmops::fused_bias_leakyrelu(x, b, 0.25, 2.0);
  // x + b = [-1.5, 0, 0.5, 1, 2.5]
  EXPECT_TRUE(at::equal(out.detach(), at::tensor({-0.75, 0.0, 1.0, 2.0, 5.0}, at::kDouble).view({1, 1, 5})));
  out.sum().backward();
  EXPECT_TRUE(at::equal(x.grad(), at::tensor({0.5, 0.5, 2.0, 2.0, 2.0}, at::kDouble).view({1, 1, 5})));
  EXPECT_TRUE(at::equal(b.grad(), at::tensor({7.0}, at::kDouble)));
}

TEST(FusedBiasLeakyReLU, FiniteDifferencesAndSecondOrder) {
  at::manual_seed(1);
  const at::Tensor x0 = at::randn({2, 3, 4}, at::kDouble);
  const at::Tensor b = at::randn({3}, at::kDouble);
  const at::Tensor weights = at::randn({2, 3, 4}, at::kDouble);
  mmops_test::expect_finite_differences(
      [&](const at::Tensor& x) { return (mmops::fused_bias_leakyrelu(x, b) * weights).sum(); }, x0);
  // second order: d/dw of |d sum(out^2) / dx|^2 for out = f(x * w), against autograd on the composite
  const at::Tensor w = at::randn({2, 3, 4}, at::kDouble);
  const auto penalty_grad = [&](bool ours) {
    const at::Tensor wg = w.clone().requires_grad_(true);
    const at::Tensor xg = x0.clone().requires_grad_(true);
    const at::Tensor in = xg * wg;
    const at::Tensor out =
        ours ? mmops::fused_bias_leakyrelu(in, b) : at::leaky_relu(in + b.view({1, 3, 1}), 0.2) * std::sqrt(2.0);
    const at::Tensor g = torch::autograd::grad({out.pow(2).sum()}, {xg}, {}, true, true)[0];
    return torch::autograd::grad({g.pow(2).sum()}, {wg})[0];
  };
  EXPECT_TRUE(at::allclose(penalty_grad(true), penalty_grad(false), 1e-12, 1e-12));
}

TEST(FusedBiasLeakyReLU, EmptyInputs) {
  const at::Tensor x = at::randn({0, 3, 4}).requires_grad_(true);
  const at::Tensor b = at::zeros({3}).requires_grad_(true);
  const at::Tensor out = mmops::fused_bias_leakyrelu(x, b);
  EXPECT_EQ(out.sizes(), x.sizes());
  out.sum().backward();
  EXPECT_EQ(x.grad().sizes(), x.sizes());
  EXPECT_TRUE(at::equal(b.grad(), at::zeros({3})));
}

TEST(FusedBiasLeakyReLU, ErrorsNameTheArgument) {
  const at::Tensor x = at::randn({2, 3, 4});
  const at::Tensor b = at::zeros({3});
  EXPECT_ERROR_MENTIONS(mmops::fused_bias_leakyrelu(x[0][0], b), "expected input to be a tensor [N, C, *]");
  EXPECT_ERROR_MENTIONS(mmops::fused_bias_leakyrelu(x, b.view({1, 3})), "expected bias to be a 1-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::fused_bias_leakyrelu(x, at::zeros({4})), "expected bias to hold C = 3");
  EXPECT_ERROR_MENTIONS(mmops::fused_bias_leakyrelu(x, b.to(at::kDouble)), "expected bias to have the dtype");
  EXPECT_ERROR_MENTIONS(mmops::fused_bias_leakyrelu(x, b, NAN), "expected a finite negative_slope");
  EXPECT_ERROR_MENTIONS(mmops::fused_bias_leakyrelu(x.to(at::kInt), b.to(at::kInt)), "floating point dtype");
}

TEST(FusedBiasLeakyReLU, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(2);
  for (const auto& shape : std::vector<std::vector<int64_t>>{{2, 5, 8, 8}, {3, 7, 5}, {4, 16}}) {
    const at::Tensor x0 = at::randn(shape);
    const at::Tensor b0 = at::randn({shape[1]});
    for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
      const at::Tensor xc = x0.to(dtype).cuda().detach().requires_grad_(true);
      const at::Tensor xh = x0.to(dtype).detach().requires_grad_(true);
      const at::Tensor oc = mmops::fused_bias_leakyrelu(xc, b0.to(dtype).cuda());
      const at::Tensor oh = mmops::fused_bias_leakyrelu(xh, b0.to(dtype));
      const double tol = dtype == at::kDouble ? 1e-12 : (dtype == at::kFloat ? 1e-6 : 1e-2);
      EXPECT_TRUE(oc.cpu().to(at::kDouble).allclose(oh.to(at::kDouble), tol, tol)) << dtype;
      oc.sum().backward();
      oh.sum().backward();
      EXPECT_TRUE(xc.grad().cpu().to(at::kDouble).allclose(xh.grad().to(at::kDouble), tol, tol)) << dtype;
    }
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry fused_bias_leakyrelu_api{
    "mmops::fused_bias_leakyrelu", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{
          mmops::fused_bias_leakyrelu(a[0].toTensor(), a[1].toTensor(), a[2].toDouble(), a[3].toDouble())};
    }};

} // namespace

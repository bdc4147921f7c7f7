// C++ face of mmops::bias_act: the public API against a loop reference for
// every act, autograd from C++ (first and second order, input and bias),
// finite differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "test_support.h"

namespace {

const std::vector<std::string> kActs = {"linear", "relu", "lrelu",    "tanh", "sigmoid",
                                        "elu",    "selu", "softplus", "swish"};

double act_value(const std::string& act, double v) {
  const double s = 1.0507009873554804934193349852946, a = 1.6732632423543772848170429916717;
  const double sig = 1 / (1 + std::exp(-v));
  if (act == "linear")
    return v;
  if (act == "relu")
    return v > 0 ? v : 0;
  if (act == "lrelu")
    return v > 0 ? v : 0.2 * v;
  if (act == "tanh")
    return std::tanh(v);
  if (act == "sigmoid")
    return sig;
  if (act == "elu")
    return v >= 0 ? v : std::expm1(v);
  if (act == "selu")
    return v >= 0 ? s * v : s * a * std::expm1(v);
  if (act == "softplus")
    return std::log1p(std::exp(v));
  return v * sig; // swish
}

double default_gain(const std::string& act) {
  return act == "relu" || act == "lrelu" || act == "swish" ? std::sqrt(2.0) : 1.0;
}

// The definition in double loops over [N, C, inner] (bias along dim 1), then the clamp.
at::Tensor reference(const at::Tensor& x, const at::Tensor& bias, const std::string& act, double clamp) {
  const at::Tensor flat = x.reshape({x.size(0), x.size(1), -1});
  at::Tensor out = at::empty_like(flat);
  auto in = flat.accessor<double, 3>();
  auto b = bias.accessor<double, 1>();
  auto o = out.accessor<double, 3>();
  for (int64_t n = 0; n < flat.size(0); ++n)
    for (int64_t c = 0; c < flat.size(1); ++c)
      for (int64_t i = 0; i < flat.size(2); ++i) {
        const double y = act_value(act, in[n][c][i] + b[c]) * default_gain(act);
        o[n][c][i] = clamp < 0 ? y : std::min(std::max(y, -clamp), clamp);
      }
  return out.view(x.sizes());
}

TEST(BiasAct, MatchesLoopReference) {
  at::manual_seed(0);
  for (const auto& act : kActs) {
    for (const auto& shape : std::vector<std::vector<int64_t>>{{2, 3, 4, 5}, {4, 6}}) {
      const at::Tensor x = at::randn(shape, at::kDouble) * 2;
      const at::Tensor b = at::randn({shape[1]}, at::kDouble);
      EXPECT_TRUE(at::allclose(mmops::bias_act(x, b, 1, act), reference(x, b, act, -1), 1e-13, 1e-14)) << act;
      EXPECT_TRUE(at::allclose(mmops::bias_act(x, b, 1, act, std::nullopt, std::nullopt, 0.5),
                               reference(x, b, act, 0.5), 1e-13, 1e-14))
          << act;
    }
  }
}

TEST(BiasAct, KnownVectorsAndGradients) {
  const at::Tensor x = at::tensor({-2.0, -0.5, 0.5, 2.0}, at::kDouble).view({1, 1, 4}).requires_grad_(true);
  const at::Tensor b = at::tensor({0.5}, at::kDouble).requires_grad_(true);
  // x + b = [-1.5, 0, 1, 2.5]; lrelu alpha 0.25, gain 2, clamp 4
  const at::Tensor out = mmops::bias_act(x, b, 1, "lrelu", 0.25, 2.0, 4.0);
  EXPECT_TRUE(at::equal(out.detach(), at::tensor({-0.75, 0.0, 2.0, 4.0}, at::kDouble).view({1, 1, 4})));
  out.sum().backward();
  // 0.5 where the output is <= 0, 2 where positive, 0 where clamped
  EXPECT_TRUE(at::equal(x.grad(), at::tensor({0.5, 0.5, 2.0, 0.0}, at::kDouble).view({1, 1, 4})));
  EXPECT_TRUE(at::equal(b.grad(), at::tensor({3.0}, at::kDouble)));
}

TEST(BiasAct, FiniteDifferencesAndSecondOrder) {
  at::manual_seed(1);
  const at::Tensor x0 = at::randn({2, 3, 4}, at::kDouble);
  const at::Tensor b = at::randn({3}, at::kDouble);
  const at::Tensor weights = at::randn({2, 3, 4}, at::kDouble);
  for (const auto& act : {"tanh", "swish", "softplus"}) {
    mmops_test::expect_finite_differences(
        [&](const at::Tensor& x) { return (mmops::bias_act(x, b, 1, act) * weights).sum(); }, x0);
  }
  // second order: d/dw of |d sum(out^2) / dx|^2 for out = f(x * w), against autograd on the composite
  const at::Tensor w = at::randn({2, 3, 4}, at::kDouble);
  const auto penalty_grad = [&](bool ours) {
    const at::Tensor wg = w.clone().requires_grad_(true);
    const at::Tensor xg = x0.clone().requires_grad_(true);
    const at::Tensor in = xg * wg;
    const at::Tensor out =
        ours ? mmops::bias_act(in, b, 1, "sigmoid", std::nullopt, 3.0) : at::sigmoid(in + b.view({1, 3, 1})) * 3.0;
    const at::Tensor g = torch::autograd::grad({out.pow(2).sum()}, {xg}, {}, true, true)[0];
    return torch::autograd::grad({g.pow(2).sum()}, {wg})[0];
  };
  EXPECT_TRUE(at::allclose(penalty_grad(true), penalty_grad(false), 1e-12, 1e-12));
}

TEST(BiasAct, EmptyInputs) {
  const at::Tensor x = at::randn({0, 3, 4}).requires_grad_(true);
  const at::Tensor b = at::zeros({3}).requires_grad_(true);
  const at::Tensor out = mmops::bias_act(x, b, 1, "swish");
  EXPECT_EQ(out.sizes(), x.sizes());
  out.sum().backward();
  EXPECT_EQ(x.grad().sizes(), x.sizes());
  EXPECT_TRUE(at::equal(b.grad(), at::zeros({3})));
}

TEST(BiasAct, ErrorsNameTheArgument) {
  const at::Tensor x = at::randn({2, 3, 4});
  const at::Tensor b = at::zeros({3});
  EXPECT_ERROR_MENTIONS(mmops::bias_act(x, b, 1, "gelu"), "act must be \"linear\", \"relu\"");
  EXPECT_ERROR_MENTIONS(mmops::bias_act(x, b.view({1, 3})), "expected bias to be a 1-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::bias_act(x, at::zeros({4})), "expected bias to hold 3 values");
  EXPECT_ERROR_MENTIONS(mmops::bias_act(x, b, 3), "expected dim in [-3, 3)");
  EXPECT_ERROR_MENTIONS(mmops::bias_act(x, b.to(at::kDouble)), "expected bias to have the dtype");
  EXPECT_ERROR_MENTIONS(mmops::bias_act(x, b, 1, "lrelu", NAN), "expected a finite alpha");
  EXPECT_ERROR_MENTIONS(mmops::bias_act(x, b, 1, "lrelu", std::nullopt, std::nullopt, -1.0), "clamp >= 0");
  EXPECT_ERROR_MENTIONS(mmops::bias_act(x.to(at::kInt), b.to(at::kInt)), "floating point dtype");
}

TEST(BiasAct, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(2);
  for (const auto& act : kActs) {
    for (const auto& shape : std::vector<std::vector<int64_t>>{{2, 5, 8, 8}, {3, 7, 5}, {4, 16}}) {
      const at::Tensor x0 = at::randn(shape);
      const at::Tensor b0 = at::randn({shape[1]});
      for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
        const at::Tensor xc = x0.to(dtype).cuda().detach().requires_grad_(true);
        const at::Tensor xh = x0.to(dtype).detach().requires_grad_(true);
        const at::Tensor oc = mmops::bias_act(xc, b0.to(dtype).cuda(), 1, act);
        const at::Tensor oh = mmops::bias_act(xh, b0.to(dtype), 1, act);
        const double tol = dtype == at::kDouble ? 1e-12 : (dtype == at::kFloat ? 1e-5 : 2e-2);
        EXPECT_TRUE(oc.cpu().to(at::kDouble).allclose(oh.to(at::kDouble), tol, tol)) << act << " " << dtype;
        oc.sum().backward();
        oh.sum().backward();
        EXPECT_TRUE(xc.grad().cpu().to(at::kDouble).allclose(xh.grad().to(at::kDouble), tol, tol))
            << act << " " << dtype;
      }
    }
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry bias_act_api{
    "mmops::bias_act", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::bias_act(a[0].toTensor(), a[1].toOptional<at::Tensor>(), a[2].toInt(),
                                                    a[3].toStringRef(), a[4].toOptional<double>(),
                                                    a[5].toOptional<double>(), a[6].toOptional<double>())};
    }};

} // namespace

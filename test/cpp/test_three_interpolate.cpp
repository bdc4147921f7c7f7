// C++ face of mmops::three_interpolate: values against a gather reference, a
// finite-difference gradient check (features and weight), errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

namespace {

struct Inputs {
  at::Tensor features, indices, weight;
};

Inputs random_inputs(int64_t b, int64_t c, int64_t m, int64_t n, at::ScalarType dtype = at::kDouble) {
  return {at::randn({b, c, m}, dtype), at::randint(0, m, {b, n, 3}, at::kInt), at::rand({b, n, 3}, dtype)};
}

at::Tensor reference(const Inputs& in) {
  const int64_t b = in.features.size(0), c = in.features.size(1), n = in.indices.size(1);
  const at::Tensor idx = in.indices.to(at::kLong).reshape({b, 1, n * 3}).expand({b, c, n * 3});
  return (in.features.gather(2, idx).reshape({b, c, n, 3}) * in.weight.unsqueeze(1)).sum(-1);
}

TEST(ThreeInterpolate, MatchesGatherReference) {
  at::manual_seed(1);
  const Inputs in = random_inputs(2, 5, 8, 13);
  EXPECT_TRUE(at::allclose(mmops::three_interpolate(in.features, in.indices, in.weight), reference(in), 0, 1e-12));
}

TEST(ThreeInterpolate, FiniteDifferenceGradients) {
  at::manual_seed(2);
  Inputs in = random_inputs(1, 3, 4, 5);
  const at::Tensor cot = at::randn({1, 3, 5}, at::kDouble);
  const auto loss = [&](const at::Tensor& f, const at::Tensor& w) {
    return (mmops::three_interpolate(f, in.indices, w) * cot).sum().item<double>();
  };
  const at::Tensor f = in.features.clone().requires_grad_(true);
  const at::Tensor w = in.weight.clone().requires_grad_(true);
  (mmops::three_interpolate(f, in.indices, w) * cot).sum().backward();
  const double eps = 1e-6;
  for (const auto& [leaf, grad, is_features] :
       {std::tuple{in.features, f.grad(), true}, std::tuple{in.weight, w.grad(), false}}) {
    for (int64_t k = 0; k < leaf.numel(); ++k) {
      at::Tensor plus = leaf.clone(), minus = leaf.clone();
      plus.view(-1)[k] += eps;
      minus.view(-1)[k] -= eps;
      const double numeric = is_features ? (loss(plus, in.weight) - loss(minus, in.weight)) / (2 * eps)
                                         : (loss(in.features, plus) - loss(in.features, minus)) / (2 * eps);
      EXPECT_NEAR(grad.view(-1)[k].item<double>(), numeric, 1e-6) << (is_features ? "features " : "weight ") << k;
    }
  }
}

TEST(ThreeInterpolate, EmptyAndErrors) {
  const Inputs in = random_inputs(2, 0, 4, 3);
  EXPECT_EQ(mmops::three_interpolate(in.features, in.indices, in.weight).sizes(), (std::vector<int64_t>{2, 0, 3}));
  const Inputs ok = random_inputs(1, 2, 4, 3);
  EXPECT_ERROR_MENTIONS(mmops::three_interpolate(ok.features, ok.indices.to(at::kLong), ok.weight),
                        "expected indices to be int32, but got Long");
  EXPECT_ERROR_MENTIONS(mmops::three_interpolate(ok.features, ok.indices + 4, ok.weight),
                        "indices must lie in [0, M) with M = features.size(2) = 4");
}

TEST(ThreeInterpolate, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(3);
  const Inputs in = random_inputs(2, 16, 100, 400, at::kFloat);
  EXPECT_TRUE(at::equal(mmops::three_interpolate(in.features.cuda(), in.indices.cuda(), in.weight.cuda()).cpu(),
                        mmops::three_interpolate(in.features, in.indices, in.weight)));
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry three_interpolate_api{
    "mmops::three_interpolate", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::three_interpolate(a[0].toTensor(), a[1].toTensor(), a[2].toTensor())};
    }};

} // namespace

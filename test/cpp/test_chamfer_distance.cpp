// C++ face of mmops::chamfer_distance: the public API against a brute-force
// reference, autograd from C++, finite differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

namespace {

// The nearest point of xyz2[b] to every point of xyz1[b] (first minimum).
std::pair<at::Tensor, at::Tensor> nearest(const at::Tensor& xyz1, const at::Tensor& xyz2) {
  const at::Tensor d = (xyz1.unsqueeze(2) - xyz2.unsqueeze(1)).pow(2).sum(-1);
  auto [dist, idx] = d.min(2);
  return {dist, idx.to(at::kInt)};
}

TEST(ChamferDistance, MatchesBruteForce) {
  at::manual_seed(0);
  const at::Tensor a = at::rand({2, 30, 2}, at::kDouble), b = at::rand({2, 17, 2}, at::kDouble);
  const auto [d1, d2, i1, i2] = mmops::chamfer_distance(a, b);
  const auto [e1, j1] = nearest(a, b);
  const auto [e2, j2] = nearest(b, a);
  EXPECT_TRUE(at::allclose(d1, e1, 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(d2, e2, 1e-12, 1e-12));
  EXPECT_TRUE(at::equal(i1, j1));
  EXPECT_TRUE(at::equal(i2, j2));
  EXPECT_EQ(i1.scalar_type(), at::kInt);
}

TEST(ChamferDistance, FiniteDifferences) {
  at::manual_seed(1);
  const at::Tensor a0 = at::rand({2, 6, 2}, at::kDouble), b0 = at::rand({2, 5, 2}, at::kDouble);
  const at::Tensor w1 = at::randn({2, 6}, at::kDouble), w2 = at::randn({2, 5}, at::kDouble);
  auto loss = [&](const at::Tensor& a, const at::Tensor& b) {
    const auto out = mmops::chamfer_distance(a, b);
    return (std::get<0>(out) * w1).sum() + (std::get<1>(out) * w2).sum();
  };
  const at::Tensor a = a0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
  loss(a, b).backward();
  const double eps = 1e-6;
  torch::NoGradGuard no_grad;
  for (int which = 0; which < 2; ++which) {
    const at::Tensor& base = which == 0 ? a0 : b0;
    const at::Tensor grad = which == 0 ? a.grad() : b.grad();
    for (int64_t i = 0; i < base.numel(); ++i) {
      at::Tensor plus = base.clone(), minus = base.clone();
      plus.view(-1)[i] += eps;
      minus.view(-1)[i] -= eps;
      const double numeric = which == 0 ? (loss(plus, b0).item<double>() - loss(minus, b0).item<double>()) / (2 * eps)
                                        : (loss(a0, plus).item<double>() - loss(a0, minus).item<double>()) / (2 * eps);
      EXPECT_NEAR(grad.view(-1)[i].item<double>(), numeric, 1e-6) << "set " << which << " element " << i;
    }
  }
}

TEST(ChamferDistance, EmptyInputs) {
  const at::Tensor a = at::randn({0, 3, 2}).requires_grad_(true), b = at::randn({0, 4, 2});
  const auto out = mmops::chamfer_distance(a, b);
  EXPECT_EQ(std::get<0>(out).sizes(), at::IntArrayRef({0, 3}));
  EXPECT_EQ(std::get<3>(out).sizes(), at::IntArrayRef({0, 4}));
  std::get<0>(out).sum().backward();
  EXPECT_EQ(a.grad().sizes(), a.sizes());
}

TEST(ChamferDistance, ErrorsNameTheArgument) {
  const at::Tensor a = at::randn({2, 5, 2}), b = at::randn({2, 4, 2});
  EXPECT_ERROR_MENTIONS(mmops::chamfer_distance(a[0], b), "expected xyz1 to be a 3-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::chamfer_distance(a, at::randn({2, 4, 3})), "expected xyz2 to hold 2-D points");
  EXPECT_ERROR_MENTIONS(mmops::chamfer_distance(a, b.to(at::kDouble)), "expected xyz2 to have the dtype of xyz1");
  EXPECT_ERROR_MENTIONS(mmops::chamfer_distance(a, b.narrow(0, 0, 1)), "batch size of xyz1");
  EXPECT_ERROR_MENTIONS(mmops::chamfer_distance(a, b.narrow(1, 0, 0)), "both empty or both non-empty");
}

TEST(ChamferDistance, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(2);
  const at::Tensor a0 = at::rand({3, 700, 2}) * 20, b0 = at::rand({3, 600, 2}) * 20;
  for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    // detach: to() returns a0 itself for float, which must stay a leaf without grad
    const at::Tensor ah = a0.to(dtype).detach().requires_grad_(true),
                     ac = a0.to(dtype).cuda().detach().requires_grad_(true);
    const auto oh = mmops::chamfer_distance(ah, b0.to(dtype)), oc = mmops::chamfer_distance(ac, b0.to(dtype).cuda());
    EXPECT_TRUE(at::equal(std::get<0>(oc).cpu(), std::get<0>(oh))) << dtype;
    EXPECT_TRUE(at::equal(std::get<2>(oc).cpu(), std::get<2>(oh))) << dtype;
    EXPECT_TRUE(at::equal(std::get<3>(oc).cpu(), std::get<3>(oh))) << dtype;
    (std::get<0>(oh).sum() + std::get<1>(oh).sum()).backward();
    (std::get<0>(oc).sum() + std::get<1>(oc).sum()).backward();
    const double tol = dtype == at::kFloat || dtype == at::kDouble ? 1e-5 : 5e-2;
    EXPECT_TRUE(at::allclose(ac.grad().cpu().to(at::kDouble), ah.grad().to(at::kDouble), tol, tol)) << dtype;
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry chamfer_distance_api{"mmops::chamfer_distance", [](const mmops_test::ApiArgs& a) {
                                                     const auto [d1, d2, i1, i2] =
                                                         mmops::chamfer_distance(a[0].toTensor(), a[1].toTensor());
                                                     return mmops_test::ApiOutputs{d1, d2, i1, i2};
                                                   }};

} // namespace

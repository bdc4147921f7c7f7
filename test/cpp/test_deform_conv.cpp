// C++ face of mmops::deform_conv2d / mmops::modulated_deform_conv2d: the public
// API (include/mmops/deform_conv.h), autograd from C++, finite differences,
// errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

#include <cmath>
#include <string>
#include <vector>

namespace {

at::Tensor values(std::vector<double> v, at::IntArrayRef shape) {
  return at::tensor(v, at::kDouble).reshape(shape);
}

// 1x1x2x2 input [[1, 2], [3, 4]], one 1x1 tap of weight 2, bias 0.5; per output
// pixel an offset (dy, dx):
//   (0,0) + (0.5, 0.5)  -> (0.5, 0.5): mean of the four pixels 2.5
//   (0,1) + (0, -1)     -> (0, 0): 1
//   (1,0) + (-1.5, 0)   -> (-0.5, 0): half of row 0 (row -1 is zero): 0.5
//   (1,1) + (1, 0)      -> (2, 1): outside the map: 0
struct Known {
  at::Tensor input = values({1, 2, 3, 4}, {1, 1, 2, 2}).requires_grad_(true);
  at::Tensor offset = values({0.5, 0, -1.5, 1, 0.5, -1, 0, 0}, {1, 2, 2, 2}).requires_grad_(true);
  at::Tensor mask = values({0.5, 1, 2, 3}, {1, 1, 2, 2}).requires_grad_(true);
  at::Tensor weight = values({2}, {1, 1, 1, 1}).requires_grad_(true);
  at::Tensor bias = values({0.5}, {1}).requires_grad_(true);
};

void expect_equal(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  EXPECT_TRUE(at::allclose(actual, expected, 0, 1e-12)) << what << "\nactual\n" << actual << "\nexpected\n" << expected;
}

TEST(DeformConv2d, KnownVectorByHand) {
  Known k;
  const at::Tensor out = mmops::deform_conv2d(k.input, k.offset, k.weight, k.bias);
  expect_equal(out, values({5.5, 2.5, 1.5, 0.5}, {1, 1, 2, 2}), "output"); // 2 * value + 0.5
  out.sum().backward();
  expect_equal(k.input.grad(), values({3.5, 0.5, 0.5, 0.5}, {1, 1, 2, 2}), "grad input");
  // d value / d(dy, dx) (floor convention at integer coordinates), times 2
  expect_equal(k.offset.grad(), values({4, 4, 2, 0, 2, 2, 1, 0}, {1, 2, 2, 2}), "grad offset");
  expect_equal(k.weight.grad(), values({4}, {1, 1, 1, 1}), "grad weight");
  expect_equal(k.bias.grad(), values({4}, {1}), "grad bias");
}

TEST(ModulatedDeformConv2d, KnownVectorByHand) {
  Known k;
  const at::Tensor out = mmops::modulated_deform_conv2d(k.input, k.offset, k.mask, k.weight, k.bias);
  expect_equal(out, values({3.0, 2.5, 2.5, 0.5}, {1, 1, 2, 2}), "output"); // 2 * mask * value + 0.5
  out.sum().backward();
  expect_equal(k.input.grad(), values({4.25, 0.25, 0.25, 0.25}, {1, 1, 2, 2}), "grad input");
  expect_equal(k.offset.grad(), values({2, 4, 4, 0, 1, 2, 2, 0}, {1, 2, 2, 2}), "grad offset");
  expect_equal(k.mask.grad(), values({5, 2, 1, 0}, {1, 1, 2, 2}), "grad mask");
  expect_equal(k.weight.grad(), values({3.25}, {1, 1, 1, 1}), "grad weight");
}

TEST(ModulatedDeformConv2d, ZeroOffsetsAndUnitMaskEqualConvolution) {
  at::manual_seed(0);
  const at::Tensor x = at::randn({2, 6, 9, 9}, at::kDouble);
  const at::Tensor w = at::randn({4, 3, 3, 3}, at::kDouble);
  const at::Tensor b = at::randn({4}, at::kDouble);
  const at::Tensor offset = at::zeros({2, 2 * 3 * 9, 4, 4}, at::kDouble);
  const at::Tensor mask = at::ones({2, 3 * 9, 4, 4}, at::kDouble);
  const at::Tensor out = mmops::modulated_deform_conv2d(x, offset, mask, w, b, {2, 2}, {1, 1}, {2, 2}, 2, 3);
  const at::Tensor expected = at::conv2d(x, w, b, {2, 2}, {1, 1}, {2, 2}, 2);
  EXPECT_TRUE(at::allclose(out, expected, 1e-12, 1e-12)) << (out - expected).abs().max();
}

TEST(ModulatedDeformConv2d, FiniteDifferences) {
  at::manual_seed(1);
  // Offsets with fractions in [0.2, 0.8]: samples stay away from integer
  // coordinates, where bilinear interpolation is not differentiable.
  const at::Tensor x0 = at::randn({1, 4, 5, 6}, at::kDouble);
  const at::Tensor off0 =
      at::randint(-2, 2, {1, 2 * 2 * 9, 5, 6}, at::kDouble) + 0.2 + 0.6 * at::rand({1, 2 * 2 * 9, 5, 6}, at::kDouble);
  const at::Tensor mask0 = at::rand({1, 2 * 9, 5, 6}, at::kDouble);
  const at::Tensor w0 = at::randn({4, 2, 3, 3}, at::kDouble);
  const at::Tensor b0 = at::randn({4}, at::kDouble);
  const at::Tensor cotangent = at::randn({1, 4, 5, 6}, at::kDouble);
  auto loss = [&](const std::vector<at::Tensor>& t) {
    return (mmops::modulated_deform_conv2d(t[0], t[1], t[2], t[3], t[4], {1, 1}, {1, 1}, {1, 1}, 2, 2) * cotangent)
        .sum();
  };
  std::vector<at::Tensor> leaves;
  for (const at::Tensor& t : {x0, off0, mask0, w0, b0}) {
    leaves.push_back(t.clone().requires_grad_(true));
  }
  loss(leaves).backward();
  const char* names[] = {"input", "offset", "mask", "weight", "bias"};
  const double eps = 1e-6;
  torch::NoGradGuard no_grad;
  for (size_t which = 0; which < leaves.size(); ++which) {
    const at::Tensor analytic = leaves[which].grad();
    ASSERT_TRUE(analytic.defined()) << names[which];
    const int64_t numel = analytic.numel();
    for (int64_t i = 0; i < numel; i += std::max<int64_t>(1, numel / 16)) {
      std::vector<at::Tensor> plus, minus;
      for (const at::Tensor& t : leaves) {
        plus.push_back(t.detach().clone());
        minus.push_back(t.detach().clone());
      }
      plus[which].view(-1)[i] += eps;
      minus[which].view(-1)[i] -= eps;
      const double numeric = (loss(plus).item<double>() - loss(minus).item<double>()) / (2 * eps);
      EXPECT_NEAR(analytic.view(-1)[i].item<double>(), numeric, 1e-6 * std::max(1.0, std::abs(numeric)))
          << names[which] << " element " << i;
    }
  }
}

TEST(DeformConv2d, EmptyBatch) {
  const at::Tensor x = at::randn({0, 4, 6, 6}, at::kDouble).requires_grad_(true);
  const at::Tensor offset = at::randn({0, 18, 6, 6}, at::kDouble).requires_grad_(true);
  const at::Tensor w = at::randn({3, 4, 3, 3}, at::kDouble).requires_grad_(true);
  const at::Tensor out = mmops::deform_conv2d(x, offset, w, std::nullopt, {1, 1}, {1, 1});
  EXPECT_EQ(out.sizes(), (at::IntArrayRef{0, 3, 6, 6}));
  out.sum().backward();
  EXPECT_TRUE(at::equal(w.grad(), at::zeros_like(w)));
  EXPECT_EQ(x.grad().sizes(), x.sizes());
}

TEST(DeformConv2d, ErrorsNameTheArgument) {
  const at::Tensor x = at::randn({2, 4, 6, 6});
  const at::Tensor offset = at::randn({2, 18, 6, 6});
  const at::Tensor mask = at::rand({2, 9, 6, 6});
  const at::Tensor w = at::randn({6, 4, 3, 3});
  EXPECT_ERROR_MENTIONS(mmops::deform_conv2d(x[0], offset, w, std::nullopt, {1, 1}, {1, 1}),
                        "mmops::deform_conv2d: expected input to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::deform_conv2d(x, offset.slice(1, 0, 16), w, std::nullopt, {1, 1}, {1, 1}),
                        "expected offset of shape [2, 18, 6, 6]");
  EXPECT_ERROR_MENTIONS(mmops::deform_conv2d(x, offset, w, std::nullopt, {1, 1}, {0, 0}),
                        "expected offset of shape [2, 18, 4, 4]");
  EXPECT_ERROR_MENTIONS(mmops::modulated_deform_conv2d(x, offset, mask.slice(1, 0, 8), w, std::nullopt, {1, 1}, {1, 1}),
                        "mmops::modulated_deform_conv2d: expected mask of shape [2, 9, 6, 6]");
  EXPECT_ERROR_MENTIONS(mmops::deform_conv2d(x, offset.to(at::kDouble), w, std::nullopt, {1, 1}, {1, 1}),
                        "expected offset to have the dtype of input (Float), but got Double");
  EXPECT_ERROR_MENTIONS(mmops::deform_conv2d(x, offset, w, std::nullopt, {1, 1}, {1, 1}, {1, 1}, 3),
                        "to be divisible by groups (3)");
  EXPECT_ERROR_MENTIONS(mmops::deform_conv2d(x, offset, w, std::nullopt, {0, 1}, {1, 1}),
                        "stride values must be positive");
  EXPECT_ERROR_MENTIONS(mmops::deform_conv2d(x, offset, w, at::zeros({5}), {1, 1}, {1, 1}),
                        "expected bias of shape [6]");
}

TEST(ModulatedDeformConv2d, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(2);
  const at::Tensor x = at::randn({2, 16, 9, 10}, at::kDouble);
  const at::Tensor offset = at::randn({2, 2 * 2 * 9, 9, 10}, at::kDouble) * 2;
  const at::Tensor mask = at::rand({2, 2 * 9, 9, 10}, at::kDouble);
  const at::Tensor w = at::randn({8, 8, 3, 3}, at::kDouble);
  const at::Tensor b = at::randn({8}, at::kDouble);
  std::vector<at::Tensor> cpu, cuda;
  for (const at::Tensor& t : {x, offset, mask, w, b}) {
    cpu.push_back(t.clone().requires_grad_(true));
    cuda.push_back(t.cuda().requires_grad_(true));
  }
  auto run = [](const std::vector<at::Tensor>& t) {
    return mmops::modulated_deform_conv2d(t[0], t[1], t[2], t[3], t[4], {1, 1}, {1, 1}, {1, 1}, 2, 2);
  };
  const at::Tensor out_cpu = run(cpu), out_cuda = run(cuda);
  EXPECT_TRUE(at::allclose(out_cuda.cpu(), out_cpu, 1e-10, 1e-10));
  const at::Tensor go = at::randn(out_cpu.sizes(), at::kDouble);
  out_cpu.backward(go);
  out_cuda.backward(go.cuda());
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_TRUE(at::allclose(cuda[i].grad().cpu(), cpu[i].grad(), 1e-10, 1e-10)) << "gradient " << i;
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry deform_conv2d_api{
    "mmops::deform_conv2d", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{
          mmops::deform_conv2d(a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), mmops_test::optional_tensor(a[3]),
                               a[4].toIntVector(), a[5].toIntVector(), a[6].toIntVector(), a[7].toInt(), a[8].toInt())};
    }};
const mmops_test::CppApiEntry modulated_deform_conv2d_api{
    "mmops::modulated_deform_conv2d", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::modulated_deform_conv2d(
          a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), a[3].toTensor(), mmops_test::optional_tensor(a[4]),
          a[5].toIntVector(), a[6].toIntVector(), a[7].toIntVector(), a[8].toInt(), a[9].toInt())};
    }};

} // namespace

// C++ face of mmops::masked_conv2d: the public API against a reference
// (at::conv2d, zero outside the mask), autograd from C++, finite differences,
// errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

#include <string>

namespace {

// The convolution, zero (no bias) where mask <= 0; mask has the output's size.
at::Tensor reference(const at::Tensor& x, const at::Tensor& mask, const at::Tensor& weight, const at::Tensor& bias,
                     at::IntArrayRef padding, at::IntArrayRef stride) {
  const at::Tensor full = at::conv2d(x, weight, bias, stride, padding);
  return at::where(mask.gt(0).unsqueeze(1), full, at::zeros({}, full.options()));
}

TEST(MaskedConv2d, MatchesReference) {
  at::manual_seed(0);
  const at::Tensor x = at::randn({2, 3, 9, 7}, at::kDouble);
  const at::Tensor weight = at::randn({4, 3, 3, 2}, at::kDouble);
  const at::Tensor bias = at::randn({4}, at::kDouble);
  // stride (1, 1), padding (1, 0): output 9x6; stride (2, 1): 5x6
  for (const std::vector<int64_t>& stride : {std::vector<int64_t>{1, 1}, std::vector<int64_t>{2, 1}}) {
    const int64_t oh = (9 + 2 - 3) / stride[0] + 1;
    const at::Tensor mask = at::rand({2, oh, 6}, at::kDouble) - 0.5;
    const at::Tensor out = mmops::masked_conv2d(x, mask, weight, bias, {1, 0}, stride);
    EXPECT_TRUE(at::allclose(out, reference(x, mask, weight, bias, {1, 0}, stride), 1e-12, 1e-12)) << stride;
  }
}

TEST(MaskedConv2d, KnownVectorAndInputSizedMask) {
  // 3x3 ramp, 3x3 ones kernel, padding 1, bias 0.5: (0, 0) sums 0 + 1 + 3 + 4, (1, 1) sums 0..8.
  const at::Tensor x = at::arange(9, at::kDouble).reshape({1, 1, 3, 3});
  at::Tensor mask = at::zeros({1, 3, 3}, at::kDouble);
  mask[0][0][0] = 1.0;
  mask[0][1][1] = 2.0;
  const at::Tensor out =
      mmops::masked_conv2d(x, mask, at::ones({1, 1, 3, 3}, at::kDouble), at::full({1}, 0.5, at::kDouble), {1, 1});
  at::Tensor expected = at::zeros({1, 1, 3, 3}, at::kDouble);
  expected[0][0][0][0] = 8.5;
  expected[0][0][1][1] = 36.5;
  EXPECT_TRUE(at::equal(out, expected)) << out;
}

TEST(MaskedConv2d, FiniteDifferences) {
  at::manual_seed(1);
  const at::Tensor x0 = at::randn({2, 2, 5, 6}, at::kDouble);
  const at::Tensor w0 = at::randn({3, 2, 3, 3}, at::kDouble);
  const at::Tensor b0 = at::randn({3}, at::kDouble);
  const at::Tensor mask = at::rand({2, 5, 6}, at::kDouble) - 0.4;
  const at::Tensor go = at::randn({2, 3, 5, 6}, at::kDouble);
  auto loss = [&](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    return (mmops::masked_conv2d(x, mask, w, b, {1, 1}) * go).sum();
  };
  std::vector<at::Tensor> leaves{x0.clone().requires_grad_(true), w0.clone().requires_grad_(true),
                                 b0.clone().requires_grad_(true)};
  loss(leaves[0], leaves[1], leaves[2]).backward();
  const double eps = 1e-6;
  torch::NoGradGuard no_grad;
  for (size_t k = 0; k < leaves.size(); ++k) {
    for (int64_t i = 0; i < leaves[k].numel(); i += 5) {
      std::vector<at::Tensor> plus{x0.clone(), w0.clone(), b0.clone()}, minus{x0.clone(), w0.clone(), b0.clone()};
      plus[k].view(-1)[i] += eps;
      minus[k].view(-1)[i] -= eps;
      const double numeric =
          (loss(plus[0], plus[1], plus[2]).item<double>() - loss(minus[0], minus[1], minus[2]).item<double>()) /
          (2 * eps);
      EXPECT_NEAR(leaves[k].grad().view(-1)[i].item<double>(), numeric, 1e-6) << "tensor " << k << " element " << i;
    }
  }
}

TEST(MaskedConv2d, ErrorsNameTheArgument) {
  const at::Tensor x = at::randn({2, 3, 6, 6});
  const at::Tensor mask = at::rand({2, 6, 6});
  const at::Tensor weight = at::randn({4, 3, 3, 3});
  EXPECT_ERROR_MENTIONS(mmops::masked_conv2d(x[0], mask, weight, std::nullopt, {1, 1}),
                        "expected input to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::masked_conv2d(x, mask[0], weight, std::nullopt, {1, 1}),
                        "expected mask to be a 3-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::masked_conv2d(x, mask.slice(1, 0, 5), weight, std::nullopt, {1, 1}),
                        "expected mask of shape [N, H_out, W_out] = [2, 6, 6]");
  EXPECT_ERROR_MENTIONS(mmops::masked_conv2d(x, mask, weight.to(at::kDouble), std::nullopt, {1, 1}),
                        "expected weight to have the dtype of input");
  EXPECT_ERROR_MENTIONS(mmops::masked_conv2d(x, mask, weight, at::zeros({3}), {1, 1}), "expected bias of shape [4]");
  EXPECT_ERROR_MENTIONS(mmops::masked_conv2d(x, mask, weight, std::nullopt, {-1, 1}),
                        "padding values must be non-negative");
  EXPECT_ERROR_MENTIONS(mmops::masked_conv2d(x, mask, weight, std::nullopt, {1, 1}, {0, 1}),
                        "stride values must be positive");
}

TEST(MaskedConv2d, EmptyBatch) {
  const at::Tensor x = at::randn({0, 3, 6, 6}).requires_grad_(true);
  const at::Tensor out = mmops::masked_conv2d(x, at::rand({0, 6, 6}), at::randn({4, 3, 3, 3}), at::zeros({4}), {1, 1});
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{0, 4, 6, 6}));
  out.sum().backward();
  EXPECT_EQ(x.grad().sizes(), x.sizes());
}

TEST(MaskedConv2d, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(2);
  const at::Tensor x = at::randn({2, 16, 13, 17});
  const at::Tensor weight = at::randn({8, 16, 3, 3}) * 0.1;
  const at::Tensor bias = at::randn({8});
  const at::Tensor mask = at::rand({2, 13, 17}) - 0.7;
  for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    const at::Tensor xc = x.to(dtype).cuda().requires_grad_(true), xh = x.to(at::kDouble).requires_grad_(true);
    const at::Tensor oc = mmops::masked_conv2d(xc, mask.cuda(), weight.to(dtype).cuda(), bias.to(dtype).cuda(), {1, 1});
    const at::Tensor oh = mmops::masked_conv2d(xh, mask, weight.to(at::kDouble), bias.to(at::kDouble), {1, 1});
    EXPECT_TRUE(at::allclose(oc.cpu().to(at::kDouble), oh, 3e-2, 3e-2)) << dtype;
    oc.sum().backward();
    oh.sum().backward();
    EXPECT_TRUE(at::allclose(xc.grad().cpu().to(at::kDouble), xh.grad(), 3e-2, 3e-2)) << dtype;
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry masked_conv2d_api{
    "mmops::masked_conv2d", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::masked_conv2d(a[0].toTensor(), a[1].toTensor(), a[2].toTensor(),
                                                         mmops_test::optional_tensor(a[3]), a[4].toIntVector(),
                                                         a[5].toIntVector())};
    }};

} // namespace

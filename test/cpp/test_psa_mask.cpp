// C++ face of mmops::psa_mask: the public API against a loop reference,
// autograd from C++, finite differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

namespace {

// The definition: mask entry (i, j) of pixel (h, w) belongs to pixel
// (h + i - (mh - 1) / 2, w + j - (mw - 1) / 2).
at::Tensor reference(const at::Tensor& x, bool collect, int64_t mh, int64_t mw) {
  const int64_t n = x.size(0), height = x.size(2), width = x.size(3);
  at::Tensor out = at::zeros({n, height * width, height, width}, x.options());
  auto s = x.accessor<double, 4>();
  auto a = out.accessor<double, 4>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t h = 0; h < height; ++h)
      for (int64_t w = 0; w < width; ++w)
        for (int64_t i = 0; i < mh; ++i)
          for (int64_t j = 0; j < mw; ++j) {
            const int64_t y = h + i - (mh - 1) / 2, xx = w + j - (mw - 1) / 2;
            if (y < 0 || y >= height || xx < 0 || xx >= width) {
              continue;
            }
            if (collect) {
              a[b][y * width + xx][h][w] = s[b][i * mw + j][h][w];
            } else {
              a[b][h * width + w][y][xx] = s[b][i * mw + j][h][w];
            }
          }
  return out;
}

TEST(PsaMask, MatchesLoopReference) {
  at::manual_seed(0);
  for (const bool collect : {true, false}) {
    for (const auto& [mh, mw] : std::vector<std::pair<int64_t, int64_t>>{{7, 9}, {3, 2}, {1, 5}}) {
      const at::Tensor x = at::randn({2, mh * mw, 4, 5}, at::kDouble);
      const at::Tensor out = mmops::psa_mask(x, collect ? "collect" : "distribute", {mh, mw});
      EXPECT_EQ(out.sizes(), at::IntArrayRef({2, 20, 4, 5}));
      EXPECT_TRUE(at::equal(out, reference(x, collect, mh, mw))) << collect << " " << mh << "x" << mw;
    }
  }
}

TEST(PsaMask, FiniteDifferences) {
  at::manual_seed(1);
  const at::Tensor x0 = at::randn({1, 15, 3, 4}, at::kDouble);
  const at::Tensor weights = at::randn({1, 12, 3, 4}, at::kDouble);
  for (const char* type : {"collect", "distribute"}) {
    auto loss = [&](const at::Tensor& x) { return (mmops::psa_mask(x, type, {3, 5}) * weights).sum(); };
    const at::Tensor x = x0.clone().requires_grad_(true);
    loss(x).backward();
    const double eps = 1e-6;
    torch::NoGradGuard no_grad;
    for (int64_t i = 0; i < x0.numel(); i += 5) {
      at::Tensor plus = x0.clone(), minus = x0.clone();
      plus.view(-1)[i] += eps;
      minus.view(-1)[i] -= eps;
      const double numeric = (loss(plus).item<double>() - loss(minus).item<double>()) / (2 * eps);
      EXPECT_NEAR(x.grad().view(-1)[i].item<double>(), numeric, 1e-6) << type << " input element " << i;
    }
  }
}

TEST(PsaMask, EmptyInputs) {
  const at::Tensor x = at::randn({0, 9, 3, 4}).requires_grad_(true);
  const at::Tensor out = mmops::psa_mask(x, "collect", {3, 3});
  EXPECT_EQ(out.sizes(), at::IntArrayRef({0, 12, 3, 4}));
  out.sum().backward();
  EXPECT_EQ(x.grad().sizes(), x.sizes());
}

TEST(PsaMask, ErrorsNameTheArgument) {
  const at::Tensor x = at::randn({2, 9, 3, 4});
  EXPECT_ERROR_MENTIONS(mmops::psa_mask(x[0], "collect", {3, 3}), "expected input to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::psa_mask(x, "collect", {3, 4}), "mask_h * mask_w = 12 channels");
  EXPECT_ERROR_MENTIONS(mmops::psa_mask(x, "gather", {3, 3}), "psa_type");
  EXPECT_ERROR_MENTIONS(mmops::psa_mask(x, "collect", {3}), "expected mask_size to hold 2 values");
  EXPECT_ERROR_MENTIONS(mmops::psa_mask(x.to(at::kInt), "collect", {3, 3}), "floating point dtype");
}

TEST(PsaMask, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(2);
  const at::Tensor x0 = at::randn({2, 33 * 17, 17, 9});
  for (const char* type : {"collect", "distribute"}) {
    for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
      const at::Tensor xc = x0.to(dtype).cuda().detach().requires_grad_(true);
      const at::Tensor xh = x0.to(dtype).detach().requires_grad_(true);
      const at::Tensor oc = mmops::psa_mask(xc, type, {33, 17}), oh = mmops::psa_mask(xh, type, {33, 17});
      EXPECT_TRUE(at::equal(oc.cpu(), oh)) << type << " " << dtype;
      const at::Tensor go = at::randn(oh.sizes()).to(dtype);
      oc.backward(go.cuda());
      oh.backward(go);
      EXPECT_TRUE(at::equal(xc.grad().cpu(), xh.grad())) << type << " " << dtype;
    }
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry psa_mask_api{
    "mmops::psa_mask", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::psa_mask(a[0].toTensor(), a[1].toStringRef(), a[2].toIntVector())};
    }};

} // namespace

// C++ face of mmops::sigmoid_focal_loss / softmax_focal_loss: the public API,
// autograd from C++, finite differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/csrc/jit/frontend/resolver.h>
#include <torch/csrc/jit/frontend/sugared_value.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace {

TEST(SigmoidFocalLoss, KnownValues) {
  // x = 0: p = 1/2; positive 0.25 * 0.25 * ln 2, negative 0.75 * 0.25 * ln 2; row 1 is background.
  const double ln2 = std::log(2.0);
  const at::Tensor x = at::zeros({2, 3}, at::kDouble);
  const at::Tensor t = at::tensor({int64_t(1), int64_t(3)});
  const at::Tensor none = mmops::sigmoid_focal_loss(x, t, 2.0, 0.25, std::nullopt, "none");
  const at::Tensor expected =
      at::tensor({0.1875 * ln2, 0.0625 * ln2, 0.1875 * ln2, 0.1875 * ln2, 0.1875 * ln2, 0.1875 * ln2}, at::kDouble)
          .reshape({2, 3});
  EXPECT_TRUE(at::allclose(none, expected, 1e-14, 0)) << none;
  EXPECT_NEAR(mmops::sigmoid_focal_loss(x, t).item<double>(), expected.sum().item<double>() / 2, 1e-14);
  const at::Tensor w = at::tensor({2.0, 3.0, 5.0}, at::kDouble);
  EXPECT_NEAR(mmops::sigmoid_focal_loss(x, t, 2.0, 0.25, w, "sum").item<double>(), (3.0 * 0.4375 + 0.5625) * ln2,
              1e-14);
}

TEST(SoftmaxFocalLoss, KnownValues) {
  // uniform logits over 4 classes: p = 1/4, loss 0.25 * (3/4)^2 * ln 4 per row
  const at::Tensor x = at::zeros({3, 4}, at::kDouble);
  const at::Tensor t = at::tensor({int64_t(0), int64_t(2), int64_t(3)});
  const double row = 0.25 * 0.5625 * std::log(4.0);
  EXPECT_NEAR(mmops::softmax_focal_loss(x, t).item<double>(), row, 1e-14);
  EXPECT_NEAR(mmops::softmax_focal_loss(x, t, 2.0, 0.25, std::nullopt, "sum").item<double>(), 3 * row, 1e-14);
  EXPECT_EQ(mmops::softmax_focal_loss(x, t, 2.0, 0.25, std::nullopt, "none").sizes(), at::IntArrayRef({3}));
}

template <typename Loss>
void check_finite_differences(Loss&& loss, const at::Tensor& input) {
  const at::Tensor x = input.clone().requires_grad_(true);
  loss(x).backward();
  const at::Tensor analytic = x.grad();
  const double eps = 1e-6;
  torch::NoGradGuard no_grad;
  for (int64_t i = 0; i < input.numel(); ++i) {
    at::Tensor plus = input.clone(), minus = input.clone();
    plus.view(-1)[i] += eps;
    minus.view(-1)[i] -= eps;
    const at::Tensor lp = loss(plus), lm = loss(minus);
    const double numeric = (lp.item<double>() - lm.item<double>()) / (2 * eps);
    EXPECT_NEAR(analytic.view(-1)[i].item<double>(), numeric, 1e-7) << "element " << i;
  }
}

TEST(FocalLoss, FiniteDifferences) {
  at::manual_seed(0);
  const at::Tensor x = at::randn({5, 4}, at::kDouble) * 2;
  const at::Tensor t = at::tensor({int64_t(0), int64_t(4), int64_t(2), int64_t(3), int64_t(1)});
  const at::Tensor ts = t.clamp_max(3);
  const at::Tensor w = at::rand({4}, at::kDouble) + 0.5;
  const at::Tensor go = at::randn({5, 4}, at::kDouble);
  const at::Tensor go_rows = at::randn({5}, at::kDouble);
  for (double gamma : {2.0, 0.5}) {
    check_finite_differences(
        [&](const at::Tensor& v) { return mmops::sigmoid_focal_loss(v, t, gamma, 0.25, w, "mean"); }, x);
    check_finite_differences(
        [&](const at::Tensor& v) {
          return (mmops::sigmoid_focal_loss(v, t, gamma, 0.25, std::nullopt, "none") * go).sum();
        },
        x);
    check_finite_differences(
        [&](const at::Tensor& v) { return mmops::softmax_focal_loss(v, ts, gamma, 0.25, w, "sum"); }, x);
    check_finite_differences(
        [&](const at::Tensor& v) {
          return (mmops::softmax_focal_loss(v, ts, gamma, 0.75, std::nullopt, "none") * go_rows).sum();
        },
        x);
  }
}

TEST(FocalLoss, ErrorsNameTheArgument) {
  const at::Tensor x = at::randn({4, 3});
  const at::Tensor t = at::tensor({int64_t(0), int64_t(1), int64_t(2), int64_t(1)});
  EXPECT_ERROR_MENTIONS(mmops::sigmoid_focal_loss(x[0], t), "expected input to be a 2-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::sigmoid_focal_loss(x, t.to(at::kFloat)), "target to be int64");
  EXPECT_ERROR_MENTIONS(mmops::softmax_focal_loss(x, t.slice(0, 0, 3)), "target to have N = 4");
  EXPECT_ERROR_MENTIONS(mmops::softmax_focal_loss(x, t, 2.0, 0.25, at::ones({2})), "weight to have C = 3");
  EXPECT_ERROR_MENTIONS(mmops::softmax_focal_loss(x, t, 2.0, 0.25, std::nullopt, "avg"), "reduction");
  EXPECT_ERROR_MENTIONS(mmops::sigmoid_focal_loss(x, t, -1.0), "gamma");
  at::Tensor bad = t.clone();
  bad[2] = 3; // background: fine for sigmoid, out of range for softmax
  EXPECT_NO_THROW(mmops::sigmoid_focal_loss(x, bad));
  EXPECT_ERROR_MENTIONS(mmops::softmax_focal_loss(x, bad), "target[2] = 3");
  bad[2] = 4;
  EXPECT_ERROR_MENTIONS(mmops::sigmoid_focal_loss(x, bad), "target[2] = 4");
}

TEST(DetectionOps, TorchScriptModuleSavedAndLoadedInCpp) {
  // A TorchScript module calling roi_pool and both focal losses, saved to a file and loaded back.
  torch::jit::Module module("DetectionHead");
  module.define(R"JIT(
def forward(self, x: Tensor, rois: Tensor, logits: Tensor, target: Tensor) -> Tensor:
    pooled = torch.ops.mmops.roi_pool(x, rois, [2, 2], 0.5)
    a = torch.ops.mmops.sigmoid_focal_loss(logits, target, 2.0, 0.25, None, "mean")
    b = torch.ops.mmops.softmax_focal_loss(logits, target, 1.0, 0.5, None, "sum")
    return pooled.sum() + a + b
)JIT",
                std::make_shared<mmops_test::TorchResolver>());
  const std::string path = ::testing::TempDir() + "mmops_detection_head.pt";
  module.save(path);
  torch::jit::Module loaded = torch::jit::load(path);
  std::remove(path.c_str());
  at::manual_seed(2);
  const at::Tensor x = at::randn({2, 3, 8, 8}, at::kDouble).requires_grad_(true);
  const at::Tensor rois =
      at::tensor({0.0, 1.0, 2.0, 9.0, 12.0, 1.0, 0.0, 0.0, 15.0, 15.0}, at::kDouble).reshape({2, 5});
  const at::Tensor logits = at::randn({5, 4}, at::kDouble).requires_grad_(true);
  const at::Tensor target = at::tensor({int64_t(0), int64_t(3), int64_t(1), int64_t(2), int64_t(3)});
  const at::Tensor out = loaded.forward({x, rois, logits, target}).toTensor();
  const at::Tensor expected = mmops::roi_pool(x, rois, {2, 2}, 0.5).sum() + mmops::sigmoid_focal_loss(logits, target) +
                              mmops::softmax_focal_loss(logits, target, 1.0, 0.5, std::nullopt, "sum");
  EXPECT_TRUE(at::allclose(out, expected, 1e-12, 0)) << out << expected;
  out.backward(); // autograd through the loaded module, in C++
  EXPECT_TRUE(x.grad().defined() && logits.grad().defined());
  EXPECT_EQ(x.grad().sum().item<double>(), 24.0); // one 1 per (roi, channel, bin): 2 x 3 x 4
}

TEST(FocalLoss, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(1);
  const at::Tensor x = at::randn({1000, 80}) * 3;
  const at::Tensor t = at::randint(0, 80, {1000}, at::kLong);
  for (const char* reduction : {"none", "mean", "sum"}) {
    for (int kind = 0; kind < 2; ++kind) {
      auto run = [&](const at::Tensor& v, const at::Tensor& tt) {
        return kind == 0 ? mmops::sigmoid_focal_loss(v, tt, 2.0, 0.25, std::nullopt, reduction)
                         : mmops::softmax_focal_loss(v, tt, 2.0, 0.25, std::nullopt, reduction);
      };
      const at::Tensor xc = x.cuda().requires_grad_(true), xh = x.clone().requires_grad_(true);
      const at::Tensor oc = run(xc, t.cuda()), oh = run(xh, t);
      EXPECT_TRUE(at::allclose(oc.cpu(), oh, 1e-5, 1e-6)) << reduction << " " << kind;
      oc.sum().backward();
      oh.sum().backward();
      EXPECT_TRUE(at::allclose(xc.grad().cpu(), xh.grad(), 1e-5, 1e-6)) << reduction << " " << kind;
    }
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry sigmoid_focal_loss_api{
    "mmops::sigmoid_focal_loss", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::sigmoid_focal_loss(a[0].toTensor(), a[1].toTensor(), a[2].toDouble(),
                                                              a[3].toDouble(), mmops_test::optional_tensor(a[4]),
                                                              a[5].toStringRef())};
    }};
const mmops_test::CppApiEntry softmax_focal_loss_api{
    "mmops::softmax_focal_loss", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::softmax_focal_loss(a[0].toTensor(), a[1].toTensor(), a[2].toDouble(),
                                                              a[3].toDouble(), mmops_test::optional_tensor(a[4]),
                                                              a[5].toStringRef())};
    }};

} // namespace

// C++ face of mmops::carafe: the public API against a reference, autograd from
// C++, finite differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

#include <tuple>
#include <vector>

namespace {

// The definition, as loops: out[n, c, ho, wo] = sum over the k x k window around
// (ho / s, wo / s) of features * masks[n, group * k * k + tap, ho, wo].
at::Tensor reference(const at::Tensor& f, const at::Tensor& m, int64_t k, int64_t g, int64_t s) {
  const int64_t N = f.size(0), C = f.size(1), H = f.size(2), W = f.size(3), r = (k - 1) / 2;
  at::Tensor out = at::zeros({N, C, H * s, W * s}, at::kDouble);
  auto fa = f.accessor<double, 4>();
  auto ma = m.accessor<double, 4>();
  auto oa = out.accessor<double, 4>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t ho = 0; ho < H * s; ++ho)
        for (int64_t wo = 0; wo < W * s; ++wo)
          for (int64_t ky = 0; ky < k; ++ky)
            for (int64_t kx = 0; kx < k; ++kx) {
              const int64_t y = ho / s - r + ky, x = wo / s - r + kx;
              if (y >= 0 && y < H && x >= 0 && x < W) {
                oa[n][c][ho][wo] += fa[n][c][y][x] * ma[n][c / (C / g) * k * k + ky * k + kx][ho][wo];
              }
            }
  return out;
}

TEST(Carafe, MatchesLoopReference) {
  at::manual_seed(0);
  using Options = std::tuple<int64_t, int64_t, int64_t>; // kernel_size, group_size, scale_factor
  for (const auto& [k, g, s] : std::vector<Options>{{3, 2, 2}, {5, 1, 1}, {1, 3, 3}, {7, 3, 2}}) {
    const at::Tensor f = at::randn({2, 6, 4, 5}, at::kDouble);
    const at::Tensor m = at::rand({2, k * k * g, 4 * s, 5 * s}, at::kDouble);
    const at::Tensor out = mmops::carafe(f, m, k, g, s);
    EXPECT_TRUE(at::allclose(out, reference(f, m, k, g, s), 1e-12, 1e-12)) << k << " " << g << " " << s;
  }
}

TEST(Carafe, FiniteDifferences) {
  at::manual_seed(1);
  const at::Tensor f0 = at::randn({1, 4, 3, 4}, at::kDouble);
  const at::Tensor m0 = at::rand({1, 18, 6, 8}, at::kDouble);
  const at::Tensor weights = at::randn({1, 4, 6, 8}, at::kDouble);
  auto loss = [&](const at::Tensor& f, const at::Tensor& m) { return (mmops::carafe(f, m, 3, 2, 2) * weights).sum(); };
  const at::Tensor f = f0.clone().requires_grad_(true), m = m0.clone().requires_grad_(true);
  loss(f, m).backward();
  const double eps = 1e-6;
  torch::NoGradGuard no_grad;
  for (int64_t i = 0; i < f0.numel(); i += 5) {
    at::Tensor plus = f0.clone(), minus = f0.clone();
    plus.view(-1)[i] += eps;
    minus.view(-1)[i] -= eps;
    const double numeric = (loss(plus, m0).item<double>() - loss(minus, m0).item<double>()) / (2 * eps);
    EXPECT_NEAR(f.grad().view(-1)[i].item<double>(), numeric, 1e-6) << "features element " << i;
  }
  for (int64_t i = 0; i < m0.numel(); i += 37) {
    at::Tensor plus = m0.clone(), minus = m0.clone();
    plus.view(-1)[i] += eps;
    minus.view(-1)[i] -= eps;
    const double numeric = (loss(f0, plus).item<double>() - loss(f0, minus).item<double>()) / (2 * eps);
    EXPECT_NEAR(m.grad().view(-1)[i].item<double>(), numeric, 1e-6) << "masks element " << i;
  }
}

TEST(Carafe, EmptyInputs) {
  const at::Tensor f = at::randn({2, 0, 3, 3}).requires_grad_(true);
  const at::Tensor m = at::rand({2, 9, 6, 6}).requires_grad_(true);
  const at::Tensor out = mmops::carafe(f, m, 3, 1, 2);
  EXPECT_EQ(out.sizes(), at::IntArrayRef({2, 0, 6, 6}));
  out.sum().backward();
  EXPECT_TRUE(at::equal(m.grad(), at::zeros_like(m)));
}

TEST(Carafe, ErrorsNameTheArgument) {
  const at::Tensor f = at::randn({1, 4, 3, 3});
  const at::Tensor m = at::rand({1, 18, 6, 6});
  EXPECT_ERROR_MENTIONS(mmops::carafe(f[0], m, 3, 2, 2), "expected features to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::carafe(f, m.to(at::kDouble), 3, 2, 2), "masks to have the dtype of features");
  EXPECT_ERROR_MENTIONS(mmops::carafe(f, m, 4, 2, 2), "kernel_size must be odd");
  EXPECT_ERROR_MENTIONS(mmops::carafe(f, m, 3, 0, 2), "group_size must be positive");
  EXPECT_ERROR_MENTIONS(mmops::carafe(f, m, 3, 3, 2), "divisible by group_size");
  EXPECT_ERROR_MENTIONS(mmops::carafe(f, m, 3, 2, 0), "scale_factor");
  EXPECT_ERROR_MENTIONS(mmops::carafe(f, m, 3, 2, 3), "expected masks of shape");
}

TEST(Carafe, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(2);
  const at::Tensor f0 = at::randn({2, 40, 9, 13});
  const at::Tensor m0 = at::rand({2, 50, 18, 26});
  for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    // detached leaves: for float32 to(dtype) returns f0 itself, which must not start to require grad
    const at::Tensor fc = f0.to(dtype).cuda().detach().requires_grad_(true);
    const at::Tensor mc = m0.to(dtype).cuda().detach().requires_grad_(true);
    const at::Tensor fh = f0.to(dtype).detach().requires_grad_(true), mh = m0.to(dtype).detach().requires_grad_(true);
    const at::Tensor oc = mmops::carafe(fc, mc, 5, 2, 2), oh = mmops::carafe(fh, mh, 5, 2, 2);
    const double tol = dtype == at::kFloat || dtype == at::kDouble ? 1e-5 : 5e-2;
    EXPECT_TRUE(at::allclose(oc.cpu().to(at::kDouble), oh.to(at::kDouble), tol, tol)) << dtype;
    oc.sum().backward();
    oh.sum().backward();
    EXPECT_TRUE(at::allclose(fc.grad().cpu().to(at::kDouble), fh.grad().to(at::kDouble), tol, tol)) << dtype;
    EXPECT_TRUE(at::allclose(mc.grad().cpu().to(at::kDouble), mh.grad().to(at::kDouble), tol, tol)) << dtype;
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry carafe_api{
    "mmops::carafe", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{
          mmops::carafe(a[0].toTensor(), a[1].toTensor(), a[2].toInt(), a[3].toInt(), a[4].toInt())};
    }};

} // namespace

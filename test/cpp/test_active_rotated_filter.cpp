// C++ face of mmops::active_rotated_filter: the public API against a loop
// reference, autograd from C++, finite differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

namespace {

// mmcv's loops: out[i, k, j, idx[l, k] - 1] = w[i, j, l].
at::Tensor reference(const at::Tensor& w, const at::Tensor& idx) {
  const int64_t op = w.size(0), ip = w.size(1), o = w.size(2), h = w.size(3), kw = w.size(4), r = idx.size(3);
  const int64_t e = o * h * kw;
  const at::Tensor src = w.reshape({op, ip, e});
  const at::Tensor table = idx.reshape({e, r}).to(at::kLong);
  at::Tensor out = at::zeros({op, r, ip, e}, w.options());
  auto s = src.accessor<double, 3>();
  auto t = table.accessor<int64_t, 2>();
  auto a = out.accessor<double, 4>();
  for (int64_t i = 0; i < op; ++i)
    for (int64_t j = 0; j < ip; ++j)
      for (int64_t l = 0; l < e; ++l)
        for (int64_t k = 0; k < r; ++k) {
          a[i][k][j][t[l][k] - 1] = s[i][j][l];
        }
  return out.reshape({op * r, ip * o, h, kw});
}

// For every rotation a random permutation of 1..o*h*w.
at::Tensor permutation_indices(int64_t o, int64_t h, int64_t w, int64_t r) {
  std::vector<at::Tensor> cols;
  for (int64_t k = 0; k < r; ++k) {
    cols.push_back(at::randperm(o * h * w, at::kLong) + 1);
  }
  return at::stack(cols, 1).reshape({o, h, w, r}).to(at::kInt);
}

TEST(ActiveRotatedFilter, MatchesLoopReference) {
  at::manual_seed(0);
  const at::Tensor w = at::randn({3, 2, 4, 3, 3}, at::kDouble);
  const at::Tensor idx = permutation_indices(4, 3, 3, 4);
  const at::Tensor out = mmops::active_rotated_filter(w, idx);
  EXPECT_EQ(out.sizes(), at::IntArrayRef({12, 8, 3, 3}));
  EXPECT_TRUE(at::equal(out, reference(w, idx)));
  EXPECT_TRUE(at::equal(mmops::active_rotated_filter(w, idx.to(at::kLong)), out));
}

TEST(ActiveRotatedFilter, FiniteDifferences) {
  at::manual_seed(1);
  const at::Tensor w0 = at::randn({2, 2, 2, 3, 3}, at::kDouble);
  const at::Tensor idx = permutation_indices(2, 3, 3, 3);
  const at::Tensor weights = at::randn({6, 4, 3, 3}, at::kDouble);
  auto loss = [&](const at::Tensor& w) { return (mmops::active_rotated_filter(w, idx) * weights).sum(); };
  const at::Tensor w = w0.clone().requires_grad_(true);
  loss(w).backward();
  const double eps = 1e-6;
  torch::NoGradGuard no_grad;
  for (int64_t i = 0; i < w0.numel(); i += 3) {
    at::Tensor plus = w0.clone(), minus = w0.clone();
    plus.view(-1)[i] += eps;
    minus.view(-1)[i] -= eps;
    const double numeric = (loss(plus).item<double>() - loss(minus).item<double>()) / (2 * eps);
    EXPECT_NEAR(w.grad().view(-1)[i].item<double>(), numeric, 1e-6) << "input element " << i;
  }
}

TEST(ActiveRotatedFilter, EmptyInputs) {
  const at::Tensor w = at::randn({0, 2, 2, 3, 3}).requires_grad_(true);
  const at::Tensor out = mmops::active_rotated_filter(w, permutation_indices(2, 3, 3, 4));
  EXPECT_EQ(out.sizes(), at::IntArrayRef({0, 4, 3, 3}));
  out.sum().backward();
  EXPECT_EQ(w.grad().sizes(), w.sizes());
}

TEST(ActiveRotatedFilter, ErrorsNameTheArgument) {
  const at::Tensor w = at::randn({2, 2, 2, 3, 3});
  const at::Tensor idx = permutation_indices(2, 3, 3, 4);
  EXPECT_ERROR_MENTIONS(mmops::active_rotated_filter(w[0], idx), "expected input to be a 5-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::active_rotated_filter(w, idx[0]), "expected indices to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::active_rotated_filter(w, idx.to(at::kFloat)), "integer dtype");
  EXPECT_ERROR_MENTIONS(mmops::active_rotated_filter(w, idx.narrow(1, 0, 2)), "expected indices of shape");
  at::Tensor bad = idx.clone();
  bad.view(-1)[5] = 19;
  EXPECT_ERROR_MENTIONS(mmops::active_rotated_filter(w, bad), "every value of indices in [1, 18]");
  bad.view(-1)[5] = 0;
  EXPECT_ERROR_MENTIONS(mmops::active_rotated_filter(w, bad), "every value of indices in [1, 18]");
}

TEST(ActiveRotatedFilter, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(2);
  const at::Tensor w0 = at::randn({9, 300, 8, 3, 3});
  const at::Tensor idx = permutation_indices(8, 3, 3, 8);
  for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    const at::Tensor wc = w0.to(dtype).cuda().detach().requires_grad_(true);
    const at::Tensor wh = w0.to(dtype).detach().requires_grad_(true);
    const at::Tensor oc = mmops::active_rotated_filter(wc, idx.cuda()), oh = mmops::active_rotated_filter(wh, idx);
    EXPECT_TRUE(at::equal(oc.cpu(), oh)) << dtype;
    const at::Tensor go = at::randn(oh.sizes()).to(dtype);
    oc.backward(go.cuda());
    oh.backward(go);
    const double tol = dtype == at::kFloat || dtype == at::kDouble ? 1e-5 : 5e-2;
    EXPECT_TRUE(at::allclose(wc.grad().cpu().to(at::kDouble), wh.grad().to(at::kDouble), tol, tol)) << dtype;
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry active_rotated_filter_api{
    "mmops::active_rotated_filter", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::active_rotated_filter(a[0].toTensor(), a[1].toTensor())};
    }};

} // namespace

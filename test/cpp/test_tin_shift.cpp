// C++ face of mmops::tin_shift: the public API against a loop reference, mmcv's
// forward semantics, autograd from C++ (the adjoint move), finite differences,
// shifts of any size, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "test_support.h"

namespace {

// x [N, T, C, P] (double) moved by `sign` * shift in double loops: frame t holds
// frame t - sign * shift[n, c / (C / G)], 0 outside [0, T).
at::Tensor reference(const at::Tensor& x, const at::Tensor& shift, int64_t sign) {
  const int64_t n_ = x.size(0), t_ = x.size(1), c_ = x.size(2), p_ = x.size(3);
  const int64_t group_channels = c_ / shift.size(1);
  at::Tensor out = at::zeros_like(x);
  auto in = x.accessor<double, 4>();
  auto o = out.accessor<double, 4>();
  const at::Tensor s64 = shift.to(at::kLong);
  auto s = s64.accessor<int64_t, 2>();
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t c = 0; c < c_; ++c) {
      const int64_t move = sign * s[n][c / group_channels];
      for (int64_t t = 0; t < t_; ++t) {
        const int64_t from = t - move;
        if (from >= 0 && from < t_) {
          for (int64_t p = 0; p < p_; ++p) {
            o[n][t][c][p] = in[n][from][c][p];
          }
        }
      }
    }
  return out;
}

TEST(TinShift, MatchesLoopReference) {
  at::manual_seed(0);
  const at::Tensor x = at::randn({2, 5, 12, 7}, at::kDouble);
  const at::Tensor shift = at::randint(-6, 7, {2, 4}, at::kInt);
  const at::Tensor out = mmops::tin_shift(x, shift);
  EXPECT_EQ(out.sizes(), x.sizes());
  EXPECT_TRUE(at::equal(out, reference(x, shift, 1)));
  // 5-D input: the same as its [N, T, C, H * W] view
  const at::Tensor x5 = x.view({2, 5, 12, 7, 1}).expand({2, 5, 12, 7, 3}).contiguous();
  EXPECT_TRUE(at::equal(mmops::tin_shift(x5, shift.to(at::kLong)).select(4, 2), out));
}

TEST(TinShift, PositiveShiftMovesTowardsLaterFramesAndGradientMovesBack) {
  const at::Tensor x = at::arange(1.0, 5.0, at::kDouble).view({1, 4, 1, 1}).requires_grad_(true);
  const at::Tensor out = mmops::tin_shift(x, at::tensor({1}, at::kInt).view({1, 1}));
  EXPECT_TRUE(at::equal(out.flatten(), at::tensor({0.0, 1.0, 2.0, 3.0}, at::kDouble)));
  out.backward(at::tensor({10.0, 20.0, 30.0, 40.0}, at::kDouble).view({1, 4, 1, 1}));
  // input frame t reaches output frame t + 1: its gradient is grad_output[t + 1]
  EXPECT_TRUE(at::equal(x.grad().flatten(), at::tensor({20.0, 30.0, 40.0, 0.0}, at::kDouble)));
}

TEST(TinShift, ShiftsOfAnySize) {
  const at::Tensor x = at::randn({2, 4, 4, 3}, at::kDouble);
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  const at::Tensor shift = at::tensor(std::vector<int64_t>{hi, lo, 3, -4}, at::kLong).view({2, 2});
  const at::Tensor out = mmops::tin_shift(x, shift);
  EXPECT_TRUE(at::equal(out.narrow(0, 0, 1), at::zeros({1, 4, 4, 3}, at::kDouble)));
  EXPECT_TRUE(at::equal(out, reference(x, at::tensor({9, -9, 3, -4}, at::kLong).view({2, 2}), 1)));
}

TEST(TinShift, FiniteDifferences) {
  at::manual_seed(1);
  const at::Tensor x0 = at::randn({2, 4, 6, 3}, at::kDouble);
  const at::Tensor shift = at::randint(-3, 4, {2, 3}, at::kInt);
  const at::Tensor weights = at::randn({2, 4, 6, 3}, at::kDouble);
  mmops_test::expect_finite_differences(
      [&](const at::Tensor& x) { return (mmops::tin_shift(x, shift) * weights).sum(); }, x0, 3);
  const at::Tensor xg = x0.clone().requires_grad_(true);
  (mmops::tin_shift(xg, shift) * weights).sum().backward();
  EXPECT_TRUE(at::equal(xg.grad(), reference(weights, shift, -1)));
}

TEST(TinShift, EmptyInputs) {
  const at::Tensor x = at::randn({0, 4, 6, 3}).requires_grad_(true);
  const at::Tensor out = mmops::tin_shift(x, at::zeros({0, 2}, at::kInt));
  EXPECT_EQ(out.sizes(), x.sizes());
  out.sum().backward();
  EXPECT_EQ(x.grad().sizes(), x.sizes());
  EXPECT_EQ(mmops::tin_shift(at::randn({2, 4, 0, 3}), at::ones({2, 2}, at::kInt)).sizes(),
            at::IntArrayRef({2, 4, 0, 3}));
}

TEST(TinShift, ErrorsNameTheArgument) {
  const at::Tensor x = at::randn({2, 4, 6, 3});
  const at::Tensor shift = at::zeros({2, 3}, at::kInt);
  EXPECT_ERROR_MENTIONS(mmops::tin_shift(x[0], shift), "expected input to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::tin_shift(x.to(at::kInt), shift), "floating point dtype");
  EXPECT_ERROR_MENTIONS(mmops::tin_shift(x, shift.to(at::kFloat)), "expected shift to be an int32 or int64");
  EXPECT_ERROR_MENTIONS(mmops::tin_shift(x, shift[0]), "expected shift to be a 2-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::tin_shift(x, shift.narrow(0, 0, 1)), "one row per clip, N = 2");
  EXPECT_ERROR_MENTIONS(mmops::tin_shift(x, at::zeros({2, 4}, at::kInt)), "C = 6 channels");
  EXPECT_ERROR_MENTIONS(mmops::tin_shift(x, at::zeros({2, 0}, at::kInt)), "G >= 1");
}

TEST(TinShift, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(2);
  // 16 * 49 values per group run: 16-byte words; 3 * 5: one value per word
  for (const auto& [shape, groups] :
       std::vector<std::pair<std::vector<int64_t>, int64_t>>{{{4, 8, 64, 7, 7}, 4}, {{2, 5, 12, 5}, 4}}) {
    const at::Tensor x0 = at::randn(shape);
    const at::Tensor shift = at::randint(-9, 10, {shape[0], groups}, at::kInt);
    for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
      const at::Tensor xc = x0.to(dtype).cuda().detach().requires_grad_(true);
      const at::Tensor xh = x0.to(dtype).detach().requires_grad_(true);
      const at::Tensor oc = mmops::tin_shift(xc, shift.cuda()), oh = mmops::tin_shift(xh, shift);
      EXPECT_TRUE(at::equal(oc.cpu(), oh)) << dtype;
      const at::Tensor go = at::randn(oh.sizes()).to(dtype);
      oc.backward(go.cuda());
      oh.backward(go);
      EXPECT_TRUE(at::equal(xc.grad().cpu(), xh.grad())) << dtype;
    }
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry tin_shift_api{
    "mmops::tin_shift", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::tin_shift(a[0].toTensor(), a[1].toTensor())};
    }};

} // namespace

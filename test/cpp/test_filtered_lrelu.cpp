// C++ face of mmops::filtered_lrelu: the public API against a loop reference,
// a hand-computed vector, autograd from C++ (input and bias, first and second
// order) against finite differences, empty inputs, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <vector>

#include "test_support.h"

namespace {

struct Config {
  int64_t fu_h, fu_w, fd_h, fd_w, up, down;
  std::vector<int64_t> pad; // x0, x1, y0, y1
  std::optional<double> clamp;
};

// The definition in double loops: the intermediate t[my][mx] sums (x + b)[iy][ix] *
// fu[fu_h - 1 - ky][fu_w - 1 - kx] over the taps whose position m - pad0 + k in the zero-inserted
// signal is a multiple of up inside the input; then leaky ReLU times gain, clamp; the output
// (oy, ox) sums t[oy * down + ky][ox * down + kx] * fd[fd_h - 1 - ky][fd_w - 1 - kx].
at::Tensor reference(const at::Tensor& x, const at::Tensor& fu, const at::Tensor& fd, const at::Tensor& b,
                     const Config& c, double gain, double slope) {
  const int64_t n_ = x.size(0), c_ = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t mh = h * c.up + c.pad[2] + c.pad[3] - c.fu_h + 1, mw = w * c.up + c.pad[0] + c.pad[1] - c.fu_w + 1;
  const int64_t oh = (mh - c.fd_h) / c.down + 1, ow = (mw - c.fd_w) / c.down + 1;
  at::Tensor out = at::zeros({n_, c_, oh, ow}, at::kDouble);
  auto in = x.accessor<double, 4>();
  auto ku = fu.accessor<double, 2>();
  auto kd = fd.accessor<double, 2>();
  auto bb = b.accessor<double, 1>();
  auto o = out.accessor<double, 4>();
  std::vector<double> t(mh * mw);
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t ch = 0; ch < c_; ++ch) {
      for (int64_t my = 0; my < mh; ++my)
        for (int64_t mx = 0; mx < mw; ++mx) {
          double acc = 0;
          for (int64_t ky = 0; ky < c.fu_h; ++ky) {
            const int64_t py = my - c.pad[2] + ky;
            if (py < 0 || py % c.up != 0 || py / c.up >= h)
              continue;
            for (int64_t kx = 0; kx < c.fu_w; ++kx) {
              const int64_t px = mx - c.pad[0] + kx;
              if (px < 0 || px % c.up != 0 || px / c.up >= w)
                continue;
              acc += (in[n][ch][py / c.up][px / c.up] + bb[ch]) * ku[c.fu_h - 1 - ky][c.fu_w - 1 - kx];
            }
          }
          double v = (acc < 0 ? acc * slope : acc) * gain;
          if (c.clamp.has_value()) {
            v = std::min(std::max(v, -*c.clamp), *c.clamp);
          }
          t[my * mw + mx] = v;
        }
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double acc = 0;
          for (int64_t ky = 0; ky < c.fd_h; ++ky)
            for (int64_t kx = 0; kx < c.fd_w; ++kx)
              acc += t[(oy * c.down + ky) * mw + ox * c.down + kx] * kd[c.fd_h - 1 - ky][c.fd_w - 1 - kx];
          o[n][ch][oy][ox] = acc;
        }
    }
  return out;
}

const std::vector<Config> kConfigs = {{4, 4, 4, 4, 2, 2, {3, 3, 3, 3}, 0.8},
                                      {3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, std::nullopt},
                                      {3, 5, 4, 2, 3, 2, {2, -1, -2, 3}, 1.5}};

TEST(FilteredLrelu, MatchesLoopReference) {
  at::manual_seed(0);
  for (const Config& c : kConfigs) {
    const at::Tensor x = at::randn({2, 3, 5, 6}, at::kDouble);
    const at::Tensor fu = at::rand({c.fu_h, c.fu_w}, at::kDouble);
    const at::Tensor fd = at::rand({c.fd_h, c.fd_w}, at::kDouble);
    const at::Tensor b = at::randn({3}, at::kDouble);
    const at::Tensor out = mmops::filtered_lrelu(x, fu, fd, b, c.up, c.down, c.pad, 1.3, 0.15, c.clamp);
    const at::Tensor expected = reference(x, fu, fd, b, c, 1.3, 0.15);
    EXPECT_EQ(out.sizes(), expected.sizes());
    EXPECT_TRUE(at::allclose(out, expected, 1e-12, 1e-12)) << c.up << " " << c.down;
  }
}

TEST(FilteredLrelu, KnownVector) {
  // up 2 along x with [[1, 1]], pad x (1, 0), y (0, -1): [3, -2] -> [3, 3, -2, -2]; leaky ReLU
  // (slope 0.5, gain 1): [3, 3, -1, -1]; [[1, 1]] and down 2: [6, -2]
  const at::Tensor x = at::tensor({3.0, -2.0}, at::kDouble).view({1, 1, 1, 2});
  const at::Tensor hold = at::ones({1, 2}, at::kDouble);
  EXPECT_TRUE(at::equal(mmops::filtered_lrelu(x, hold, hold, std::nullopt, 2, 2, {1, 0, 0, -1}, 1.0, 0.5),
                        at::tensor({6.0, -2.0}, at::kDouble).view({1, 1, 1, 2})));
}

TEST(FilteredLrelu, FiniteDifferencesAndSecondOrder) {
  at::manual_seed(1);
  const Config& c = kConfigs[0];
  const at::Tensor x0 = at::randn({1, 2, 4, 5}, at::kDouble);
  const at::Tensor b0 = at::randn({2}, at::kDouble);
  const at::Tensor fu = at::rand({4, 4}, at::kDouble) / 4, fd = at::rand({4, 4}, at::kDouble) / 4;
  const at::Tensor weights = at::randn({1, 2, 4, 5}, at::kDouble);
  const auto f = [&](const at::Tensor& x, const at::Tensor& b) {
    return mmops::filtered_lrelu(x, fu, fd, b, c.up, c.down, c.pad, 1.4, 0.2, 3.0);
  };
  ASSERT_EQ(f(x0, b0).sizes(), weights.sizes());
  mmops_test::expect_finite_differences([&](const at::Tensor& x) { return (f(x, b0) * weights).sum(); }, x0, 3);
  mmops_test::expect_finite_differences([&](const at::Tensor& b) { return (f(x0, b) * weights).sum(); }, b0);
  // the gradient of |grad_x sum(w * out^2)|^2 w.r.t. the weights w, against finite differences
  const auto penalty = [&](const at::Tensor& w) {
    const at::AutoGradMode enable_grad(true); // the finite differences run under no_grad
    const at::Tensor xg = x0.clone().requires_grad_(true);
    const at::Tensor out = f(xg, b0);
    const at::Tensor g = torch::autograd::grad({(w * out.pow(2)).sum()}, {xg}, {}, true, true)[0];
    return g.pow(2).sum();
  };
  mmops_test::expect_finite_differences(penalty, weights, 3, 1e-5);
}

TEST(FilteredLrelu, EmptyInputs) {
  const at::Tensor x = at::randn({0, 3, 4, 5}).requires_grad_(true);
  const at::Tensor f = at::ones({2, 2});
  const at::Tensor out = mmops::filtered_lrelu(x, f, f, std::nullopt, 2, 2, {1, 1, 1, 1});
  EXPECT_EQ(out.sizes(), at::IntArrayRef({0, 3, 4, 5}));
  out.sum().backward();
  EXPECT_EQ(x.grad().sizes(), x.sizes());
}

TEST(FilteredLrelu, ErrorsNameTheArgument) {
  const at::Tensor x = at::randn({2, 3, 5, 6});
  const at::Tensor f = at::ones({3, 3});
  EXPECT_ERROR_MENTIONS(mmops::filtered_lrelu(x[0], f, f), "expected input to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::filtered_lrelu(x, f[0], f), "expected filter_up to be a 2-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::filtered_lrelu(x, f, f, at::ones({2})), "expected bias of shape [C] = [3]");
  EXPECT_ERROR_MENTIONS(mmops::filtered_lrelu(x, f, f, std::nullopt, 0), "expected up in [1, 2^16]");
  EXPECT_ERROR_MENTIONS(mmops::filtered_lrelu(x, f, f, std::nullopt, 1, 1, {0, 0, -3, -3}), "output of at least 1 x 1");
  EXPECT_ERROR_MENTIONS(mmops::filtered_lrelu(x, f, f, std::nullopt, 1, 1, {0, 0, 0}),
                        "expected padding to hold 4 values");
  EXPECT_ERROR_MENTIONS(mmops::filtered_lrelu(x, f, f, std::nullopt, 1, 1, {1, 1, 1, 1}, -1.0), "gain > 0");
  EXPECT_ERROR_MENTIONS(mmops::filtered_lrelu(x.to(at::kInt), f, f), "floating point dtype");
}

TEST(FilteredLrelu, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(2);
  const at::Tensor x0 = at::randn({2, 4, 19, 37});
  const at::Tensor b0 = at::randn({4});
  const at::Tensor fu = at::rand({6, 6}) / 9, fd = at::rand({6, 6}) / 9;
  for (const auto& [up, down] : std::vector<std::pair<int64_t, int64_t>>{{2, 2}, {1, 1}, {2, 1}, {3, 2}}) {
    for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
      const at::Tensor x = x0.to(dtype), b = b0.to(dtype);
      const at::Tensor xc = x.cuda().requires_grad_(true), xh = x.clone().requires_grad_(true);
      const at::Tensor oc = mmops::filtered_lrelu(xc, fu.cuda(), fd.cuda(), b.cuda(), up, down, {5, 5, 5, 5});
      const at::Tensor oh = mmops::filtered_lrelu(xh, fu, fd, b, up, down, {5, 5, 5, 5});
      const double tol = dtype == at::kDouble ? 1e-10 : (dtype == at::kFloat ? 1e-5 : 5e-2);
      EXPECT_TRUE(oc.cpu().to(at::kDouble).allclose(oh.to(at::kDouble), tol, tol)) << up << " " << down << " " << dtype;
      oc.sum().backward();
      oh.sum().backward();
      EXPECT_TRUE(xc.grad().cpu().to(at::kDouble).allclose(xh.grad().to(at::kDouble), tol, tol))
          << up << " " << down << " " << dtype;
    }
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry filtered_lrelu_api{
    "mmops::filtered_lrelu", [](const mmops_test::ApiArgs& a) {
      const std::optional<double> clamp = a[9].isNone() ? std::nullopt : std::optional<double>(a[9].toDouble());
      return mmops_test::ApiOutputs{mmops::filtered_lrelu(a[0].toTensor(), a[1].toTensor(), a[2].toTensor(),
                                                          mmops_test::optional_tensor(a[3]), a[4].toInt(), a[5].toInt(),
                                                          a[6].toIntVector(), a[7].toDouble(), a[8].toDouble(), clamp)};
    }};

} // namespace

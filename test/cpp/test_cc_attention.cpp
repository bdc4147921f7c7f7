// C++ face of mmops::ca_weight and mmops::ca_map: the public API against loops
// over the definition, autograd from C++, finite differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <functional>
#include <utility>
#include <vector>

#include "test_support.h"

namespace {

// The criss-cross pixel (row, column) of entry k of pixel (y, x): its row for k < W, then
// its column without row y, top to bottom.
std::pair<int64_t, int64_t> criss_cross(int64_t k, int64_t y, int64_t x, int64_t width) {
  if (k < width) {
    return {y, k};
  }
  const int64_t i = k - width;
  return {i < y ? i : i + 1, x};
}

at::Tensor ca_weight_loops(const at::Tensor& t, const at::Tensor& f) {
  const int64_t n = t.size(0), c = t.size(1), h = t.size(2), w = t.size(3);
  at::Tensor out = at::zeros({n, h + w - 1, h, w}, t.options());
  auto a = t.accessor<double, 4>();
  auto b = f.accessor<double, 4>();
  auto o = out.accessor<double, 4>();
  for (int64_t bn = 0; bn < n; ++bn)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t k = 0; k < h + w - 1; ++k) {
          const auto [j, s] = criss_cross(k, y, x, w);
          for (int64_t ch = 0; ch < c; ++ch) {
            o[bn][k][y][x] += a[bn][ch][y][x] * b[bn][ch][j][s];
          }
        }
  return out;
}

at::Tensor ca_map_loops(const at::Tensor& weight, const at::Tensor& g) {
  const int64_t n = g.size(0), c = g.size(1), h = g.size(2), w = g.size(3);
  at::Tensor out = at::zeros({n, c, h, w}, g.options());
  auto a = weight.accessor<double, 4>();
  auto b = g.accessor<double, 4>();
  auto o = out.accessor<double, 4>();
  for (int64_t bn = 0; bn < n; ++bn)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t k = 0; k < h + w - 1; ++k) {
          const auto [j, s] = criss_cross(k, y, x, w);
          for (int64_t ch = 0; ch < c; ++ch) {
            o[bn][ch][y][x] += a[bn][k][y][x] * b[bn][ch][j][s];
          }
        }
  return out;
}

const std::vector<std::vector<int64_t>> kShapes{{2, 3, 4, 5}, {1, 2, 6, 3}, {2, 4, 1, 5}, {1, 3, 5, 1}};

TEST(CcAttention, CaWeightMatchesLoops) {
  at::manual_seed(0);
  for (const auto& shape : kShapes) {
    const at::Tensor t = at::randn(shape, at::kDouble), f = at::randn(shape, at::kDouble);
    const at::Tensor out = mmops::ca_weight(t, f);
    EXPECT_EQ(out.sizes(), at::IntArrayRef({shape[0], shape[2] + shape[3] - 1, shape[2], shape[3]}));
    EXPECT_TRUE(at::allclose(out, ca_weight_loops(t, f), 1e-12, 1e-12)) << at::IntArrayRef(shape);
  }
}

TEST(CcAttention, CaMapMatchesLoops) {
  at::manual_seed(1);
  for (const auto& shape : kShapes) {
    const at::Tensor g = at::randn(shape, at::kDouble);
    const at::Tensor weight = at::randn({shape[0], shape[2] + shape[3] - 1, shape[2], shape[3]}, at::kDouble);
    const at::Tensor out = mmops::ca_map(weight, g);
    EXPECT_EQ(out.sizes(), g.sizes());
    EXPECT_TRUE(at::allclose(out, ca_map_loops(weight, g), 1e-12, 1e-12)) << at::IntArrayRef(shape);
  }
}

// Gradients from C++ autograd against central differences of the loss sum(op(a, b) * weights).
void check_finite_differences(const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& op,
                              const at::Tensor& a0, const at::Tensor& b0, const char* what) {
  const at::Tensor a = a0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
  const at::Tensor weights = at::randn(op(a0, b0).sizes(), at::kDouble);
  (op(a, b) * weights).sum().backward();
  const double eps = 1e-6;
  torch::NoGradGuard no_grad;
  for (int arg = 0; arg < 2; ++arg) {
    const at::Tensor base = arg == 0 ? a0 : b0;
    const at::Tensor grad = arg == 0 ? a.grad() : b.grad();
    for (int64_t i = 0; i < base.numel(); i += 3) {
      at::Tensor plus = base.clone(), minus = base.clone();
      plus.view(-1)[i] += eps;
      minus.view(-1)[i] -= eps;
      const auto loss = [&](const at::Tensor& x) {
        return (arg == 0 ? op(x, b0) : op(a0, x)).mul(weights).sum().item<double>();
      };
      const double numeric = (loss(plus) - loss(minus)) / (2 * eps);
      EXPECT_NEAR(grad.view(-1)[i].item<double>(), numeric, 1e-6) << what << " argument " << arg << " element " << i;
    }
  }
}

TEST(CcAttention, FiniteDifferences) {
  at::manual_seed(2);
  check_finite_differences([](const at::Tensor& t, const at::Tensor& f) { return mmops::ca_weight(t, f); },
                           at::randn({1, 2, 3, 4}, at::kDouble), at::randn({1, 2, 3, 4}, at::kDouble), "ca_weight");
  check_finite_differences([](const at::Tensor& w, const at::Tensor& g) { return mmops::ca_map(w, g); },
                           at::randn({1, 6, 3, 4}, at::kDouble), at::randn({1, 2, 3, 4}, at::kDouble), "ca_map");
}

TEST(CcAttention, EmptyInputs) {
  const at::Tensor t = at::randn({0, 3, 4, 5}).requires_grad_(true);
  const at::Tensor out = mmops::ca_weight(t, t);
  EXPECT_EQ(out.sizes(), at::IntArrayRef({0, 8, 4, 5}));
  out.sum().backward();
  EXPECT_EQ(t.grad().sizes(), t.sizes());
  // no channels: zero energies; ca_map gives an empty output
  const at::Tensor empty = at::randn({2, 0, 4, 5});
  EXPECT_TRUE(at::equal(mmops::ca_weight(empty, empty), at::zeros({2, 8, 4, 5})));
  EXPECT_EQ(mmops::ca_map(at::randn({2, 8, 4, 5}), empty).sizes(), empty.sizes());
}

TEST(CcAttention, ErrorsNameTheArgument) {
  const at::Tensor t = at::randn({2, 3, 4, 5});
  const at::Tensor weight = at::randn({2, 8, 4, 5});
  EXPECT_ERROR_MENTIONS(mmops::ca_weight(t[0], t), "mmops::ca_weight: expected t to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::ca_weight(t, t.to(at::kDouble)), "expected f to have the dtype of t");
  EXPECT_ERROR_MENTIONS(mmops::ca_weight(t, t.narrow(3, 0, 4)), "expected f of the shape of t [2, 3, 4, 5]");
  EXPECT_ERROR_MENTIONS(mmops::ca_weight(t.to(at::kInt), t.to(at::kInt)), "floating point dtype");
  EXPECT_ERROR_MENTIONS(mmops::ca_map(weight.narrow(1, 0, 7), t),
                        "mmops::ca_map: expected weight of shape [2, 8, 4, 5]");
  EXPECT_ERROR_MENTIONS(mmops::ca_map(weight, t.narrow(0, 0, 1)), "of g of shape [1, 3, 4, 5]");
  EXPECT_ERROR_MENTIONS(mmops::ca_map(weight, t.to(at::kDouble)), "expected g to have the dtype of weight");
  const at::Tensor no_map = at::randn({2, 3, 0, 0});
  EXPECT_ERROR_MENTIONS(mmops::ca_weight(no_map, no_map), "H + W >= 1");
}

TEST(CcAttention, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(3);
  for (const auto& shape : std::vector<std::vector<int64_t>>{{2, 70, 37, 70}, {1, 33, 9, 65}, {2, 5, 1, 40}}) {
    const at::Tensor t0 = at::randn(shape, at::kDouble), f0 = at::randn(shape, at::kDouble);
    const at::Tensor w0 = at::randn({shape[0], shape[2] + shape[3] - 1, shape[2], shape[3]}, at::kDouble).softmax(1);
    for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
      const double tol = dtype == at::kDouble ? 1e-10 : dtype == at::kFloat ? 1e-4 : 0.1;
      const std::vector<std::pair<at::Tensor, at::Tensor>> inputs{{t0, f0}, {w0, f0}};
      for (int op = 0; op < 2; ++op) {
        auto run = [&](const at::Tensor& a, const at::Tensor& b) {
          return op == 0 ? mmops::ca_weight(a, b) : mmops::ca_map(a, b);
        };
        const at::Tensor a = inputs[op].first.to(dtype), b = inputs[op].second.to(dtype);
        const at::Tensor ac = a.cuda().requires_grad_(true), bc = b.cuda().requires_grad_(true);
        const at::Tensor ah = a.clone().requires_grad_(true), bh = b.clone().requires_grad_(true);
        const at::Tensor oc = run(ac, bc), oh = run(ah, bh);
        EXPECT_TRUE(at::allclose(oc.cpu().to(at::kDouble), oh.to(at::kDouble), tol, tol)) << op << " " << dtype;
        const at::Tensor go = at::randn(oh.sizes()).to(dtype);
        oc.backward(go.cuda());
        oh.backward(go);
        EXPECT_TRUE(at::allclose(ac.grad().cpu().to(at::kDouble), ah.grad().to(at::kDouble), tol, tol))
            << op << " " << dtype;
        EXPECT_TRUE(at::allclose(bc.grad().cpu().to(at::kDouble), bh.grad().to(at::kDouble), tol, tol))
            << op << " " << dtype;
      }
    }
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry ca_weight_api{
    "mmops::ca_weight", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::ca_weight(a[0].toTensor(), a[1].toTensor())};
    }};
const mmops_test::CppApiEntry ca_map_api{
    "mmops::ca_map", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::ca_map(a[0].toTensor(), a[1].toTensor())};
    }};

} // namespace

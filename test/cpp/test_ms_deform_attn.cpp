// C++ face of mmops::ms_deform_attn: the public API, autograd from C++,
// known values, finite differences, errors, empty inputs, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

#include <cmath>
#include <vector>

namespace {

at::Tensor doubles(std::vector<double> values) {
  return at::tensor(values, at::kDouble);
}

// Level 0: 2 x 2 map [[1, 2], [3, 4]]; level 1: 1 x 1 map [10]; one head, one channel.
struct KnownCase {
  at::Tensor value = doubles({1, 2, 3, 4, 10}).reshape({1, 5, 1, 1});
  at::Tensor spatial_shapes = at::tensor({2, 2, 1, 1}, at::kLong).reshape({2, 2});
  at::Tensor level_start_index = at::tensor({0, 4}, at::kLong);
  // (x, y) in [0, 1]; pixel = u * size - 0.5: level 0 at (0.5, 0.5) and (0, 0),
  // level 1 at (0, 0) and (0.4, 0).
  at::Tensor sampling_locations = doubles({0.5, 0.5, 0.25, 0.25, 0.5, 0.5, 0.9, 0.5}).reshape({1, 1, 1, 2, 2, 2});
  at::Tensor attention_weights = doubles({2.0, 1.0, 0.5, 0.25}).reshape({1, 1, 1, 2, 2});
};

TEST(MsDeformAttn, KnownVectorForwardAndBackward) {
  KnownCase c;
  const at::Tensor value = c.value.clone().requires_grad_(true);
  const at::Tensor loc = c.sampling_locations.clone().requires_grad_(true);
  const at::Tensor attn = c.attention_weights.clone().requires_grad_(true);
  const at::Tensor out = mmops::ms_deform_attn(value, c.spatial_shapes, c.level_start_index, loc, attn);
  ASSERT_EQ(out.sizes(), (at::IntArrayRef{1, 1, 1}));
  // 2 * 2.5 + 1 * 1 + 0.5 * 10 + 0.25 * (0.6 * 10)
  EXPECT_NEAR(out.item<double>(), 12.5, 1e-13);
  out.sum().backward();
  EXPECT_TRUE(at::allclose(attn.grad().flatten(), doubles({2.5, 1.0, 10.0, 6.0}))) << attn.grad();
  EXPECT_TRUE(at::allclose(loc.grad().flatten(), doubles({4, 8, 2, 4, -5, -5, -2.5, -1.5}))) << loc.grad();
  EXPECT_TRUE(at::allclose(value.grad().flatten(), doubles({1.5, 0.5, 0.5, 0.5, 0.65}))) << value.grad();
}

TEST(MsDeformAttn, FiniteDifferences) {
  at::manual_seed(0);
  const int64_t B = 2, Q = 3, M = 2, D = 3, L = 2, P = 2;
  const at::Tensor spatial_shapes = at::tensor({3, 4, 2, 3}, at::kLong).reshape({L, 2});
  const at::Tensor level_start_index = at::tensor({0, 12}, at::kLong);
  const at::Tensor value = at::randn({B, 18, M, D}, at::kDouble);
  // pixel coordinates 0.15 .. 0.85 px past an integer from -1 to size - 1 (away from the kinks)
  at::Tensor loc = at::empty({B, Q, M, L, P, 2}, at::kDouble);
  const int64_t sizes[2][2] = {{4, 3}, {3, 2}}; // (W, H) per level
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t axis = 0; axis < 2; ++axis) {
      const int64_t size = sizes[l][axis];
      const at::Tensor base = at::randint(-1, size, {B, Q, M, P}, at::kDouble);
      const at::Tensor frac = 0.15 + 0.7 * at::rand({B, Q, M, P}, at::kDouble);
      loc.select(5, axis).select(3, l).copy_((base + frac + 0.5) / static_cast<double>(size));
    }
  }
  const at::Tensor attn = at::rand({B, Q, M, L, P}, at::kDouble);
  const at::Tensor weights = at::randn({B, Q, M * D}, at::kDouble);
  auto loss = [&](const at::Tensor& v, const at::Tensor& lo, const at::Tensor& a) {
    return (mmops::ms_deform_attn(v, spatial_shapes, level_start_index, lo, a) * weights).sum();
  };
  std::vector<at::Tensor> inputs = {value.clone().requires_grad_(true), loc.clone().requires_grad_(true),
                                    attn.clone().requires_grad_(true)};
  loss(inputs[0], inputs[1], inputs[2]).backward();
  const double eps = 1e-6;
  torch::NoGradGuard no_grad;
  for (size_t which = 0; which < inputs.size(); ++which) {
    const at::Tensor analytic = inputs[which].grad();
    ASSERT_TRUE(analytic.defined());
    for (int64_t i = 0; i < analytic.numel(); i += 3) {
      std::vector<at::Tensor> plus = {value.clone(), loc.clone(), attn.clone()};
      std::vector<at::Tensor> minus = {value.clone(), loc.clone(), attn.clone()};
      plus[which].view(-1)[i] += eps;
      minus[which].view(-1)[i] -= eps;
      const double numeric =
          (loss(plus[0], plus[1], plus[2]).item<double>() - loss(minus[0], minus[1], minus[2]).item<double>()) /
          (2 * eps);
      EXPECT_NEAR(analytic.view(-1)[i].item<double>(), numeric, 1e-6 * (1 + std::abs(numeric)))
          << "input " << which << " element " << i;
    }
  }
}

TEST(MsDeformAttn, EmptyBatchAndNonFiniteLocations) {
  KnownCase c;
  const at::Tensor value = c.value.clone().requires_grad_(true);
  const at::Tensor empty_loc = c.sampling_locations.slice(1, 0, 0).requires_grad_(true);
  const at::Tensor empty_attn = c.attention_weights.slice(1, 0, 0);
  const at::Tensor out = mmops::ms_deform_attn(value, c.spatial_shapes, c.level_start_index, empty_loc, empty_attn);
  EXPECT_EQ(out.sizes(), (at::IntArrayRef{1, 0, 1}));
  out.sum().backward();
  EXPECT_TRUE(at::equal(value.grad(), at::zeros_like(value)));
  // a NaN location is worth 0 and gets no gradient
  const at::Tensor loc = c.sampling_locations.clone();
  loc.view(-1)[0] = NAN;
  loc.view(-1)[5] = INFINITY;
  const at::Tensor lg = loc.clone().requires_grad_(true);
  const at::Tensor nan_out =
      mmops::ms_deform_attn(c.value, c.spatial_shapes, c.level_start_index, lg, c.attention_weights);
  EXPECT_NEAR(nan_out.item<double>(), 1.0 + 0.25 * 6.0, 1e-13); // only points 1 and 3 remain
  nan_out.sum().backward();
  EXPECT_TRUE(at::equal(lg.grad().flatten().slice(0, 0, 2), at::zeros({2}, at::kDouble))) << lg.grad();
  EXPECT_TRUE(at::equal(lg.grad().flatten().slice(0, 4, 6), at::zeros({2}, at::kDouble))) << lg.grad();
}

TEST(MsDeformAttn, ErrorsNameTheArgument) {
  KnownCase c;
  const at::Tensor& v = c.value;
  const at::Tensor& ss = c.spatial_shapes;
  const at::Tensor& st = c.level_start_index;
  const at::Tensor& lo = c.sampling_locations;
  const at::Tensor& a = c.attention_weights;
  EXPECT_ERROR_MENTIONS(mmops::ms_deform_attn(v[0], ss, st, lo, a), "expected value to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::ms_deform_attn(v, ss.to(at::kInt), st, lo, a), "spatial_shapes to be an int64 tensor");
  EXPECT_ERROR_MENTIONS(mmops::ms_deform_attn(v, ss, st, lo.to(at::kFloat), a),
                        "sampling_locations to have the dtype of value");
  EXPECT_ERROR_MENTIONS(mmops::ms_deform_attn(v, ss, st, lo, a.slice(4, 0, 1)), "attention_weights of shape");
  EXPECT_ERROR_MENTIONS(mmops::ms_deform_attn(v, ss, st.slice(0, 0, 1), lo, a), "one start per level");
  EXPECT_ERROR_MENTIONS(mmops::ms_deform_attn(v.slice(1, 0, 4), ss, st, lo, a), "cover value.size(1) = 4 rows");
  EXPECT_ERROR_MENTIONS(mmops::ms_deform_attn(v, ss, at::tensor({0, 3}, at::kLong), lo, a), "running sum of H * W");
  EXPECT_ERROR_MENTIONS(mmops::ms_deform_attn(v, at::tensor({2, -2, 1, 1}, at::kLong).reshape({2, 2}), st, lo, a),
                        "(H, W) >= 0");
}

TEST(MsDeformAttn, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device";
  }
  at::manual_seed(1);
  const at::Tensor spatial_shapes = at::tensor({6, 8, 3, 4}, at::kLong).reshape({2, 2});
  const at::Tensor level_start_index = at::tensor({0, 48}, at::kLong);
  const at::Tensor value = at::randn({2, 60, 4, 32});
  const at::Tensor loc = at::rand({2, 20, 4, 2, 4, 2}) * 1.2 - 0.1;
  const at::Tensor attn = at::rand({2, 20, 4, 2, 4});
  const at::Tensor go = at::randn({2, 20, 128});
  std::vector<at::Tensor> grads[2];
  at::Tensor outs[2];
  for (int d = 0; d < 2; ++d) {
    const at::Device device = d == 0 ? at::Device(at::kCPU) : at::Device(at::kCUDA);
    // detach(): fresh leaves on each device (value.to(kCPU) would alias the original)
    std::vector<at::Tensor> leaves = {value.detach().to(device).requires_grad_(true),
                                      loc.detach().to(device).requires_grad_(true),
                                      attn.detach().to(device).requires_grad_(true)};
    outs[d] =
        mmops::ms_deform_attn(leaves[0], spatial_shapes.to(device), level_start_index.to(device), leaves[1], leaves[2]);
    outs[d].backward(go.to(device));
    for (const at::Tensor& leaf : leaves) {
      grads[d].push_back(leaf.grad().cpu());
    }
  }
  EXPECT_TRUE(at::allclose(outs[1].cpu(), outs[0].detach(), 1e-5, 1e-5));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(at::allclose(grads[1][i], grads[0][i], 1e-5, i == 1 ? 1e-3 : 1e-5)) << "gradient " << i;
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry ms_deform_attn_api{
    "mmops::ms_deform_attn", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{
          mmops::ms_deform_attn(a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), a[3].toTensor(), a[4].toTensor())};
    }};

} // namespace

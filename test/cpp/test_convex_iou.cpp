// C++ face of mmops::convex_iou and mmops::convex_giou: the public API on
// mmcv's known vectors, a finite-difference check of convex_giou's gradient
// and autograd from C++, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

namespace {

at::Tensor mmcv_pointsets() {
  return at::tensor({1.0, 1.0, 2.0, 2.0, 1.0, 2.0, 2.0, 1.0, 1.0, 3.0, 3.0, 1.0, 2.0, 3.0, 3.0, 2.0, 1.5, 1.5,
                     1.5, 1.5, 2.5, 2.5, 1.5, 2.5, 2.5, 1.5, 1.5, 3.5, 3.5, 1.5, 2.5, 3.5, 3.5, 2.5, 2.0, 2.0})
      .reshape({2, 18});
}

at::Tensor mmcv_polygons() {
  return at::tensor({1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 3.0, 3.0, 3.0, 3.0, 1.0}).reshape({2, 8});
}

// Point sets around the centres of rotated rectangles, overlapping row by row.
std::pair<at::Tensor, at::Tensor> near_pairs(int64_t n) {
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor centre = at::rand({n, 1, 2}, f64) * 40.0;
  const at::Tensor sets = (centre + (at::rand({n, 9, 2}, f64) - 0.5) * 10.0).reshape({n, 18});
  const at::Tensor t = at::rand({n, 1}, f64) * 3.0;
  const at::Tensor w = at::rand({n, 1}, f64) * 8.0 + 2.0;
  const at::Tensor h = at::rand({n, 1}, f64) * 8.0 + 2.0;
  const at::Tensor u = at::cat({t.cos(), t.sin()}, 1) * w / 2;
  const at::Tensor v = at::cat({-t.sin(), t.cos()}, 1) * h / 2;
  const at::Tensor c = centre.squeeze(1) + at::randn({n, 2}, f64);
  return {sets, at::cat({c - u - v, c + u - v, c + u + v, c - u + v}, 1)};
}

TEST(ConvexIoU, MmcvKnownVectors) {
  const at::Tensor ious = mmops::convex_iou(mmcv_pointsets(), mmcv_polygons());
  EXPECT_TRUE(at::allclose(ious, at::tensor({0.2857, 0.8750, 0.0588, 0.4286}).reshape({2, 2}), 0.0, 1e-3)) << ious;
  const auto [giou, grad] = mmops::convex_giou(mmcv_pointsets(), mmcv_polygons());
  EXPECT_TRUE(at::allclose(giou, at::tensor({0.2857, 0.3831}), 0.0, 1e-3)) << giou;
  const at::Tensor row1 = at::tensor({-0.1848, -0.1848, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.1076, -0.0801, -0.0801,
                                      -0.1076, -0.0367, -0.0734, -0.0734, -0.0367, 0.0, 0.0});
  EXPECT_TRUE(at::allclose(grad[1], row1, 0.0, 1e-3)) << grad;
}

TEST(ConvexIoU, GIoUFiniteDifferenceGradient) {
  at::manual_seed(6);
  auto [sets, quads] = near_pairs(5);
  sets.requires_grad_(true);
  const at::Tensor w = at::randn({5}, at::kDouble);
  (std::get<0>(mmops::convex_giou(sets, quads)) * w).sum().backward();
  const double eps = 1e-6;
  const at::Tensor numeric = at::zeros_like(sets);
  for (int64_t k = 0; k < sets.numel(); ++k) {
    at::NoGradGuard no_grad;
    const double old = sets.view({-1})[k].item<double>();
    sets.view({-1})[k] = old + eps;
    const double plus = (std::get<0>(mmops::convex_giou(sets, quads)) * w).sum().item<double>();
    sets.view({-1})[k] = old - eps;
    const double minus = (std::get<0>(mmops::convex_giou(sets, quads)) * w).sum().item<double>();
    sets.view({-1})[k] = old;
    numeric.view({-1})[k] = (plus - minus) / (2 * eps);
  }
  EXPECT_TRUE(at::allclose(sets.grad(), numeric, 1e-5, 1e-7)) << sets.grad() << numeric;
}

TEST(ConvexIoU, EmptyAndErrors) {
  EXPECT_EQ(mmops::convex_iou(at::zeros({0, 18}), at::zeros({3, 8})).sizes(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(std::get<1>(mmops::convex_giou(at::zeros({0, 18}), at::zeros({0, 8}))).sizes(),
            (std::vector<int64_t>{0, 18}));
  EXPECT_ERROR_MENTIONS(mmops::convex_iou(at::zeros({2, 16}), at::zeros({3, 8})),
                        "expected pointsets to be a 2-D tensor of shape [N, 18]");
  EXPECT_ERROR_MENTIONS(mmops::convex_giou(at::zeros({2, 18}), at::zeros({3, 8})),
                        "expected as many polygons as pointsets");
  EXPECT_ERROR_MENTIONS(mmops::convex_iou(at::zeros({2, 18}), at::zeros({3, 8}, at::kDouble)),
                        "expected polygons to have the dtype of pointsets");
}

TEST(ConvexIoU, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(7);
  const auto [sets, quads] = near_pairs(2000);
  EXPECT_TRUE(at::allclose(mmops::convex_iou(sets.cuda(), quads.slice(0, 0, 100).cuda()).cpu(),
                           mmops::convex_iou(sets, quads.slice(0, 0, 100)), 1e-9, 1e-10));
  const auto [g, d] = mmops::convex_giou(sets.cuda(), quads.cuda());
  const auto [e, f] = mmops::convex_giou(sets, quads);
  EXPECT_TRUE(at::allclose(g.cpu(), e, 1e-9, 1e-10));
  EXPECT_TRUE(at::allclose(d.cpu(), f, 1e-9, 1e-10));
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry convex_iou_api{
    "mmops::convex_iou", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::convex_iou(a[0].toTensor(), a[1].toTensor())};
    }};

const mmops_test::CppApiEntry convex_giou_api{"mmops::convex_giou", [](const mmops_test::ApiArgs& a) {
                                                const auto [giou, grad] =
                                                    mmops::convex_giou(a[0].toTensor(), a[1].toTensor());
                                                return mmops_test::ApiOutputs{giou, grad};
                                              }};

} // namespace

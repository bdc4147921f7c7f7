// C++ face of mmops::border_align: the public API against a loop reference,
// mmcv's known vectors, autograd from C++, finite differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "test_support.h"

namespace {

// mmcv's bilinear rule on one axis: false when the point is worth 0.
bool axis(double coord, int64_t size, int64_t& lo, int64_t& hi, double& w_lo, double& w_hi) {
  if (!(coord >= -1.0 && coord <= static_cast<double>(size))) {
    return false;
  }
  coord = std::max(coord, 0.0);
  lo = static_cast<int64_t>(coord);
  if (lo >= size - 1) {
    lo = hi = size - 1;
    w_lo = 1.0;
    w_hi = 0.0;
    return true;
  }
  hi = lo + 1;
  w_hi = coord - static_cast<double>(lo);
  w_lo = 1.0 - w_hi;
  return true;
}

// The definition in double loops: border b of box k walks pool + 1 points from
// (x1, y1) (top, left) or (x2, y2) (bottom, right), each added step by step.
at::Tensor reference(const at::Tensor& x, const at::Tensor& boxes, int64_t pool) {
  const int64_t n_ = x.size(0), c_ = x.size(1) / 4, h = x.size(2), w = x.size(3), k_ = h * w;
  at::Tensor out = at::zeros({n_, c_, k_, 4}, at::kDouble);
  auto in = x.accessor<double, 4>();
  auto bx = boxes.accessor<double, 3>();
  auto o = out.accessor<double, 4>();
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t k = 0; k < k_; ++k)
      for (int b = 0; b < 4; ++b) {
        const double x1 = bx[n][k][0], y1 = bx[n][k][1], x2 = bx[n][k][2], y2 = bx[n][k][3];
        const bool horizontal = b == 0 || b == 2;
        double step = (horizontal ? x2 - x1 : y2 - y1) / static_cast<double>(pool);
        step = b < 2 ? step : -step;
        for (int64_t c = 0; c < c_; ++c) {
          double px = b < 2 ? x1 : x2, py = b < 2 ? y1 : y2;
          double best = 0.0;
          for (int64_t i = 0; i <= pool; ++i) {
            if (i > 0) {
              px += horizontal ? step : 0.0;
              py += horizontal ? 0.0 : step;
            }
            int64_t ylo, yhi, xlo, xhi;
            double hy, ly, hx, lx;
            double v = 0.0;
            if (axis(py, h, ylo, yhi, hy, ly) && axis(px, w, xlo, xhi, hx, lx)) {
              const int64_t ch = b * c_ + c;
              v = hy * hx * in[n][ch][ylo][xlo] + hy * lx * in[n][ch][ylo][xhi] + ly * hx * in[n][ch][yhi][xlo] +
                  ly * lx * in[n][ch][yhi][xhi];
            }
            if (i == 0 || v > best) {
              best = v;
            }
          }
          o[n][c][k][b] = best;
        }
      }
  return out;
}

// Boxes around every pixel with random sides, some past the map's edges.
at::Tensor detector_boxes(int64_t n, int64_t h, int64_t w) {
  const at::Tensor ys = at::arange(h, at::kDouble).view({h, 1}).expand({h, w}).reshape({1, h * w});
  const at::Tensor xs = at::arange(w, at::kDouble).view({1, w}).expand({h, w}).reshape({1, h * w});
  const at::Tensor cx = xs + at::rand({n, h * w}, at::kDouble) - 0.5;
  const at::Tensor cy = ys + at::rand({n, h * w}, at::kDouble) - 0.5;
  const at::Tensor bw = at::rand({n, h * w}, at::kDouble) * w * 0.8 + 0.3;
  const at::Tensor bh = at::rand({n, h * w}, at::kDouble) * h * 0.8 + 0.3;
  return at::stack({cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2}, -1);
}

TEST(BorderAlign, MatchesLoopReference) {
  at::manual_seed(0);
  for (const int64_t pool : {1, 3, 10}) {
    const at::Tensor x = at::randn({2, 12, 4, 5}, at::kDouble);
    const at::Tensor boxes = detector_boxes(2, 4, 5);
    const at::Tensor out = mmops::border_align(x, boxes, pool);
    EXPECT_EQ(out.sizes(), at::IntArrayRef({2, 3, 20, 4}));
    EXPECT_TRUE(at::allclose(out, reference(x, boxes, pool), 0, 1e-12)) << "pool " << pool;
  }
}

TEST(BorderAlign, MmcvKnownVectors) {
  // mmcv's tests/test_ops/test_border_align.py, pool_size 1 and 2
  const at::Tensor x = at::tensor({1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9.,  10., 11., 12., 6.,  7.,  5.,  8.,
                                   2.,  1.,  3.,  4.,  12., 9.,  11., 10., -2., -3., 2.,  0.,  -4., -5., 1.,  -1.,
                                   -1., -1., -1., -1., 0.,  -1., 2.,  1.,  -4., -3., -2., -1., -1., -2., -3., -4.},
                                  at::kDouble)
                           .view({1, 4, 3, 4});
  const at::Tensor boxes =
      at::tensor({0., 0., 2., 1., 1., 0., 3., 1., 1., 0., 2., 1., 0., 0., 3., 1., 0., 0., 1., 2., 0., 0., 2., 2.,
                  1., 0., 2., 1., 1., 0., 3., 1., 0., 1., 1., 2., 0., 0., 3., 2., 1., 0., 3., 2., 2., 0., 3., 2.},
                 at::kDouble)
          .view({1, 12, 4});
  const at::Tensor expected1 = at::tensor({3., 6.,  1.,  2.,  4., 7.,  -1., 1., 3., 7., 1.,  2., 4., 6.,  -1., 1.,
                                           2., 12., -1., -1., 3., 12., -1., 2., 3., 7., 1.,  2., 4., 7.,  -1., 1.,
                                           6., 12., -1., -2., 4., 12., -1., 1., 4., 9., -1., 1., 4., 11., -1., 1.},
                                          at::kDouble)
                                   .view({1, 1, 12, 4});
  const at::Tensor grad2 =
      at::tensor({0., 1., 4., 6., 0., 1., 0., 0., 0., 0., 0., 0., 2., 4., 0., 0., 0., 0., 0., 0., 4., 1., 1., 0.,
                  0., 0., 0., 0., 0., 0., 5., 1., 0., 2., 1., 3., 0., 1., 4., 6., 0., 0., 0., 0., 0., 1., 0., 0.},
                 at::kDouble)
          .view({1, 4, 3, 4});
  EXPECT_TRUE(at::equal(mmops::border_align(x, boxes, 1), expected1));
  const at::Tensor xg = x.clone().requires_grad_(true);
  mmops::border_align(xg, boxes, 2).sum().backward();
  EXPECT_TRUE(at::equal(xg.grad(), grad2));
}

TEST(BorderAlign, FiniteDifferences) {
  at::manual_seed(1);
  const at::Tensor x0 = at::randn({1, 8, 3, 4}, at::kDouble);
  const at::Tensor boxes = detector_boxes(1, 3, 4);
  const at::Tensor weights = at::randn({1, 2, 12, 4}, at::kDouble);
  mmops_test::expect_finite_differences(
      [&](const at::Tensor& x) { return (mmops::border_align(x, boxes, 4) * weights).sum(); }, x0, 3);
}

TEST(BorderAlign, EmptyInputs) {
  const at::Tensor x = at::randn({0, 8, 3, 4}).requires_grad_(true);
  const at::Tensor out = mmops::border_align(x, at::zeros({0, 12, 4}), 2);
  EXPECT_EQ(out.sizes(), at::IntArrayRef({0, 2, 12, 4}));
  out.sum().backward();
  EXPECT_EQ(x.grad().sizes(), x.sizes());
  const at::Tensor no_boxes = mmops::border_align(at::randn({2, 8, 0, 4}), at::zeros({2, 0, 4}), 2);
  EXPECT_EQ(no_boxes.sizes(), at::IntArrayRef({2, 2, 0, 4}));
}

TEST(BorderAlign, ErrorsNameTheArgument) {
  const at::Tensor x = at::randn({2, 8, 3, 4});
  const at::Tensor boxes = at::rand({2, 12, 4});
  EXPECT_ERROR_MENTIONS(mmops::border_align(x[0], boxes, 2), "expected input to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::border_align(x.narrow(1, 0, 6), boxes, 2), "a multiple of 4");
  EXPECT_ERROR_MENTIONS(mmops::border_align(x, boxes.narrow(1, 0, 11), 2), "H * W = 12 boxes per image");
  EXPECT_ERROR_MENTIONS(mmops::border_align(x, boxes.narrow(2, 0, 3), 2), "expected boxes of shape");
  EXPECT_ERROR_MENTIONS(mmops::border_align(x, boxes.to(at::kDouble), 2), "expected boxes to have the dtype");
  EXPECT_ERROR_MENTIONS(mmops::border_align(x, boxes, 0), "expected pool_size in [1, 65536]");
  EXPECT_ERROR_MENTIONS(mmops::border_align(x.to(at::kInt), boxes, 2), "floating point dtype");
}

TEST(BorderAlign, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(2);
  // 7 channels: the NCHW kernel; 128: the channels-last one
  for (const int64_t channels : {7, 128}) {
    const at::Tensor x0 = at::randn({2, 4 * channels, 9, 70});
    const at::Tensor boxes0 = detector_boxes(2, 9, 70);
    for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
      const at::Tensor boxes = boxes0.to(dtype);
      const at::Tensor xc = x0.to(dtype).cuda().detach().requires_grad_(true);
      const at::Tensor xh = x0.to(dtype).detach().requires_grad_(true);
      const at::Tensor oc = mmops::border_align(xc, boxes.cuda(), 10), oh = mmops::border_align(xh, boxes, 10);
      EXPECT_TRUE(at::equal(oc.cpu(), oh)) << channels << " " << dtype; // the same arithmetic on both devices
      const at::Tensor go = at::randn(oh.sizes()).to(dtype);
      oc.backward(go.cuda());
      oh.backward(go);
      const double tol = dtype == at::kDouble ? 1e-10 : (dtype == at::kFloat ? 1e-5 : 5e-2);
      EXPECT_TRUE(xc.grad().cpu().to(at::kDouble).allclose(xh.grad().to(at::kDouble), tol, tol))
          << channels << " " << dtype;
    }
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry border_align_api{
    "mmops::border_align", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::border_align(a[0].toTensor(), a[1].toTensor(), a[2].toInt())};
    }};

} // namespace

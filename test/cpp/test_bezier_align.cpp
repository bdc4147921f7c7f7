// C++ face of mmops::bezier_align: the public API against a loop reference, mmcv's
// known vectors, the straight-line Bezier against roi_align, autograd from C++,
// finite differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "test_support.h"

namespace {

// mmcv's bilinear rule on one axis: false when the sample is worth 0.
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

double cubic(const double* p, double u) {
  const double s = 1.0 - u;
  return s * s * s * p[0] + 3 * u * s * s * p[1] + 3 * u * u * s * p[2] + u * u * u * p[3];
}

// The definition in double loops (aligned, a fixed sampling ratio).
at::Tensor reference(const at::Tensor& x, const at::Tensor& rois, int64_t ph_n, int64_t pw_n, double scale, int g) {
  const int64_t c_n = x.size(1), h = x.size(2), w = x.size(3);
  at::Tensor out = at::zeros({rois.size(0), c_n, ph_n, pw_n}, at::kDouble);
  auto in = x.accessor<double, 4>();
  auto r = rois.accessor<double, 2>();
  auto o = out.accessor<double, 4>();
  for (int64_t k = 0; k < rois.size(0); ++k) {
    double tx[4], ty[4], bx[4], by[4];
    for (int i = 0; i < 4; ++i) {
      tx[i] = r[k][1 + 2 * i] * scale;
      ty[i] = r[k][2 + 2 * i] * scale;
      bx[i] = r[k][15 - 2 * i] * scale;
      by[i] = r[k][16 - 2 * i] * scale;
    }
    const double bin_w = std::max(std::abs(tx[0] - tx[3]), std::abs(bx[0] - bx[3])) / pw_n;
    const double bin_h = std::max(std::abs(ty[0] - ty[3]), std::abs(by[0] - by[3])) / ph_n;
    const int64_t b = static_cast<int64_t>(r[k][0]);
    for (int64_t ph = 0; ph < ph_n; ++ph)
      for (int64_t pw = 0; pw < pw_n; ++pw) {
        const double u = static_cast<double>(pw) / pw_n, v = static_cast<double>(ph) / ph_n;
        const double cx = cubic(bx, u) * v + cubic(tx, u) * (1 - v) - 0.5;
        const double cy = cubic(by, u) * v + cubic(ty, u) * (1 - v) - 0.5;
        for (int64_t c = 0; c < c_n; ++c) {
          double sum = 0.0;
          for (int iy = 0; iy < g; ++iy)
            for (int ix = 0; ix < g; ++ix) {
              const double sy = cy - 0.5 * bin_h + (iy + 0.5) * bin_h / g;
              const double sx = cx - 0.5 * bin_w + (ix + 0.5) * bin_w / g;
              int64_t ylo, yhi, xlo, xhi;
              double hy, ly, hx, lx;
              if (axis(sy, h, ylo, yhi, hy, ly) && axis(sx, w, xlo, xhi, hx, lx)) {
                sum += hy * hx * in[b][c][ylo][xlo] + hy * lx * in[b][c][ylo][xhi] + ly * hx * in[b][c][yhi][xlo] +
                       ly * lx * in[b][c][yhi][xhi];
              }
            }
          o[k][c][ph][pw] = sum / (g * g);
        }
      }
  }
  return out;
}

// Curved text lines over an h x w map: arcs with the bottom curve stored right to left.
at::Tensor text_rois(int64_t k, int64_t batch, int64_t h, int64_t w) {
  std::vector<double> values;
  const at::Tensor u = at::rand({k, 5}, at::kDouble);
  auto a = u.accessor<double, 2>();
  for (int64_t i = 0; i < k; ++i) {
    const double len = (0.2 + 0.6 * a[i][0]) * w, height = (0.1 + 0.2 * a[i][1]) * h;
    const double x0 = a[i][2] * (w - len), y0 = a[i][3] * (h - height), bend = (a[i][4] - 0.5) * height;
    const double xs[4] = {x0, x0 + len / 3, x0 + 2 * len / 3, x0 + len};
    const double slant = (a[i][4] - 0.3) * height; // roi_h (the ends' vertical distance) > 0
    const double ys[4] = {y0, y0 + bend + slant / 3, y0 + bend + 2 * slant / 3, y0 + slant};
    values.push_back(static_cast<double>(i % batch));
    for (int j = 0; j < 4; ++j) {
      values.push_back(xs[j]);
      values.push_back(ys[j]);
    }
    for (int j = 3; j >= 0; --j) {
      values.push_back(xs[j]);
      values.push_back(ys[j] + height);
    }
  }
  return at::tensor(values, at::kDouble).view({k, 17});
}

TEST(BezierAlign, MatchesLoopReference) {
  at::manual_seed(0);
  for (const int g : {1, 2, 3}) {
    const at::Tensor x = at::randn({2, 3, 12, 20}, at::kDouble);
    const at::Tensor rois = text_rois(5, 2, 24, 40);
    const at::Tensor out = mmops::bezier_align(x, rois, {4, 8}, 0.5, g, true);
    EXPECT_EQ(out.sizes(), at::IntArrayRef({5, 3, 4, 8}));
    EXPECT_TRUE(at::allclose(out, reference(x, rois, 4, 8, 0.5, g), 1e-12, 1e-12)) << "grid " << g;
  }
}

TEST(BezierAlign, MmcvKnownVectors) {
  // mmcv's tests/test_ops/test_bezier_align.py: output (4, 4), scale 1, sampling_ratio 1, not aligned
  const at::Tensor x = at::tensor({1., 2., 5., 6., 3., 4., 7., 8., 9., 10., 13., 14., 11., 12., 15., 16.}, at::kDouble)
                           .view({1, 1, 4, 4})
                           .requires_grad_(true);
  const at::Tensor rois =
      at::tensor({0., 0., 0., 1., 0., 2., 0., 3., 0., 3., 3., 2., 3., 1., 3., 0., 3.}, at::kDouble).view({1, 17});
  const at::Tensor out = mmops::bezier_align(x, rois, {4, 4}, 1.0, 1, false);
  const at::Tensor expected =
      at::tensor({1., 1.75, 3.5, 5.25, 2.5, 3.25, 5., 6.75, 6., 6.75, 8.5, 10.25, 9.5, 10.25, 12., 13.75}, at::kDouble)
          .view({1, 1, 4, 4});
  EXPECT_TRUE(at::equal(out, expected));
  out.sum().backward();
  const at::Tensor grad = at::tensor({1.5625, 1.5625, 1.5625, 0.3125, 1.5625, 1.5625, 1.5625, 0.3125, 1.5625, 1.5625,
                                      1.5625, 0.3125, 0.3125, 0.3125, 0.3125, 0.0625},
                                     at::kDouble)
                              .view({1, 1, 4, 4});
  EXPECT_TRUE(at::equal(x.grad(), grad));
}

TEST(BezierAlign, StraightLineIsHalfBinShiftedRoiAlign) {
  at::manual_seed(3);
  const at::Tensor x = at::randn({1, 2, 10, 12}, at::kDouble);
  // box (2, 1) - (9, 7), bins 7 / 4 wide, 6 / 3 high, one sample per bin: roi_align of the box
  // moved by half a bin
  const at::Tensor rois = at::tensor({0., 2., 1., 2. + 7. / 3, 1., 2. + 14. / 3, 1., 9., 1., 9., 7., 2. + 14. / 3, 7.,
                                      2. + 7. / 3, 7., 2., 7.},
                                     at::kDouble)
                              .view({1, 17});
  const at::Tensor box = at::tensor({0., 2. - 7. / 8, 0., 9. - 7. / 8, 6.}, at::kDouble).view({1, 5});
  EXPECT_TRUE(at::allclose(mmops::bezier_align(x, rois, {3, 4}, 1.0, 1, true),
                           mmops::roi_align(x, box, {3, 4}, 1.0, 1, "avg", true), 1e-12, 1e-12));
}

TEST(BezierAlign, FiniteDifferences) {
  at::manual_seed(1);
  const at::Tensor x0 = at::randn({2, 2, 6, 8}, at::kDouble);
  const at::Tensor rois = text_rois(3, 2, 6, 8);
  const at::Tensor weights = at::randn({3, 2, 2, 4}, at::kDouble);
  mmops_test::expect_finite_differences(
      [&](const at::Tensor& x) {
        return (mmops::bezier_align(x, rois, {2, 4}, 1.0, 0, true) * weights).sum();
      },
      x0, 3);
}

TEST(BezierAlign, EmptyInputs) {
  const at::Tensor x = at::randn({2, 3, 4, 5}).requires_grad_(true);
  const at::Tensor out = mmops::bezier_align(x, at::zeros({0, 17}), {2, 3});
  EXPECT_EQ(out.sizes(), at::IntArrayRef({0, 3, 2, 3}));
  out.sum().backward();
  EXPECT_EQ(x.grad().sizes(), x.sizes());
  EXPECT_TRUE(at::equal(x.grad(), at::zeros_like(x)));
  const at::Tensor no_channels =
      mmops::bezier_align(at::randn({2, 0, 4, 5}), text_rois(2, 2, 4, 5).to(at::kFloat), {2, 3});
  EXPECT_EQ(no_channels.sizes(), at::IntArrayRef({2, 0, 2, 3}));
}

TEST(BezierAlign, ErrorsNameTheArgument) {
  const at::Tensor x = at::randn({2, 3, 6, 8});
  const at::Tensor rois = text_rois(3, 2, 6, 8).to(at::kFloat);
  EXPECT_ERROR_MENTIONS(mmops::bezier_align(x[0], rois, {2, 2}), "expected input to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::bezier_align(x, rois.narrow(1, 0, 5), {2, 2}), "expected rois of shape [K, 17]");
  EXPECT_ERROR_MENTIONS(mmops::bezier_align(x, rois[0], {2, 2}), "expected rois to be a 2-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::bezier_align(x, rois.to(at::kDouble), {2, 2}), "expected rois to have the dtype");
  EXPECT_ERROR_MENTIONS(mmops::bezier_align(x, rois, {0, 2}), "output_size");
  EXPECT_ERROR_MENTIONS(mmops::bezier_align(x, rois, {2, 2}, -1.0), "spatial_scale");
  EXPECT_ERROR_MENTIONS(mmops::bezier_align(x, rois, {2, 2}, 1.0, 1000), "sampling_ratio must be at most 512");
  EXPECT_ERROR_MENTIONS(mmops::bezier_align(x.to(at::kInt), rois.to(at::kInt), {2, 2}), "floating point dtype");
  at::Tensor bad = rois.clone();
  bad[1][0] = 5.0;
  EXPECT_ERROR_MENTIONS(mmops::bezier_align(x, bad, {2, 2}), "batch index");
}

TEST(BezierAlign, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(2);
  const at::Tensor x0 = at::randn({2, 40, 16, 30});
  const at::Tensor rois = text_rois(20, 2, 16, 30);
  mmops_test::expect_cuda_matches_cpu(
      [](const at::Tensor& x, const at::Tensor& r) {
        return mmops::bezier_align(x, r, {8, 32}, 1.0, 2, true);
      },
      x0, rois);
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry bezier_align_api{
    "mmops::bezier_align", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::bezier_align(a[0].toTensor(), a[1].toTensor(), a[2].toIntVector(),
                                                        a[3].toDouble(), a[4].toInt(), a[5].toBool())};
    }};

} // namespace

// CPU kernels of convex_iou (hulls and quadrilaterals prepared once, then
// at::parallel_for over the point sets) and convex_giou (over the rows).

#include "convex_iou/convex_iou_kernels.h"
#include "convex_iou/convex_iou_load.h"
#include "convex_iou/convex_iou_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <vector>

namespace mmops {
namespace kernels {

using convex_iou_math::kPoints;
using convex_iou_math::load_points;
using polygon::Point;

at::Tensor convex_iou_cpu(const at::Tensor& pointsets, const at::Tensor& polygons) {
  const at::Tensor p = pointsets.contiguous();
  const at::Tensor q = polygons.contiguous();
  const int64_t n = p.size(0);
  const int64_t k = q.size(0);
  at::Tensor out = at::empty({n, k}, p.options());
  if (out.numel() == 0) {
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.scalar_type(), "mmops::convex_iou (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    std::vector<convex_iou_math::Quad<acc_t>> quads(k);
    for (int64_t j = 0; j < k; ++j) {
      Point<acc_t> c[4];
      load_points<4>(q.const_data_ptr<scalar_t>(), j, c);
      quads[j] = convex_iou_math::make_quad(c);
    }
    const scalar_t* in = p.const_data_ptr<scalar_t>();
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, n, std::max<int64_t>(1, 2048 / k), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        Point<acc_t> pts[kPoints];
        load_points<kPoints>(in, i, pts);
        const convex_iou_math::Hull<acc_t> h = convex_iou_math::make_hull(pts);
        for (int64_t j = 0; j < k; ++j) {
          o[i * k + j] = static_cast<scalar_t>(convex_iou_math::hull_quad_iou(h, quads[j]));
        }
      }
    });
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor> convex_giou_cpu(const at::Tensor& pointsets, const at::Tensor& polygons) {
  const at::Tensor p = pointsets.contiguous();
  const at::Tensor q = polygons.contiguous();
  const int64_t n = p.size(0);
  at::Tensor giou = at::empty({n}, p.options());
  at::Tensor grad = at::empty({n, 2 * kPoints}, p.options());
  if (n == 0) {
    return {giou, grad};
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.scalar_type(), "mmops::convex_giou (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* in = p.const_data_ptr<scalar_t>();
    const scalar_t* poly = q.const_data_ptr<scalar_t>();
    scalar_t* go = giou.mutable_data_ptr<scalar_t>();
    scalar_t* gr = grad.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, n, 256, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        Point<acc_t> pts[kPoints];
        Point<acc_t> c[4];
        load_points<kPoints>(in, i, pts);
        load_points<4>(poly, i, c);
        acc_t g[2 * kPoints];
        go[i] = static_cast<scalar_t>(convex_iou_math::convex_giou(pts, c, g));
        for (int t = 0; t < 2 * kPoints; ++t) {
          gr[i * 2 * kPoints + t] = static_cast<scalar_t>(g[t]);
        }
      }
    });
  });
  return {giou, grad};
}

} // namespace kernels
} // namespace mmops

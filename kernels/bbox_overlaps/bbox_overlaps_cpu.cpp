// CPU kernels of bbox_overlaps: at::parallel_for over the rows of bboxes1 (and,
// for the gradient of bboxes2, over its rows). The forward loops are the
// branch-free form of box_iou::overlap (the same operations in the same order,
// so the results are box_iou's bit for bit) over coordinate columns, which the
// compiler vectorises.

#include "bbox_overlaps/bbox_overlaps_kernels.h"
#include "bbox_overlaps/bbox_overlaps_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <tuple>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using bbox_overlaps_math::Box;
using bbox_overlaps_math::load_box;

// Rows per task: about 16k pairs.
int64_t pair_grain(int64_t others) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(others, 1));
}

// Gradient of every box of bboxes1 (kFirst) or bboxes2 from all pairs: box by
// box, one sum over the other set in index order (the pairs are recomputed;
// no shared accumulators).
template <bool kFirst, typename scalar_t, typename acc_t>
void all_pairs_backward(const scalar_t* grad, const scalar_t* b1, const scalar_t* b2, int64_t m, int64_t n,
                        acc_t offset, bool iof, scalar_t* out) {
  const int64_t count = kFirst ? m : n;
  const int64_t others = kFirst ? n : m;
  at::parallel_for(0, count, pair_grain(others), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      box_iou::store_box(out, i,
                         bbox_overlaps_math::pair_gradient_sum<kFirst>(grad, b1, b2, m, n, i, 0, 1, offset, iof));
    }
  });
}

// The coordinates of a box set as columns, with box_iou::box_area's areas (NaN: a non-finite box).
template <typename acc_t>
struct BoxColumns {
  std::vector<acc_t> x1, y1, x2, y2, area;
};

template <typename scalar_t, typename acc_t>
BoxColumns<acc_t> box_columns(const scalar_t* boxes, int64_t count, acc_t offset) {
  BoxColumns<acc_t> c{std::vector<acc_t>(count), std::vector<acc_t>(count), std::vector<acc_t>(count),
                      std::vector<acc_t>(count), std::vector<acc_t>(count)};
  for (int64_t j = 0; j < count; ++j) {
    const Box<acc_t> b = load_box<scalar_t, acc_t>(boxes, j);
    c.x1[j] = b.x1;
    c.y1[j] = b.y1;
    c.x2[j] = b.x2;
    c.y2[j] = b.y2;
    c.area[j] = box_iou::box_area(b, offset);
  }
  return c;
}

// box_iou::overlap without branches (a NaN area: 0); kIof a template
// argument, so that the loops calling it have no control flow.
template <bool kIof, typename acc_t>
inline acc_t overlap_of(acc_t ax1, acc_t ay1, acc_t ax2, acc_t ay2, acc_t area_a, acc_t bx1, acc_t by1, acc_t bx2,
                        acc_t by2, acc_t area_b, acc_t offset) {
  const acc_t w = (ax2 < bx2 ? ax2 : bx2) - (ax1 > bx1 ? ax1 : bx1) + offset;
  const acc_t h = (ay2 < by2 ? ay2 : by2) - (ay1 > by1 ? ay1 : by1) + offset;
  const acc_t inter = (w > acc_t(0) ? w : acc_t(0)) * (h > acc_t(0) ? h : acc_t(0));
  acc_t base = kIof ? area_a : area_a + area_b - inter;
  base = base < offset ? offset : base;
  const bool defined = (area_a == area_a) & (area_b == area_b) & (base > acc_t(0));
  const acc_t value = inter / (defined ? base : acc_t(1));
  return defined ? value : acc_t(0);
}

// out[j] = overlap of box a with box j of the columns, j < count.
template <bool kIof, typename scalar_t, typename acc_t>
void overlap_row(const Box<acc_t>& a, acc_t area_a, const BoxColumns<acc_t>& b, int64_t count, acc_t offset,
                 scalar_t* __restrict__ out) {
  const acc_t* __restrict__ x1 = b.x1.data();
  const acc_t* __restrict__ y1 = b.y1.data();
  const acc_t* __restrict__ x2 = b.x2.data();
  const acc_t* __restrict__ y2 = b.y2.data();
  const acc_t* __restrict__ area = b.area.data();
  for (int64_t j = 0; j < count; ++j) {
    out[j] = static_cast<scalar_t>(
        overlap_of<kIof>(a.x1, a.y1, a.x2, a.y2, area_a, x1[j], y1[j], x2[j], y2[j], area[j], offset));
  }
}

// out[i] = overlap of box i of a with box i of b, i in [begin, end).
template <bool kIof, typename scalar_t, typename acc_t>
void overlap_pairs(const BoxColumns<acc_t>& a, const BoxColumns<acc_t>& b, int64_t begin, int64_t end, acc_t offset,
                   scalar_t* __restrict__ out) {
  const acc_t* __restrict__ ax1 = a.x1.data(), * __restrict__ ay1 = a.y1.data();
  const acc_t* __restrict__ ax2 = a.x2.data(), * __restrict__ ay2 = a.y2.data(), * __restrict__ aa = a.area.data();
  const acc_t* __restrict__ bx1 = b.x1.data(), * __restrict__ by1 = b.y1.data();
  const acc_t* __restrict__ bx2 = b.x2.data(), * __restrict__ by2 = b.y2.data(), * __restrict__ ba = b.area.data();
  for (int64_t i = begin; i < end; ++i) {
    out[i] = static_cast<scalar_t>(
        overlap_of<kIof>(ax1[i], ay1[i], ax2[i], ay2[i], aa[i], bx1[i], by1[i], bx2[i], by2[i], ba[i], offset));
  }
}

} // namespace

at::Tensor bbox_overlaps_cpu(const at::Tensor& bboxes1, const at::Tensor& bboxes2, const BBoxOverlapsParams& p) {
  const ForwardArgs a = forward_args(bboxes1, bboxes2, p);
  if (a.out.numel() == 0) {
    return a.out;
  }
  const int64_t m = a.bboxes1.size(0);
  const int64_t n = a.bboxes2.size(0);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.bboxes1.scalar_type(), "mmops::bbox_overlaps (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const acc_t offset = static_cast<acc_t>(p.offset);
    const scalar_t* b1 = a.bboxes1.const_data_ptr<scalar_t>();
    const scalar_t* b2 = a.bboxes2.const_data_ptr<scalar_t>();
    scalar_t* o = a.out.mutable_data_ptr<scalar_t>();
    const bool iof = p.iof;
    const BoxColumns<acc_t> second = box_columns<scalar_t, acc_t>(b2, n, offset);
    if (p.aligned) {
      const BoxColumns<acc_t> first = box_columns<scalar_t, acc_t>(b1, m, offset);
      at::parallel_for(0, m, 2048, [&](int64_t begin, int64_t end) {
        iof ? overlap_pairs<true, scalar_t>(first, second, begin, end, offset, o)
            : overlap_pairs<false, scalar_t>(first, second, begin, end, offset, o);
      });
      return;
    }
    at::parallel_for(0, m, pair_grain(n), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const Box<acc_t> a = load_box<scalar_t, acc_t>(b1, i);
        const acc_t area_a = box_iou::box_area(a, offset);
        iof ? overlap_row<true, scalar_t>(a, area_a, second, n, offset, o + i * n)
            : overlap_row<false, scalar_t>(a, area_a, second, n, offset, o + i * n);
      }
    });
  });
  return a.out;
}

std::tuple<at::Tensor, at::Tensor> bbox_overlaps_backward_cpu(const at::Tensor& grad_output, const at::Tensor& bboxes1,
                                                              const at::Tensor& bboxes2, const BBoxOverlapsParams& p) {
  const BackwardArgs a = backward_args(grad_output, bboxes1, bboxes2);
  const int64_t m = a.bboxes1.size(0);
  const int64_t n = a.bboxes2.size(0);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, a.bboxes1.scalar_type(), "mmops::bbox_overlaps backward (CPU)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const acc_t offset = static_cast<acc_t>(p.offset);
        const scalar_t* b1 = a.bboxes1.const_data_ptr<scalar_t>();
        const scalar_t* b2 = a.bboxes2.const_data_ptr<scalar_t>();
        const scalar_t* g = a.grad_output.const_data_ptr<scalar_t>();
        scalar_t* g1 = a.grad1.mutable_data_ptr<scalar_t>();
        scalar_t* g2 = a.grad2.mutable_data_ptr<scalar_t>();
        if (p.aligned) {
          at::parallel_for(0, m, 2048, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
              bbox_overlaps_math::aligned_overlap_backward(g, b1, b2, i, offset, p.iof, g1, g2);
            }
          });
          return;
        }
        all_pairs_backward<true>(g, b1, b2, m, n, offset, p.iof, g1);
        all_pairs_backward<false>(g, b1, b2, m, n, offset, p.iof, g2);
      });
  return {a.grad1, a.grad2};
}

} // namespace kernels
} // namespace mmops

// CPU kernels of bbox_overlaps: at::parallel_for over the rows of bboxes1 (and,
// for the gradient of bboxes2, over its rows).

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
    if (p.aligned) {
      at::parallel_for(0, m, 2048, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          o[i] = bbox_overlaps_math::aligned_overlap(b1, b2, i, offset, p.iof);
        }
      });
      return;
    }
    std::vector<Box<acc_t>> second(n);
    std::vector<acc_t> second_area(n);
    for (int64_t j = 0; j < n; ++j) {
      second[j] = load_box<scalar_t, acc_t>(b2, j);
      second_area[j] = box_iou::box_area(second[j], offset);
    }
    at::parallel_for(0, m, pair_grain(n), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const Box<acc_t> first = load_box<scalar_t, acc_t>(b1, i);
        const acc_t first_area = box_iou::box_area(first, offset);
        scalar_t* row = o + i * n;
        for (int64_t j = 0; j < n; ++j) {
          row[j] = static_cast<scalar_t>(box_iou::overlap(first, second[j], first_area, second_area[j], offset, p.iof));
        }
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

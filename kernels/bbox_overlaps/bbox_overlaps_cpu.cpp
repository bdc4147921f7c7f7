// CPU kernel of bbox_overlaps: at::parallel_for over the rows of bboxes1.

#include "bbox_overlaps/bbox_overlaps_kernels.h"
#include "common/box_iou.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <tuple>
#include <vector>

namespace mmops {
namespace kernels {

at::Tensor bbox_overlaps_cpu(const at::Tensor& bboxes1_in, const at::Tensor& bboxes2_in,
                             const BBoxOverlapsParams& p) {
  const int64_t m = bboxes1_in.size(0);
  const int64_t n = bboxes2_in.size(0);
  at::Tensor out = p.aligned ? at::empty({m}, bboxes1_in.options()) : at::empty({m, n}, bboxes1_in.options());
  if (out.numel() == 0) {
    return out;
  }
  const at::Tensor bboxes1 = bboxes1_in.contiguous();
  const at::Tensor bboxes2 = bboxes2_in.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, bboxes1.scalar_type(), "mmops::bbox_overlaps (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    using box_iou::Box;
    const acc_t offset = static_cast<acc_t>(p.offset);
    auto load = box_iou::load_box<scalar_t, acc_t>;
    const scalar_t* b1 = bboxes1.const_data_ptr<scalar_t>();
    const scalar_t* b2 = bboxes2.const_data_ptr<scalar_t>();
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    if (p.aligned) {
      at::parallel_for(0, m, 2048, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const Box<acc_t> a = load(b1, i);
          const Box<acc_t> b = load(b2, i);
          o[i] = static_cast<scalar_t>(box_iou::overlap(a, b, box_iou::box_area(a, offset),
                                                        box_iou::box_area(b, offset), offset, p.iof));
        }
      });
      return;
    }
    std::vector<Box<acc_t>> second(n);
    std::vector<acc_t> second_area(n);
    for (int64_t j = 0; j < n; ++j) {
      second[j] = load(b2, j);
      second_area[j] = box_iou::box_area(second[j], offset);
    }
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1));
    at::parallel_for(0, m, grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const Box<acc_t> a = load(b1, i);
        const acc_t area_a = box_iou::box_area(a, offset);
        scalar_t* row = o + i * n;
        for (int64_t j = 0; j < n; ++j) {
          row[j] = static_cast<scalar_t>(box_iou::overlap(a, second[j], area_a, second_area[j], offset, p.iof));
        }
      }
    });
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor> bbox_overlaps_backward_cpu(const at::Tensor& grad_output,
                                                              const at::Tensor& bboxes1_in,
                                                              const at::Tensor& bboxes2_in,
                                                              const BBoxOverlapsParams& p) {
  const int64_t m = bboxes1_in.size(0);
  const int64_t n = bboxes2_in.size(0);
  at::Tensor grad1 = at::empty({m, 4}, bboxes1_in.options());
  at::Tensor grad2 = at::empty({n, 4}, bboxes2_in.options());
  const at::Tensor bboxes1 = bboxes1_in.contiguous();
  const at::Tensor bboxes2 = bboxes2_in.contiguous();
  const at::Tensor grad = grad_output.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, bboxes1.scalar_type(),
                                  "mmops::bbox_overlaps backward (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    using box_iou::Box;
    const acc_t offset = static_cast<acc_t>(p.offset);
    auto load = box_iou::load_box<scalar_t, acc_t>;
    auto store = box_iou::store_box<scalar_t, acc_t>;
    const scalar_t* b1 = bboxes1.const_data_ptr<scalar_t>();
    const scalar_t* b2 = bboxes2.const_data_ptr<scalar_t>();
    const scalar_t* g = grad.const_data_ptr<scalar_t>();
    scalar_t* g1 = grad1.mutable_data_ptr<scalar_t>();
    scalar_t* g2 = grad2.mutable_data_ptr<scalar_t>();
    if (p.aligned) {
      at::parallel_for(0, m, 2048, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          Box<acc_t> ga{0, 0, 0, 0};
          Box<acc_t> gb{0, 0, 0, 0};
          box_iou::overlap_backward(load(b1, i), load(b2, i), offset, p.iof, static_cast<acc_t>(g[i]), ga, gb);
          store(g1, i, ga);
          store(g2, i, gb);
        }
      });
      return;
    }
    // grad of bboxes1: row i sums over the columns; grad of bboxes2: column j
    // sums over the rows (the pairs are recomputed; no shared accumulators).
    const int64_t grain1 = std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1));
    at::parallel_for(0, m, grain1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const Box<acc_t> a = load(b1, i);
        Box<acc_t> ga{0, 0, 0, 0};
        for (int64_t j = 0; j < n; ++j) {
          Box<acc_t> unused{0, 0, 0, 0};
          box_iou::overlap_backward(a, load(b2, j), offset, p.iof, static_cast<acc_t>(g[i * n + j]), ga, unused);
        }
        store(g1, i, ga);
      }
    });
    const int64_t grain2 = std::max<int64_t>(1, 16384 / std::max<int64_t>(m, 1));
    at::parallel_for(0, n, grain2, [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) {
        const Box<acc_t> b = load(b2, j);
        Box<acc_t> gb{0, 0, 0, 0};
        for (int64_t i = 0; i < m; ++i) {
          Box<acc_t> unused{0, 0, 0, 0};
          box_iou::overlap_backward(load(b1, i), b, offset, p.iof, static_cast<acc_t>(g[i * n + j]), unused, gb);
        }
        store(g2, j, gb);
      }
    });
  });
  return {grad1, grad2};
}

} // namespace kernels
} // namespace mmops

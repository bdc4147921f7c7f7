// CPU kernel of boxes_overlap_bev and boxes_iou_bev: every box of boxes_b is
// loaded once, then at::parallel_for over the rows of boxes_a.

#include "iou3d/iou3d_kernels.h"
#include "iou3d/iou3d_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

template <typename scalar_t>
void overlaps_cpu(const at::Tensor& a, const at::Tensor& b, const BevOverlapParams& p, at::Tensor& out) {
  using T = at::opmath_type<scalar_t>;
  const int64_t n = a.size(0), m = b.size(0);
  const int64_t cols_a = a.size(1), cols_b = b.size(1);
  const scalar_t* pa = a.const_data_ptr<scalar_t>();
  const scalar_t* pb = b.const_data_ptr<scalar_t>();
  scalar_t* o = out.mutable_data_ptr<scalar_t>();
  std::vector<bev::Shape<T>> columns(static_cast<size_t>(m));
  at::parallel_for(0, m, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      columns[j] = bev::load_box<scalar_t, T>(pb + j * cols_b, p.xyxyr);
    }
  });
  // About 4096 pairs per task.
  at::parallel_for(0, n, std::max<int64_t>(1, 4096 / m), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const bev::Shape<T> row = bev::load_box<scalar_t, T>(pa + i * cols_a, p.xyxyr);
      scalar_t* dst = o + i * m;
      for (int64_t j = 0; j < m; ++j) {
        dst[j] = static_cast<scalar_t>(bev::overlap(row, columns[j], p.iou));
      }
    }
  });
}

} // namespace

at::Tensor bev_overlaps_cpu(const at::Tensor& boxes_a, const at::Tensor& boxes_b, const BevOverlapParams& p) {
  at::Tensor out = at::empty_symint(bev_overlaps_shape(boxes_a, boxes_b), boxes_a.options());
  if (out.numel() == 0) {
    return out;
  }
  const at::Tensor a = boxes_a.contiguous();
  const at::Tensor b = boxes_b.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "mmops::boxes_overlap_bev (CPU)",
                                  [&] { overlaps_cpu<scalar_t>(a, b, p, out); });
  return out;
}

} // namespace kernels
} // namespace mmops

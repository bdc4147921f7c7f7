// CPU kernels of box_iou_rotated and box_iou_quadri: at::parallel_for over the
// rows of boxes1 (aligned: over the pairs).

#include "box_iou_rotated/box_iou_rotated_kernels.h"
#include "common/rotated_iou.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <vector>

namespace mmops {
namespace kernels {
namespace {

using rotated_iou::Shape;

template <typename scalar_t, int D>
void overlaps_cpu(const at::Tensor& b1, const at::Tensor& b2, const BoxIouRotatedParams& p, at::Tensor& out) {
  using T = at::opmath_type<scalar_t>;
  const int64_t n = b1.size(0);
  const int64_t m = b2.size(0);
  const scalar_t* p1 = b1.const_data_ptr<scalar_t>();
  const scalar_t* p2 = b2.const_data_ptr<scalar_t>();
  scalar_t* o = out.mutable_data_ptr<scalar_t>();
  // Every box of boxes2 is loaded once.
  std::vector<Shape<T, D>> second(static_cast<size_t>(m));
  at::parallel_for(0, m, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      second[j] = rotated_iou::load_shape<scalar_t, T, D>(p2 + j * D, p.clockwise);
    }
  });
  if (p.aligned) {
    at::parallel_for(0, n, 1024, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const auto a = rotated_iou::load_shape<scalar_t, T, D>(p1 + i * D, p.clockwise);
        o[i] = static_cast<scalar_t>(rotated_iou::overlap(a, second[i], p.iof));
      }
    });
    return;
  }
  const int64_t grain = m > 0 ? std::max<int64_t>(1, 4096 / m) : 1;
  at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const auto a = rotated_iou::load_shape<scalar_t, T, D>(p1 + i * D, p.clockwise);
      scalar_t* row = o + i * m;
      for (int64_t j = 0; j < m; ++j) {
        row[j] = static_cast<scalar_t>(rotated_iou::overlap(a, second[j], p.iof));
      }
    }
  });
}

} // namespace

at::Tensor box_iou_rotated_cpu(const at::Tensor& boxes1, const at::Tensor& boxes2, const BoxIouRotatedParams& p) {
  at::Tensor out = at::empty_symint(rotated_overlaps_shape(boxes1, boxes2, p.aligned), boxes1.options());
  if (out.numel() == 0) {
    return out;
  }
  const at::Tensor b1 = boxes1.contiguous();
  const at::Tensor b2 = boxes2.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, b1.scalar_type(), "mmops::box_iou_rotated (CPU)", [&] {
    if (p.quadri) {
      overlaps_cpu<scalar_t, 8>(b1, b2, p, out);
    } else {
      overlaps_cpu<scalar_t, 5>(b1, b2, p, out);
    }
  });
  return out;
}

} // namespace kernels
} // namespace mmops

// CPU kernels of points_in_boxes_part / _all: the boxes prepared once
// (kernels/common/box3d.h), then at::parallel_for over the B * N points.

#include "points_in_boxes/points_in_boxes_kernels.h"

#include "common/box3d.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

// Calls visit(row, boxes, m, px, py, pz) for every row of the flattened
// [B * N] points, in parallel: boxes are the m prepared boxes of the point's
// batch, (px, py, pz) the point in the compute type.
template <typename Visit>
void for_each_point(const at::Tensor& points, const at::Tensor& boxes, const Visit& visit) {
  const at::Tensor pts = points.contiguous();
  const at::Tensor bxs = boxes.contiguous();
  const int64_t batch = pts.size(0);
  const int64_t n = pts.size(1);
  const int64_t m = bxs.size(1);
  if (batch * n == 0) {
    return;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, pts.scalar_type(), "mmops::points_in_boxes (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* p = pts.const_data_ptr<scalar_t>();
    const scalar_t* b = bxs.const_data_ptr<scalar_t>();
    std::vector<box3d::Box3d<acc_t>> prepared(static_cast<size_t>(batch * m));
    for (int64_t k = 0; k < batch * m; ++k) {
      prepared[k] = box3d::Box3d<acc_t>::load(b + 7 * k);
    }
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(m, 1));
    at::parallel_for(0, batch * n, grain, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const box3d::Box3d<acc_t>* batch_boxes = prepared.data() + (row / n) * m;
        const scalar_t* q = p + 3 * row;
        visit(row, batch_boxes, m, static_cast<acc_t>(q[0]), static_cast<acc_t>(q[1]), static_cast<acc_t>(q[2]));
      }
    });
  });
}

} // namespace

at::Tensor points_in_boxes_part_cpu(const at::Tensor& points, const at::Tensor& boxes) {
  at::Tensor out = at::empty({points.size(0), points.size(1)}, points.options().dtype(at::kInt));
  int32_t* o = out.mutable_data_ptr<int32_t>();
  for_each_point(points, boxes, [&](int64_t row, const auto* bxs, int64_t m, auto px, auto py, auto pz) {
    int32_t first = -1;
    for (int64_t j = 0; j < m; ++j) {
      if (bxs[j].contains(px, py, pz)) {
        first = static_cast<int32_t>(j);
        break;
      }
    }
    o[row] = first;
  });
  return out;
}

at::Tensor points_in_boxes_all_cpu(const at::Tensor& points, const at::Tensor& boxes) {
  const int64_t m = boxes.size(1);
  at::Tensor out = at::empty({points.size(0), points.size(1), m}, points.options().dtype(at::kInt));
  int32_t* o = out.mutable_data_ptr<int32_t>();
  for_each_point(points, boxes, [&](int64_t row, const auto* bxs, int64_t m_, auto px, auto py, auto pz) {
    for (int64_t j = 0; j < m_; ++j) {
      o[row * m_ + j] = bxs[j].contains(px, py, pz) ? 1 : 0;
    }
  });
  return out;
}

} // namespace kernels
} // namespace mmops

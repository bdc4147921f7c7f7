// CPU kernel of roipoint_pool3d: at::parallel_for over the B * M boxes; each
// scans its batch's points in index order until it holds S of them, then
// fills its S output rows.

#include "roipoint_pool3d/roipoint_pool3d_kernels.h"

#include "common/box3d.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <vector>

namespace mmops {
namespace kernels {

std::tuple<at::Tensor, at::Tensor> roipoint_pool3d_cpu(const at::Tensor& points, const at::Tensor& point_features,
                                                       const at::Tensor& boxes3d, int64_t num_sampled_points) {
  const at::Tensor pts = points.contiguous();
  const at::Tensor feats = point_features.contiguous();
  const at::Tensor boxes = boxes3d.contiguous();
  const int64_t batch = pts.size(0), n = pts.size(1), c = feats.size(2), m = boxes.size(1);
  const int64_t s = num_sampled_points, row = 3 + c;
  at::Tensor pooled = at::zeros({batch, m, s, row}, pts.options());
  at::Tensor empty = at::zeros({batch, m}, pts.options().dtype(at::kInt));
  if (batch * m == 0) {
    return {pooled, empty};
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, pts.scalar_type(), "mmops::roipoint_pool3d (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* p = pts.const_data_ptr<scalar_t>();
    const scalar_t* f = feats.const_data_ptr<scalar_t>();
    const scalar_t* bx = boxes.const_data_ptr<scalar_t>();
    scalar_t* out = pooled.mutable_data_ptr<scalar_t>();
    int32_t* flag = empty.mutable_data_ptr<int32_t>();
    at::parallel_for(0, batch * m, 1, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> kept;
      kept.reserve(static_cast<size_t>(std::min(s, n)));
      for (int64_t box_row = begin; box_row < end; ++box_row) {
        const int64_t b = box_row / m;
        const auto box = box3d::Box3d<acc_t>::load(bx + 7 * box_row);
        kept.clear();
        for (int64_t i = 0; i < n && static_cast<int64_t>(kept.size()) < s; ++i) {
          const scalar_t* q = p + 3 * (b * n + i);
          if (box.contains(static_cast<acc_t>(q[0]), static_cast<acc_t>(q[1]), static_cast<acc_t>(q[2]))) {
            kept.push_back(i);
          }
        }
        if (kept.empty()) {
          flag[box_row] = 1;
          continue;
        }
        const int64_t count = static_cast<int64_t>(kept.size());
        for (int64_t k = 0; k < s; ++k) {
          const int64_t src = b * n + kept[k % count];
          scalar_t* dst = out + (box_row * s + k) * row;
          std::copy(p + 3 * src, p + 3 * src + 3, dst);
          std::copy(f + c * src, f + c * src + c, dst + 3);
        }
      }
    });
  });
  return {pooled, empty};
}

} // namespace kernels
} // namespace mmops

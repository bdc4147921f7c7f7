// group_by_coordinates: the grouping of dynamic_scatter, in ATen ops on the
// tensors' device (the CPU's; CUDA packs a row into one key and takes this
// path only for rows too wide for it).
//
// The rows are sorted lexicographically by stable sorts of int64 keys, two
// int32 columns per key (31 bits each: kept rows are non-negative), least
// significant pair first; a dropped row (a negative value) gets the largest key
// in every pass, so dropped points end last. Stable sorts of the identity keep
// the points of one voxel in increasing index order. The only host sync is the
// number of voxels (masked_select).

#include "voxelization/voxelization_kernels.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/List.h>
#include <ATen/ops/all.h>
#include <ATen/ops/any.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/masked_select.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/where.h>

#include <algorithm>
#include <limits>
#include <optional>

namespace mmops {
namespace kernels {

VoxelGroups group_by_coordinates(const at::Tensor& coors_in) {
  const at::Tensor coors = coors_in.contiguous();
  const int64_t n = coors.size(0);
  const int64_t d = coors.size(1);
  const auto long_options = coors.options().dtype(at::kLong);
  const at::Tensor valid = coors.ge(0).all(1);
  const at::Tensor wide = coors.to(at::kLong);
  at::Tensor order = at::arange(n, long_options);
  for (int64_t end = d; end > 0; end -= 2) {
    const int64_t begin = std::max<int64_t>(end - 2, 0);
    at::Tensor key = wide.select(1, begin);
    if (end - begin == 2) {
      key = key * (int64_t(1) << 31) + wide.select(1, begin + 1);
    }
    key = key.masked_fill(valid.logical_not(), std::numeric_limits<int64_t>::max()).index_select(0, order);
    order = order.index_select(0, std::get<1>(at::sort(key, /*stable=*/true, /*dim=*/0, /*descending=*/false)));
  }
  const at::Tensor rows = coors.index_select(0, order);
  const at::Tensor valid_sorted = valid.index_select(0, order);
  at::Tensor changed = at::ones({n}, coors.options().dtype(at::kBool));
  if (n > 1) {
    changed.slice(0, 1).copy_(rows.slice(0, 1).ne(rows.slice(0, 0, n - 1)).any(1));
  }
  const at::Tensor head = changed.logical_and(valid_sorted);
  const at::Tensor head_positions = at::arange(n, long_options).masked_select(head);
  const at::Tensor voxel_of_position = head.cumsum(0, at::kLong) - 1;
  at::Tensor point2voxel = at::empty({n}, coors.options());
  // index_put_ without accumulate: deterministic on CUDA (every index once)
  c10::List<std::optional<at::Tensor>> at_order;
  at_order.push_back(order);
  point2voxel.index_put_(at_order, at::where(valid_sorted, voxel_of_position, -1).to(at::kInt));
  const at::Tensor starts = at::cat({head_positions, valid.to(at::kLong).sum().view({1})});
  const int64_t m = head_positions.size(0);
  const at::Tensor counts = at::sub(starts.slice(0, 1), starts.slice(0, 0, m)).to(at::kInt);
  return {order, starts, point2voxel, counts, rows.index_select(0, head_positions)};
}

ScatterResult plan_scatter(const at::Tensor& feats, ScatterReduce reduce, const VoxelGroups& groups) {
  const int64_t m = groups.voxel_coors.size(0);
  const int64_t channels = feats.size(1);
  const int64_t argmax_rows = reduce == ScatterReduce::Max ? m : 0;
  return {at::empty({m, channels}, feats.options()), groups.voxel_coors, groups.point2voxel, groups.counts,
          at::empty({argmax_rows, channels}, feats.options().dtype(at::kInt))};
}

} // namespace kernels
} // namespace mmops

// group_by_index (index_segments.h): a stable sort of (group, key) pairs, then
// the segment starts by a binary search for every target (ATen ops; CUDA
// tensors go to index_segments_cuda.cu).

#include "common/index_segments.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

namespace mmops {
namespace kernels {

IndexSegments group_by_index(const at::Tensor& keys, int64_t size) {
  const int64_t groups = keys.size(0);
  const auto long_options = keys.options().dtype(at::kLong);
  const int64_t targets = groups * size; // <= the element count of a tensor the caller holds
  if (keys.numel() == 0) {
    return {at::empty({0}, long_options), at::zeros({targets + 1}, long_options)};
  }
#ifdef MMOPS_WITH_CUDA
  if (keys.is_cuda()) {
    return group_by_index_cuda(keys.scalar_type() == at::kInt ? keys : keys.to(at::kLong), size, targets);
  }
#endif
  const at::Tensor k = keys.to(at::kLong);
  const at::Tensor group = at::arange(groups, long_options).mul_(size).unsqueeze(1);
  // out-of-range keys go to the sentinel `targets`, after every segment
  const at::Tensor flat = at::where(k.ge(0).logical_and_(k.lt(size)), k.add(group), targets).reshape(-1);
  const auto [sorted, order] = at::sort(flat, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  const at::Tensor starts = at::arange(targets + 1, long_options);
  return {order, at::searchsorted(sorted, starts)};
}

} // namespace kernels
} // namespace mmops

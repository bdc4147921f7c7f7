#pragma once
// Deterministic scatter-add as a gather: the positions that an index tensor
// sends to each target, grouped and in ascending order, so that a backward
// kernel can sum every target's contributions in one thread, in a fixed order,
// without floating-point atomics (chamfer_distance, assign_score_withk,
// three_interpolate, gather_points / group_points).

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mmops {
namespace kernels {

struct IndexSegments {
  // [G * L] int64: flat positions g * L + l, grouped by (g, keys[g, l]), l ascending.
  at::Tensor order;
  // [G * size + 1] int64: the positions sent to target v of group g are
  // order[offsets[g * size + v], offsets[g * size + v + 1]).
  at::Tensor offsets;
};

// keys: [G, L] integer tensor of target indices in [0, size); a key outside
// that range is dropped (it belongs to no segment). No host synchronisation;
// a stable sort keeps l ascending. CPU: ATen ops; CUDA: group_by_index_cuda.
IndexSegments group_by_index(const at::Tensor& keys, int64_t size);

// The CUDA implementation (index_segments_cuda.cu): int32 or int64 keys with
// at least one element, targets = G * size.
IndexSegments group_by_index_cuda(const at::Tensor& keys, int64_t size, int64_t targets);

} // namespace kernels
} // namespace mmops

#pragma once
// A stable sort of non-negative int64 keys that fit in few bits, with the
// positions they came from (CUDA). at::sort sorts all 64 bits of an int64 key;
// voxel and grid keys use 20-40 of them, so a radix sort over `bits` bits does
// a half or a third of the passes (hard_voxelize, dynamic_scatter).
// stable_sort_pairs_in_place is the form for fused pipelines (dynamic_scatter):
// caller-provided buffers, no allocation, no host synchronisation.

#include <ATen/core/Tensor.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>

namespace mmops {
namespace kernels {

// keys: 1-D contiguous int64 CUDA tensor, every key in [0, 2^bits), bits in
// [1, 63]. Returns (sorted keys, perm) with sorted[i] = keys[perm[i]], perm
// int64; equal keys keep their input order. No host synchronisation.
std::pair<at::Tensor, at::Tensor> stable_sort_small_keys(const at::Tensor& keys, int bits);

// Sorts n (key, value) pairs by the low `bits` bits of the keys (bits in [1,
// 32] for uint32 keys, [1, 64] for uint64), stable (equal keys keep their
// order), on `stream`. keys[0] and values[0] hold the pairs; keys[1] and
// values[1] are scratch of n elements each. Returns the index (0 or 1) of the
// pair of buffers that holds the sorted pairs. temp: temp_bytes of device
// memory; with temp == nullptr nothing runs and temp_bytes is set to the size
// needed (the return value is then meaningless). n in [0, 2^31).
int stable_sort_pairs_in_place(void* temp, size_t& temp_bytes, uint32_t* const keys[2], int32_t* const values[2],
                               int64_t n, int bits, cudaStream_t stream);
int stable_sort_pairs_in_place(void* temp, size_t& temp_bytes, uint64_t* const keys[2], int32_t* const values[2],
                               int64_t n, int bits, cudaStream_t stream);

// The bits of the largest key: the smallest b >= 1 with max_key < 2^b.
inline int key_bits(uint64_t max_key) {
  int bits = 1;
  while (bits < 64 && (max_key >> bits) != 0) {
    ++bits;
  }
  return bits;
}

} // namespace kernels
} // namespace mmops

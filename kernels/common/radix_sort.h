#pragma once
// A stable sort of non-negative int64 keys that fit in few bits, with the
// positions they came from (CUDA). at::sort sorts all 64 bits of an int64 key;
// voxel and grid keys use 20-40 of them, so a radix sort over `bits` bits does
// a half or a third of the passes (hard_voxelize, dynamic_scatter).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>

namespace mmops {
namespace kernels {

// keys: 1-D contiguous int64 CUDA tensor, every key in [0, 2^bits), bits in
// [1, 63]. Returns (sorted keys, perm) with sorted[i] = keys[perm[i]], perm
// int64; equal keys keep their input order. No host synchronisation.
std::pair<at::Tensor, at::Tensor> stable_sort_small_keys(const at::Tensor& keys, int bits);

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

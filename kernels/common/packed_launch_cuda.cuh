#pragma once
// Launch shape of the packed elementwise kernels (fused_bias_leakyrelu,
// bias_act): a grid-stride loop over 16-byte packs (cuda_helpers::Pack) when
// the pointers allow it, single values otherwise, with 32-bit indices when
// every index and the grid stride fit.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace mmops {
namespace packed_launch {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t(1) << 20;

// Values of scalar_t in one 16-byte pack.
template <typename scalar_t>
constexpr int pack_size() {
  return 16 / sizeof(scalar_t);
}

inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

inline unsigned blocks_for(int64_t packs) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min((packs + kThreads - 1) / kThreads, kMaxBlocks)));
}

// Calls launch(std::integral_constant<VEC>, index type tag) with the widest pack and index
// that fit: 32-bit when every value index and every pack index plus the grid stride fit.
template <typename scalar_t, typename Launch>
void with_pack_and_index(bool vector_ok, int64_t numel, Launch&& launch) {
  constexpr int V = pack_size<scalar_t>();
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  const int64_t packs = vector_ok ? numel / V : numel;
  const bool small = numel <= kMax && packs + kThreads * kMaxBlocks <= kMax;
  if (vector_ok) {
    small ? launch(std::integral_constant<int, V>{}, int32_t{}) : launch(std::integral_constant<int, V>{}, int64_t{});
  } else {
    small ? launch(std::integral_constant<int, 1>{}, int32_t{}) : launch(std::integral_constant<int, 1>{}, int64_t{});
  }
}

} // namespace packed_launch
} // namespace mmops

#pragma once
// Small device helpers shared by the CUDA kernels (vectorized channel loads).

#include <cstring>
#include <type_traits>

namespace mmops {
namespace cuda_helpers {

// VEC consecutive channels travel together in one load: 16 bytes for float
// and double, 8 for half/bfloat16 (whose float accumulators would otherwise
// need too many registers).
template <typename scalar_t>
constexpr int channel_vector() {
  return sizeof(scalar_t) == 8 ? 2 : 4;
}

template <typename scalar_t, int VEC>
struct alignas(sizeof(scalar_t) * VEC) Pack {
  scalar_t v[VEC];
};

// A read-only (non-coherent cache) load of a Pack of 2 to 16 bytes.
template <typename P>
__device__ inline P load_readonly(const P* address) {
  using Bits = std::conditional_t<
      sizeof(P) == 2, unsigned short,
      std::conditional_t<sizeof(P) == 4, unsigned int, std::conditional_t<sizeof(P) == 8, uint2, uint4>>>;
  static_assert(sizeof(Bits) == sizeof(P), "unexpected pack size");
  const Bits bits = __ldg(reinterpret_cast<const Bits*>(address));
  P value;
  memcpy(&value, &bits, sizeof(P));
  return value;
}

} // namespace cuda_helpers
} // namespace mmops

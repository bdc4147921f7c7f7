#pragma once
// Small device helpers shared by the CUDA kernels (vectorized channel loads
// and vector atomics).

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

// address[0, VEC) += v: one vector atomic where the hardware has it (sm_90's
// float2 / float4 atomicAdd on global memory), else VEC scalar ones. The
// address must be aligned to VEC elements (the callers check it on the host).
template <int VEC, typename acc_t>
__device__ inline void atomic_add_vec(acc_t* address, const acc_t (&v)[VEC]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr bool kVectorAtomic = std::is_same_v<acc_t, float> && (VEC == 4 || VEC == 2);
#else
  constexpr bool kVectorAtomic = false;
#endif
  if constexpr (kVectorAtomic && VEC == 4) {
    atomicAdd(reinterpret_cast<float4*>(address), make_float4(v[0], v[1], v[2], v[3]));
  } else if constexpr (kVectorAtomic && VEC == 2) {
    atomicAdd(reinterpret_cast<float2*>(address), make_float2(v[0], v[1]));
  } else {
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      atomicAdd(address + i, v[i]);
    }
  }
}

} // namespace cuda_helpers
} // namespace mmops

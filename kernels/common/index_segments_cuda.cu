// group_by_index on CUDA (index_segments.h): the same segments as the ATen
// version in three steps and no host synchronisation: one kernel makes the
// flat keys g * size + key (out-of-range keys -> the sentinel G * size) and
// their positions, cub's stable LSD radix sort orders them over only the bits
// the largest key needs (uint32 keys when they fit), and one kernel finds each
// target's first position by binary search. The ATen version's dozen small
// launches and its 64-bit sort cost more than the backward kernels they feed.

#include "common/index_segments.h"
#include "common/radix_sort.h"

#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <cstdint>
#include <limits>

namespace mmops {
namespace kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t(1) << 16; // grid-stride beyond this

unsigned blocks_for(int64_t work) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

template <typename index_t, typename key_t>
__global__ void __launch_bounds__(kThreads)
    flat_keys_kernel(const index_t* __restrict__ keys, int64_t length, int64_t size, int64_t count,
                     key_t* __restrict__ flat, int64_t* __restrict__ positions) {
  const key_t sentinel = static_cast<key_t>(count / length * size); // G * size
  for (int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x; i < count; i += int64_t(gridDim.x) * kThreads) {
    const int64_t k = static_cast<int64_t>(keys[i]);
    flat[i] = k >= 0 && k < size ? static_cast<key_t>(i / length * size + k) : sentinel;
    positions[i] = i;
  }
}

// offsets[t] = the first i with sorted[i] >= t, for t in [0, targets].
template <typename key_t>
__global__ void __launch_bounds__(kThreads) lower_bounds_kernel(const key_t* __restrict__ sorted, int64_t count,
                                                                int64_t targets, int64_t* __restrict__ offsets) {
  for (int64_t t = blockIdx.x * int64_t(kThreads) + threadIdx.x; t <= targets; t += int64_t(gridDim.x) * kThreads) {
    int64_t lo = 0, hi = count;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (static_cast<int64_t>(sorted[mid]) < t) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    offsets[t] = lo;
  }
}

template <typename index_t, typename key_t>
IndexSegments group_with_keys(const at::Tensor& keys, int64_t size, int64_t targets) {
  const int64_t count = keys.numel(), length = keys.size(1);
  const auto long_options = keys.options().dtype(at::kLong);
  const auto key_options = keys.options().dtype(sizeof(key_t) == 4 ? at::kInt : at::kLong);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  at::Tensor flat = at::empty({count}, key_options), sorted = at::empty({count}, key_options);
  at::Tensor positions = at::empty({count}, long_options), order = at::empty({count}, long_options);
  at::Tensor offsets = at::empty({targets + 1}, long_options);
  auto* flat_ptr = reinterpret_cast<key_t*>(flat.mutable_data_ptr());
  auto* sorted_ptr = reinterpret_cast<key_t*>(sorted.mutable_data_ptr());
  flat_keys_kernel<index_t, key_t><<<blocks_for(count), kThreads, 0, stream>>>(
      keys.const_data_ptr<index_t>(), length, size, count, flat_ptr, positions.mutable_data_ptr<int64_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const int bits = key_bits(static_cast<uint64_t>(targets)); // the sentinel included
  size_t temp_bytes = 0;
  C10_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, flat_ptr, sorted_ptr,
                                                 positions.const_data_ptr<int64_t>(), order.mutable_data_ptr<int64_t>(),
                                                 count, 0, bits, stream));
  at::Tensor temp = at::empty({static_cast<int64_t>(temp_bytes)}, keys.options().dtype(at::kByte));
  C10_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.mutable_data_ptr(), temp_bytes, flat_ptr, sorted_ptr,
                                                 positions.const_data_ptr<int64_t>(), order.mutable_data_ptr<int64_t>(),
                                                 count, 0, bits, stream));
  lower_bounds_kernel<key_t><<<blocks_for(targets + 1), kThreads, 0, stream>>>(sorted_ptr, count, targets,
                                                                               offsets.mutable_data_ptr<int64_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {order, offsets};
}

} // namespace

IndexSegments group_by_index_cuda(const at::Tensor& keys_, int64_t size, int64_t targets) {
  const c10::cuda::CUDAGuard guard(keys_.device());
  const at::Tensor keys = keys_.contiguous();
  IndexSegments segments;
  AT_DISPATCH_INDEX_TYPES(keys.scalar_type(), "mmops group_by_index (CUDA)", [&] {
    // the sentinel `targets` must fit the key type too
    segments = targets < int64_t(std::numeric_limits<uint32_t>::max())
                   ? group_with_keys<index_t, uint32_t>(keys, size, targets)
                   : group_with_keys<index_t, uint64_t>(keys, size, targets);
  });
  return segments;
}

} // namespace kernels
} // namespace mmops

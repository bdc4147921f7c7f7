// stable_sort_small_keys (radix_sort.h): cub's LSD radix sort, which is stable,
// over the low `bits` bits of the keys, with the positions 0..n-1 as values.
// cub's temporary storage comes from PyTorch's caching allocator.
// stable_sort_pairs_in_place: the same sort on the caller's double buffers
// (cub's DoubleBuffer form: no extra copy, the smallest temporary storage).

#include "common/radix_sort.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cub/device/device_radix_sort.cuh>

#include <limits>

namespace mmops {
namespace kernels {

std::pair<at::Tensor, at::Tensor> stable_sort_small_keys(const at::Tensor& keys, int bits) {
  TORCH_INTERNAL_ASSERT(keys.is_cuda() && keys.dim() == 1 && keys.is_contiguous() && keys.scalar_type() == at::kLong);
  TORCH_INTERNAL_ASSERT(bits >= 1 && bits <= 63);
  const c10::cuda::CUDAGuard guard(keys.device());
  const int64_t n = keys.numel();
  at::Tensor sorted = at::empty_like(keys);
  at::Tensor perm = at::empty_like(keys);
  if (n == 0) {
    return {sorted, perm};
  }
  const at::Tensor positions = at::arange(n, keys.options());
  // non-negative keys: their bits as uint64 order them as int64
  const auto* keys_in = reinterpret_cast<const uint64_t*>(keys.const_data_ptr<int64_t>());
  auto* keys_out = reinterpret_cast<uint64_t*>(sorted.mutable_data_ptr<int64_t>());
  const int64_t* values_in = positions.const_data_ptr<int64_t>();
  int64_t* values_out = perm.mutable_data_ptr<int64_t>();
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  size_t temp_bytes = 0;
  C10_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in, keys_out, values_in, values_out, n, 0,
                                                 bits, stream));
  at::Tensor temp = at::empty({static_cast<int64_t>(temp_bytes)}, keys.options().dtype(at::kByte));
  C10_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.mutable_data_ptr(), temp_bytes, keys_in, keys_out, values_in,
                                                 values_out, n, 0, bits, stream));
  return {sorted, perm};
}

namespace {

template <typename Key>
int sort_pairs_in_place(void* temp, size_t& temp_bytes, Key* const keys[2], int32_t* const values[2], int64_t n,
                        int bits, cudaStream_t stream) {
  TORCH_INTERNAL_ASSERT(n >= 0 && n <= std::numeric_limits<int32_t>::max());
  TORCH_INTERNAL_ASSERT(bits >= 1 && bits <= static_cast<int>(8 * sizeof(Key)));
  cub::DoubleBuffer<Key> key_buffers(keys[0], keys[1]);
  cub::DoubleBuffer<int32_t> value_buffers(values[0], values[1]);
  C10_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, key_buffers, value_buffers, static_cast<int>(n), 0,
                                                 bits, stream));
  return key_buffers.selector;
}

} // namespace

int stable_sort_pairs_in_place(void* temp, size_t& temp_bytes, uint32_t* const keys[2], int32_t* const values[2],
                               int64_t n, int bits, cudaStream_t stream) {
  return sort_pairs_in_place(temp, temp_bytes, keys, values, n, bits, stream);
}

int stable_sort_pairs_in_place(void* temp, size_t& temp_bytes, uint64_t* const keys[2], int32_t* const values[2],
                               int64_t n, int bits, cudaStream_t stream) {
  return sort_pairs_in_place(temp, temp_bytes, keys, values, n, bits, stream);
}

} // namespace kernels
} // namespace mmops

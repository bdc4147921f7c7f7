// CUDA kernels of gather_points / group_points.
// Forward: a thread per (batch, k) reads its index once and copies
// kChannelsPerThread channels; a warp writes 32 consecutive k of a channel
// row (coalesced). Backward, deterministic without float atomics: the indices
// are grouped by feature point with group_by_index (equal indices keep their
// order of k); a thread per (batch, point) then sums its range in increasing k,
// the order the CPU kernel adds in, so CUDA and CPU agree bitwise. No host sync.
// half/bfloat16 accumulate in float. 64-bit offsets.

#include "group_points/group_points_kernels.h"

#include "common/index_segments.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <limits>

namespace mmops {
namespace kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kChannelsPerThread = 8;

// The block's (batch, tile of kThreads positions, chunk of channels), from a 1-D grid.
struct Tile {
  int64_t batch, position, channel0;
};

__device__ inline Tile tile_of(int64_t tiles, int64_t chunks) {
  const int64_t block = blockIdx.x;
  return {block / (tiles * chunks), (block / chunks) % tiles * kThreads + threadIdx.x,
          block % chunks * kChannelsPerThread};
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    gather_forward_kernel(const scalar_t* __restrict__ features, const int32_t* __restrict__ indices, int64_t channels,
                          int64_t n, int64_t k_count, int64_t tiles, int64_t chunks, scalar_t* __restrict__ out) {
  const Tile t = tile_of(tiles, chunks);
  if (t.position >= k_count) {
    return;
  }
  const int32_t i = indices[t.batch * k_count + t.position];
  const bool valid = i >= 0 && i < n; // guarded: another index gathers 0
  const int64_t c_end = t.channel0 + kChannelsPerThread < channels ? t.channel0 + kChannelsPerThread : channels;
  for (int64_t c = t.channel0; c < c_end; ++c) {
    const int64_t row = t.batch * channels + c;
    out[row * k_count + t.position] = valid ? features[row * n + i] : scalar_t(0);
  }
}

// grad[b, c, p] = sum over j in [offsets[b * n + p], offsets[b * n + p + 1]) of
// grad_output[b, c, k], k = order[j] - b * k_count (group_by_index's flat positions).
template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kThreads)
    gather_backward_kernel(const scalar_t* __restrict__ grad_output, const int64_t* __restrict__ order,
                           const int64_t* __restrict__ offsets, int64_t channels, int64_t n, int64_t k_count,
                           int64_t tiles, int64_t chunks, scalar_t* __restrict__ grad) {
  const Tile t = tile_of(tiles, chunks);
  if (t.position >= n) {
    return;
  }
  const int64_t begin = offsets[t.batch * n + t.position];
  const int64_t end = offsets[t.batch * n + t.position + 1];
  const int64_t first_k = t.batch * k_count;
  const int64_t c_end = t.channel0 + kChannelsPerThread < channels ? t.channel0 + kChannelsPerThread : channels;
  for (int64_t c = t.channel0; c < c_end; ++c) {
    const int64_t row = t.batch * channels + c;
    acc_t sum = acc_t(0);
    for (int64_t j = begin; j < end; ++j) {
      sum += static_cast<acc_t>(grad_output[row * k_count + (order[j] - first_k)]);
    }
    grad[row * n + t.position] = static_cast<scalar_t>(sum);
  }
}

// Blocks for batch x positions x channels, checked against the launch limit.
int64_t grid_of(const char* what, int64_t batch, int64_t positions, int64_t channels, int64_t& tiles, int64_t& chunks) {
  tiles = (positions + kThreads - 1) / kThreads;
  chunks = (channels + kChannelsPerThread - 1) / kChannelsPerThread;
  const int64_t blocks = batch * tiles * chunks;
  TORCH_CHECK(blocks <= std::numeric_limits<int32_t>::max(), what, batch, " x ", positions, " x ", channels,
              " values are more than one CUDA launch covers");
  return blocks;
}

} // namespace

at::Tensor gather_points_forward_cuda(const at::Tensor& features_, const at::Tensor& indices_) {
  const c10::cuda::CUDAGuard guard(features_.device());
  const at::Tensor features = features_.contiguous();
  const at::Tensor indices = indices_.contiguous();
  const int64_t batch = features.size(0), channels = features.size(1), n = features.size(2);
  const int64_t k_count = indices.size(1);
  at::Tensor out = at::empty({batch, channels, k_count}, features.options());
  if (out.numel() == 0) {
    return out;
  }
  int64_t tiles = 0, chunks = 0;
  const int64_t blocks = grid_of("mmops::gather_points: ", batch, k_count, channels, tiles, chunks);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, features.scalar_type(), "mmops::gather_points (CUDA)", [&] {
    gather_forward_kernel<scalar_t><<<static_cast<unsigned>(blocks), kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        features.const_data_ptr<scalar_t>(), indices.const_data_ptr<int32_t>(), channels, n, k_count, tiles, chunks,
        out.mutable_data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

at::Tensor gather_points_backward_cuda(const at::Tensor& grad_output_, const at::Tensor& indices_, int64_t n) {
  const c10::cuda::CUDAGuard guard(grad_output_.device());
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor indices = indices_.contiguous();
  const int64_t batch = grad_output.size(0), channels = grad_output.size(1);
  const int64_t k_count = indices.size(1);
  if (batch * channels * n == 0 || k_count == 0) {
    return at::zeros({batch, channels, n}, grad_output.options());
  }
  at::Tensor grad = at::empty({batch, channels, n}, grad_output.options());
  // Equal indices keep increasing k; out-of-range ones belong to no point.
  const IndexSegments segments = group_by_index(indices, n);
  int64_t tiles = 0, chunks = 0;
  const int64_t blocks = grid_of("mmops::gather_points backward: ", batch, n, channels, tiles, chunks);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad_output.scalar_type(), "mmops::gather_points backward (CUDA)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        gather_backward_kernel<scalar_t, acc_t>
            <<<static_cast<unsigned>(blocks), kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
                grad_output.const_data_ptr<scalar_t>(), segments.order.const_data_ptr<int64_t>(),
                segments.offsets.const_data_ptr<int64_t>(), channels, n, k_count, tiles, chunks,
                grad.mutable_data_ptr<scalar_t>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return grad;
}

} // namespace kernels
} // namespace mmops

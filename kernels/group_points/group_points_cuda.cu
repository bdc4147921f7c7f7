// CUDA kernels of gather_points / group_points.
// Forward: when K >= N (group_points), features are transposed to rows
// [B, N, C] and a block gathers a tile of k x channels through shared memory
// (gather_rows_forward_kernel); otherwise a thread per (batch, k) reads its
// index once and copies kChannelsPerThread channels; either way a warp writes
// consecutive k of a channel row (coalesced).
// Backward, deterministic without float atomics: the indices are grouped by
// feature point with group_by_index (equal indices keep their order of k),
// grad_output is transposed to rows [B, K, C], and
// segment_rows::launch_sums adds each point's rows in increasing k (the order
// the CPU kernel adds in: CUDA and CPU agree bitwise). No host sync.
// half/bfloat16 accumulate in float. 64-bit offsets.

#include "group_points/group_points_kernels.h"

#include "common/index_segments.h"
#include "common/segment_rows_cuda.cuh"

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

// The forward's tiled kernel has the block shape of the backward's
// (segment_rows_cuda.cuh): kTile k x kSlab channels, kParts threads per k.
using segment_rows::kChannelsPerPart;
using segment_rows::kParts;
using segment_rows::kSlab;
using segment_rows::kTile;
static_assert(kThreads == segment_rows::kThreads, "one block size for both tiled kernels");

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

// out[b, c, k] = rows[b, indices[b, k], c], rows = features transposed to
// [B, N, C] (used when K >= N: every feature is read once or more, so a
// channel row per k beats a 4-byte sector per (k, channel)); the block's tile
// of kTile k x kSlab channels goes out through shared memory as
// coalesced [C, K] rows.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    gather_rows_forward_kernel(const scalar_t* __restrict__ rows, const int32_t* __restrict__ indices, int64_t channels,
                               int64_t n, int64_t k_count, int64_t tiles, int64_t slabs, scalar_t* __restrict__ out) {
  __shared__ scalar_t tile[kSlab][kTile + 1];
  const int64_t block = blockIdx.x;
  const int64_t b = block / (tiles * slabs), first_k = (block / slabs) % tiles * kTile;
  const int64_t first_channel = block % slabs * kSlab;
  const int local = threadIdx.x / kParts, part = threadIdx.x % kParts;
  const int64_t k = first_k + local;
  const int32_t i = k < k_count ? indices[b * k_count + k] : -1;
  const bool valid = i >= 0 && i < n; // guarded: another index gathers 0
  const scalar_t* row = rows + (b * n + (valid ? i : 0)) * channels + first_channel + part;
#pragma unroll
  for (int q = 0; q < kChannelsPerPart; ++q) {
    const bool inside = valid && first_channel + part + q * kParts < channels;
    tile[part + q * kParts][local] = inside ? row[q * kParts] : scalar_t(0);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kSlab * kTile; e += kThreads) {
    const int c = e / kTile, j = e % kTile;
    if (first_channel + c < channels && first_k + j < k_count) {
      out[(b * channels + first_channel + c) * k_count + first_k + j] = tile[c][j];
    }
  }
}

// The backward's term: the row itself (b * K + k = order[j] is its row in
// grad_output transposed to [B, K, C]).
struct GatherSource {
  __device__ int64_t row(int64_t e) const { return e; }
  template <typename acc_t>
  __device__ acc_t term(acc_t value, int64_t) const {
    return value;
  }
};

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
  if (k_count >= n) {
    const at::Tensor rows = features.transpose(1, 2).contiguous(); // [B, N, C]
    const int64_t tiles = (k_count + kTile - 1) / kTile, slabs = (channels + kSlab - 1) / kSlab;
    TORCH_CHECK(batch * tiles * slabs <= std::numeric_limits<int32_t>::max(), "mmops::gather_points: ", batch, " x ",
                k_count, " x ", channels, " values are more than one CUDA launch covers");
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kHalf, at::kBFloat16, features.scalar_type(), "mmops::gather_points (CUDA)", [&] {
          gather_rows_forward_kernel<scalar_t>
              <<<static_cast<unsigned>(batch * tiles * slabs), kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
                  rows.const_data_ptr<scalar_t>(), indices.const_data_ptr<int32_t>(), channels, n, k_count, tiles,
                  slabs, out.mutable_data_ptr<scalar_t>());
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        });
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
  const at::Tensor rows = grad_output.transpose(1, 2).contiguous(); // [B, K, C]
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad_output.scalar_type(), "mmops::gather_points backward (CUDA)", [&] {
        segment_rows::launch_sums<scalar_t, at::opmath_type<scalar_t>>(
            "mmops::gather_points backward: ", rows.const_data_ptr<scalar_t>(), segments, batch, channels, n,
            GatherSource{}, grad.mutable_data_ptr<scalar_t>(), c10::cuda::getCurrentCUDAStream());
      });
  return grad;
}

} // namespace kernels
} // namespace mmops

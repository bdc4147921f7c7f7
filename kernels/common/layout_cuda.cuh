#pragma once
// Batched matrix transpose for the CUDA kernels: out[b][c][r] = in[b][r][c]
// for `batches` rows x cols matrices (NCHW -> NHWC is rows = C, cols = H * W;
// NHWC -> NCHW the reverse). A padded shared tile makes both the reads and
// the writes coalesced; 16 elements per thread keep enough loads in flight.
// The element type may change on the way (e.g. float sums -> half gradients).

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>

namespace mmops {
namespace kernels {
namespace layout {

constexpr int kTransposeTile = 64;

template <typename in_t, typename out_t>
__global__ void __launch_bounds__(256)
    transpose_kernel(const in_t* __restrict__ in, out_t* __restrict__ out, int64_t rows, int64_t cols) {
  __shared__ out_t tile[kTransposeTile][kTransposeTile + 1];
  const int64_t b = blockIdx.z;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTransposeTile;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTransposeTile;
  const in_t* src = in + b * rows * cols;
  out_t* dst = out + b * rows * cols;
#pragma unroll
  for (int i = threadIdx.y; i < kTransposeTile; i += 8) {
#pragma unroll
    for (int j = threadIdx.x; j < kTransposeTile; j += 32) {
      const int64_t r = r0 + i, c = c0 + j;
      if (r < rows && c < cols) {
        tile[i][j] = static_cast<out_t>(src[r * cols + c]);
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = threadIdx.y; i < kTransposeTile; i += 8) {
#pragma unroll
    for (int j = threadIdx.x; j < kTransposeTile; j += 32) {
      const int64_t c = c0 + i, r = r0 + j;
      if (r < rows && c < cols) {
        dst[c * rows + r] = tile[j][i];
      }
    }
  }
}

// Launches transpose_kernel over `batches` matrices of rows x cols on `stream`.
template <typename in_t, typename out_t>
void transpose(const in_t* in, out_t* out, int64_t batches, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (batches * rows * cols == 0) {
    return;
  }
  constexpr int64_t kMaxGridYZ = 65535;
  const int64_t row_tiles = (rows + kTransposeTile - 1) / kTransposeTile;
  TORCH_CHECK(row_tiles <= kMaxGridYZ, "mmops: ", rows, " rows are too many to transpose");
  for (int64_t b0 = 0; b0 < batches; b0 += kMaxGridYZ) {
    const dim3 grid((cols + kTransposeTile - 1) / kTransposeTile, row_tiles, std::min(kMaxGridYZ, batches - b0));
    transpose_kernel<in_t, out_t>
        <<<grid, dim3(32, 8), 0, stream>>>(in + b0 * rows * cols, out + b0 * rows * cols, rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

} // namespace layout
} // namespace kernels
} // namespace mmops

// CUDA kernels of corner_pool: each line is scanned by one thread in scan
// order (corner_pool_math.h, the rule the CPU kernels share), so every output
// and every gradient is bit for bit the CPU's. Two strategies, by how lines lie
// in memory (the tensor contiguous in its suggested memory format):
//   - interleaved lines (inner > 1: the H axis of NCHW, both axes of
//     channels_last): one thread per line, consecutive threads on adjacent
//     lines, so every step of the walk is one coalesced row access; loads are
//     issued 64 bytes a thread ahead of the scan;
//   - contiguous lines (inner == 1: the W axis of NCHW): a block of kRows
//     threads owns kRows rows and moves them through shared memory in chunks of
//     128 bytes a row (coalesced loads and stores); each thread then walks its
//     row of the tile (padded pitch: no bank conflicts).
// The backward recomputes the argmax (no saved index tensor): it walks the same
// scan summing the output gradients of the current argmax's run in the
// accumulate type and writes the sum to the argmax when another position
// takes over; every other position gets 0. One writer per element, no atomics,
// deterministic. Indexing is 64-bit.

#include "corner_pool/corner_pool_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>

namespace mmops {
namespace kernels {
namespace {

using namespace corner_pool_math;

constexpr int kThreads = 256; // interleaved lines: threads per block
constexpr int kRows = 128;    // contiguous lines: rows (= threads) per block

// Grid-stride launches: enough blocks to fill the GPU, capped (grid.x < 2^31).
int64_t blocks_for(int64_t items, int threads) {
  return std::min<int64_t>((items + threads - 1) / threads, int64_t(1) << 20);
}

// Interleaved lines: steps loaded ahead of the scan, 64 bytes a thread (16-bit
// types load as many bytes in flight as float32, so they run faster, not at the
// same number of loads).
template <typename scalar_t>
constexpr int kUnroll = 64 / int(sizeof(scalar_t));

// A shared-memory tile of kRows rows x kCols columns (128 bytes a row) with a
// padded pitch, so that the threads of a warp reading one column each of their
// own rows hit distinct banks.
template <typename scalar_t>
struct Tile {
  static constexpr int kCols = 128 / int(sizeof(scalar_t));
  static constexpr int kPitch = kCols + (sizeof(scalar_t) < 4 ? 2 : 1);
  static constexpr int kElements = kRows * kPitch;
  static_assert(kRows % kCols == 0, "a block's threads cover whole tile rows");
};

// ---------------------------------------------------------------- interleaved lines

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    forward_interleaved_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ out, int64_t lines,
                               int64_t length, int64_t inner, bool backwards) {
  using acc_t = at::opmath_type<scalar_t>;
  for (int64_t line = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; line < lines;
       line += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = line / inner, i = line - o * inner;
    const int64_t step = backwards ? -inner : inner;
    int64_t pos = o * length * inner + i + (backwards ? (length - 1) * inner : 0);
    RunningMax<scalar_t, acc_t> best;
    best.start(x[pos]);
    for (int64_t s = 0; s < length; s += kUnroll<scalar_t>, pos += kUnroll<scalar_t> * step) {
      const int64_t n = length - s;
      scalar_t v[kUnroll<scalar_t>];
#pragma unroll
      for (int u = 0; u < kUnroll<scalar_t>; ++u) {
        if (u < n) {
          v[u] = x[pos + u * step];
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll<scalar_t>; ++u) {
        if (u < n) {
          best.offer(v[u]);
          out[pos + u * step] = best.value;
        }
      }
    }
  }
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    backward_interleaved_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ grad_output,
                                scalar_t* __restrict__ grad, int64_t lines, int64_t length, int64_t inner,
                                bool backwards) {
  using acc_t = at::opmath_type<scalar_t>;
  for (int64_t line = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; line < lines;
       line += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = line / inner, i = line - o * inner;
    const int64_t step = backwards ? -inner : inner;
    int64_t pos = o * length * inner + i + (backwards ? (length - 1) * inner : 0);
    RunningMax<scalar_t, acc_t> best;
    best.start(x[pos]);
    int64_t head = pos; // the current argmax; its element is written when its run ends
    acc_t acc = 0;
    for (int64_t s = 0; s < length; s += kUnroll<scalar_t>, pos += kUnroll<scalar_t> * step) {
      const int64_t n = length - s;
      scalar_t v[kUnroll<scalar_t>], g[kUnroll<scalar_t>];
#pragma unroll
      for (int u = 0; u < kUnroll<scalar_t>; ++u) {
        if (u < n) {
          v[u] = x[pos + u * step];
          g[u] = grad_output[pos + u * step];
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll<scalar_t>; ++u) {
        if (u < n) {
          const int64_t p = pos + u * step;
          if (best.offer(v[u])) {
            if (s + u > 0) {
              grad[head] = static_cast<scalar_t>(acc);
            }
            head = p;
            acc = 0;
          } else {
            grad[p] = scalar_t(0);
          }
          acc += static_cast<acc_t>(g[u]);
        }
      }
    }
    grad[head] = static_cast<scalar_t>(acc);
  }
}

// ---------------------------------------------------------------- contiguous lines

// Rows row0 .. row0 + kRows - 1 of [rows, length], columns c0 .. c0 + ncols - 1,
// into the tile (every thread of the block takes part): thread t moves column
// t % kCols of rows t / kCols + j * (kRows / kCols), so a warp moves one
// contiguous run of a row per instruction; 16 loads in flight per thread.
template <typename scalar_t>
__device__ inline void load_tile(const scalar_t* __restrict__ src, scalar_t* tile, int64_t row0, int64_t rows,
                                 int64_t length, int64_t c0, int ncols) {
  using T = Tile<scalar_t>;
  constexpr int kStep = kRows / T::kCols;
  const int c = int(threadIdx.x) % T::kCols, r0 = int(threadIdx.x) / T::kCols;
  if (c >= ncols) {
    return;
  }
  const scalar_t* p = src + (row0 + r0) * length + c0 + c;
#pragma unroll 16
  for (int j = 0; j < T::kCols; ++j) {
    const int r = r0 + j * kStep;
    if (row0 + r < rows) {
      tile[r * T::kPitch + c] = p[int64_t(j) * kStep * length];
    }
  }
}

template <typename scalar_t>
__device__ inline void store_tile(const scalar_t* tile, scalar_t* __restrict__ dst, int64_t row0, int64_t rows,
                                  int64_t length, int64_t c0, int ncols) {
  using T = Tile<scalar_t>;
  constexpr int kStep = kRows / T::kCols;
  const int c = int(threadIdx.x) % T::kCols, r0 = int(threadIdx.x) / T::kCols;
  if (c >= ncols) {
    return;
  }
  scalar_t* p = dst + (row0 + r0) * length + c0 + c;
#pragma unroll 16
  for (int j = 0; j < T::kCols; ++j) {
    const int r = r0 + j * kStep;
    if (row0 + r < rows) {
      p[int64_t(j) * kStep * length] = tile[r * T::kPitch + c];
    }
  }
}

template <typename scalar_t>
__global__ void __launch_bounds__(kRows)
    forward_contiguous_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ out, int64_t rows, int64_t length,
                              bool backwards) {
  using acc_t = at::opmath_type<scalar_t>;
  using T = Tile<scalar_t>;
  __shared__ scalar_t tile[T::kElements];
  const int64_t chunks = (length + T::kCols - 1) / T::kCols;
  // row0 is the same for every thread of the block: the barriers are uniform
  for (int64_t row0 = blockIdx.x * int64_t(kRows); row0 < rows; row0 += int64_t(gridDim.x) * kRows) {
    const int64_t row = row0 + threadIdx.x;
    const bool mine = row < rows;
    RunningMax<scalar_t, acc_t> best;
    if (mine) {
      best.start(x[row * length + (backwards ? length - 1 : 0)]);
    }
    for (int64_t q = 0; q < chunks; ++q) {
      const int64_t c0 = (backwards ? chunks - 1 - q : q) * T::kCols;
      const int ncols = int(length - c0 < T::kCols ? length - c0 : T::kCols);
      load_tile(x, tile, row0, rows, length, c0, ncols);
      __syncthreads();
      if (mine) {
        scalar_t* t = tile + threadIdx.x * T::kPitch;
        for (int s = 0; s < ncols; ++s) {
          const int c = backwards ? ncols - 1 - s : s;
          best.offer(t[c]);
          t[c] = best.value;
        }
      }
      __syncthreads();
      store_tile(tile, out, row0, rows, length, c0, ncols);
      __syncthreads(); // the next chunk's load overwrites the tile
    }
  }
}

template <typename scalar_t>
__global__ void __launch_bounds__(kRows)
    backward_contiguous_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ grad_output,
                               scalar_t* __restrict__ grad, int64_t rows, int64_t length, bool backwards) {
  using acc_t = at::opmath_type<scalar_t>;
  using T = Tile<scalar_t>;
  __shared__ scalar_t xs[T::kElements];
  __shared__ scalar_t gs[T::kElements]; // the output gradient, replaced by the gradient
  const int64_t chunks = (length + T::kCols - 1) / T::kCols;
  for (int64_t row0 = blockIdx.x * int64_t(kRows); row0 < rows; row0 += int64_t(gridDim.x) * kRows) {
    const int64_t row = row0 + threadIdx.x;
    const bool mine = row < rows;
    RunningMax<scalar_t, acc_t> best;
    if (mine) {
      best.start(x[row * length + (backwards ? length - 1 : 0)]);
    }
    int64_t head = -1; // the current argmax's column
    acc_t acc = 0;
    for (int64_t q = 0; q < chunks; ++q) {
      const int64_t c0 = (backwards ? chunks - 1 - q : q) * T::kCols;
      const int ncols = int(length - c0 < T::kCols ? length - c0 : T::kCols);
      load_tile(x, xs, row0, rows, length, c0, ncols);
      load_tile(grad_output, gs, row0, rows, length, c0, ncols);
      __syncthreads();
      if (mine) {
        const scalar_t* xt = xs + threadIdx.x * T::kPitch;
        scalar_t* gt = gs + threadIdx.x * T::kPitch;
        for (int s = 0; s < ncols; ++s) {
          const int c = backwards ? ncols - 1 - s : s;
          const scalar_t g = gt[c];
          if (best.offer(xt[c])) {
            // the finished run's sum goes to its argmax: in this tile, or in
            // global memory when an earlier chunk held it (that chunk's store,
            // which wrote 0 there, is ordered before by the barriers)
            if (head >= c0 && head < c0 + ncols) {
              gt[head - c0] = static_cast<scalar_t>(acc);
            } else if (head >= 0) {
              grad[row * length + head] = static_cast<scalar_t>(acc);
            }
            head = c0 + c;
            acc = 0;
          }
          gt[c] = scalar_t(0); // the new argmax's too, until its run ends
          acc += static_cast<acc_t>(g);
        }
      }
      __syncthreads();
      store_tile(gs, grad, row0, rows, length, c0, ncols);
      __syncthreads();
    }
    if (mine) {
      grad[row * length + head] = static_cast<scalar_t>(acc); // after the last store (barrier above)
    }
  }
}

} // namespace

at::Tensor corner_pool_forward_cuda(const at::Tensor& input, const CornerPoolParams& p) {
  const c10::cuda::CUDAGuard guard(input.device());
  const at::MemoryFormat format = input.suggest_memory_format();
  const at::Tensor x = input.contiguous(format);
  at::Tensor out = at::empty(x.sizes(), x.options(), format);
  if (out.numel() == 0) {
    return out;
  }
  const Lines l = lines_of(p, format == at::MemoryFormat::ChannelsLast);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "mmops::corner_pool (CUDA)", [&] {
    const scalar_t* src = x.const_data_ptr<scalar_t>();
    scalar_t* dst = out.mutable_data_ptr<scalar_t>();
    if (l.inner == 1) {
      forward_contiguous_kernel<scalar_t>
          <<<blocks_for(l.outer, kRows), kRows, 0, stream>>>(src, dst, l.outer, l.length, l.backwards);
    } else {
      const int64_t lines = l.outer * l.inner;
      forward_interleaved_kernel<scalar_t>
          <<<blocks_for(lines, kThreads), kThreads, 0, stream>>>(src, dst, lines, l.length, l.inner, l.backwards);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

at::Tensor corner_pool_backward_cuda(const at::Tensor& grad_output, const at::Tensor& input,
                                     const CornerPoolParams& p) {
  const c10::cuda::CUDAGuard guard(input.device());
  const at::MemoryFormat format = input.suggest_memory_format();
  const at::Tensor x = input.contiguous(format);
  const at::Tensor go = grad_output.contiguous(format);
  at::Tensor grad = at::empty(x.sizes(), x.options(), format);
  if (grad.numel() == 0) {
    return grad;
  }
  const Lines l = lines_of(p, format == at::MemoryFormat::ChannelsLast);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "mmops::corner_pool backward (CUDA)", [&] {
    const scalar_t* xs = x.const_data_ptr<scalar_t>();
    const scalar_t* gs = go.const_data_ptr<scalar_t>();
    scalar_t* dst = grad.mutable_data_ptr<scalar_t>();
    if (l.inner == 1) {
      backward_contiguous_kernel<scalar_t>
          <<<blocks_for(l.outer, kRows), kRows, 0, stream>>>(xs, gs, dst, l.outer, l.length, l.backwards);
    } else {
      const int64_t lines = l.outer * l.inner;
      backward_interleaved_kernel<scalar_t>
          <<<blocks_for(lines, kThreads), kThreads, 0, stream>>>(xs, gs, dst, lines, l.length, l.inner, l.backwards);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return grad;
}

} // namespace kernels
} // namespace mmops

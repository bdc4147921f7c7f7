// CUDA kernels of border_align (border_align_math.h).
//
// Both directions use one block layout: a block owns a tile of 64 consecutive
// boxes of one image and 4 consecutive channels; thread t walks border t / 64
// of box t % 64 for the 4 channels (one walk, one set of taps per point, 16
// independent loads per point). A warp thus covers 32 neighbouring boxes of one
// border in the same 4 channel planes: their points lie close together in the
// map (L1 reuse for detector boxes). Tiles run box-fastest, so the blocks
// resident at a time read a few channels' planes, which stay in L2.
// The [N, C, H * W, 4] side (output, argmax, grad_output) goes through a shared
// tile: a channel's 64 boxes x 4 borders are 256 consecutive values, read or
// written by the block's 256 threads in one coalesced access.
//
// Backward, default: each output adds its gradient times the four bilinear
// weights of its winning point with atomics, straight into a zeroed gradient
// (float, double) or a float buffer (half, bfloat16) converted at the end; the
// order of the float additions varies from run to run (as mmcv's).
// Deterministic (torch.use_deterministic_algorithms(True)): the same adds as
// int64 fixed point (border_align_math.h's fixed_point_scale, from
// max |grad_output| and H * W adds per pixel), whose total does not depend on
// their order: bitwise repeatable gradients, rounded to about 2^-62 of
// H * W * max |grad_output|. A non-finite grad_output makes that gradient all NaN.
// An argmax_idx outside [0, pool_size] sends nothing (never an out-of-bounds add).

#include "border_align/border_align_kernels.h"

#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <ATen/cuda/Atomic.cuh>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using namespace border_align_math;

constexpr int kTileBoxes = 64;                      // boxes of a tile
constexpr int kThreads = kTileBoxes * kBorders;     // one thread per (box, border)
constexpr int kTileChannels = 4;                    // channels of a tile (each thread does all)
constexpr int kStageStride = kTileBoxes + 8;        // shared row of one border: conflict-free both ways
constexpr int kStageSize = kBorders * kStageStride; // one channel's staged tile

// Which tile a block works on: image n, channels [c0, c0 + 4), boxes [k0, k0 + nk).
struct TileIndex {
  int64_t n, c0, k0, nk;
};

__device__ inline TileIndex tile_at(int64_t tile, const BorderAlignParams& p, int64_t box_tiles,
                                    int64_t channel_tiles) {
  TileIndex t;
  const int64_t kt = tile % box_tiles;
  const int64_t rest = tile / box_tiles;
  t.c0 = (rest % channel_tiles) * kTileChannels;
  t.n = rest / channel_tiles;
  t.k0 = kt * kTileBoxes;
  t.nk = p.boxes - t.k0 < kTileBoxes ? p.boxes - t.k0 : kTileBoxes;
  return t;
}

// Staged position of output element e (= box * 4 + border) of a tile, and of
// the thread (box, border): rows by border, padded so that both the threads of
// a warp (consecutive boxes) and the elements of a warp (4 borders x 8 boxes)
// fall on distinct banks.
__device__ inline int staged_element(int e) {
  return (e % kBorders) * kStageStride + e / kBorders;
}

__device__ inline int staged_thread(int box, int border) {
  return border * kStageStride + box;
}

// Grid-stride launches: enough blocks to fill the GPU, capped.
int64_t blocks_for(int64_t tiles) {
  return std::min<int64_t>(tiles, int64_t(1) << 20);
}

template <typename scalar_t, bool kArgmax>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const scalar_t* __restrict__ input, // [N, 4C, H, W]
                   const scalar_t* __restrict__ boxes, // [N, K, 4]
                   scalar_t* __restrict__ output,      // [N, C, K, 4]
                   int32_t* __restrict__ argmax,       // [N, C, K, 4] when kArgmax
                   const BorderAlignParams p, int64_t box_tiles, int64_t channel_tiles, int64_t tiles) {
  using acc_t = at::opmath_type<scalar_t>;
  __shared__ scalar_t staged_value[kTileChannels][kStageSize];
  __shared__ int32_t staged_index[kArgmax ? kTileChannels : 1][kArgmax ? kStageSize : 1];
  const int box = threadIdx.x % kTileBoxes;
  const int border = threadIdx.x / kTileBoxes;
  const int64_t plane = p.height * p.width;
  // The tile loop is uniform across the block (the __syncthreads() inside it).
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const TileIndex t = tile_at(tile, p, box_tiles, channel_tiles);
    if (box < t.nk) {
      const scalar_t* b = boxes + (t.n * p.boxes + t.k0 + box) * 4;
      Walk<acc_t> w = border_walk<acc_t>(b[0], b[1], b[2], b[3], border, p.pool_size);
      const scalar_t* src[kTileChannels];
#pragma unroll
      for (int v = 0; v < kTileChannels; ++v) {
        // a channel past C reads channel c0 (always valid); its result is not written
        const int64_t c = t.c0 + v < p.channels ? t.c0 + v : t.c0;
        src[v] = input + ((t.n * kBorders + border) * p.channels + c) * plane;
      }
      MaxTracker<acc_t> best[kTileChannels];
      for (int64_t i = 0; i <= p.pool_size; ++i) {
        if (i > 0) {
          advance(w);
        }
        const Taps<acc_t> taps = taps_at(w.y, w.x, p.height, p.width);
#pragma unroll
        for (int v = 0; v < kTileChannels; ++v) {
          best[v].update(blend(taps, src[v]), static_cast<int>(i));
        }
      }
#pragma unroll
      for (int v = 0; v < kTileChannels; ++v) {
        staged_value[v][staged_thread(box, border)] = static_cast<scalar_t>(best[v].result());
        if constexpr (kArgmax) {
          staged_index[v][staged_thread(box, border)] = best[v].index;
        }
      }
    }
    __syncthreads();
    const int e = threadIdx.x;
    if (e < t.nk * kBorders) {
#pragma unroll
      for (int v = 0; v < kTileChannels; ++v) {
        if (t.c0 + v < p.channels) {
          const int64_t o = ((t.n * p.channels + t.c0 + v) * p.boxes + t.k0) * kBorders + e;
          output[o] = staged_value[v][staged_element(e)];
          if constexpr (kArgmax) {
            argmax[o] = staged_index[v][staged_element(e)];
          }
        }
      }
    }
    __syncthreads();
  }
}

// sum_t: acc_t (atomics of values) or int64_t (fixed point, kFixedPoint).
template <typename scalar_t, typename sum_t, bool kFixedPoint>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const scalar_t* __restrict__ grad_output, // [N, C, K, 4]
                    const scalar_t* __restrict__ boxes,       // [N, K, 4]
                    const int32_t* __restrict__ argmax,       // [N, C, K, 4]
                    sum_t* __restrict__ grad,                 // [N, 4C, H, W]
                    const BorderAlignParams p, int64_t box_tiles, int64_t channel_tiles, int64_t tiles,
                    const double* __restrict__ max_abs) {
  using acc_t = at::opmath_type<scalar_t>;
  __shared__ acc_t staged_value[kTileChannels][kStageSize];
  __shared__ int32_t staged_index[kTileChannels][kStageSize];
  double scale = 1.0;
  if constexpr (kFixedPoint) {
    scale = fixed_point_scale(*max_abs, static_cast<double>(p.boxes));
    if (!isfinite(scale)) {
      return; // uniform across the grid: the conversion writes NaN everywhere
    }
  }
  const int box = threadIdx.x % kTileBoxes;
  const int border = threadIdx.x / kTileBoxes;
  const int64_t plane = p.height * p.width;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const TileIndex t = tile_at(tile, p, box_tiles, channel_tiles);
    const int e = threadIdx.x;
    if (e < t.nk * kBorders) {
#pragma unroll
      for (int v = 0; v < kTileChannels; ++v) {
        if (t.c0 + v < p.channels) {
          const int64_t o = ((t.n * p.channels + t.c0 + v) * p.boxes + t.k0) * kBorders + e;
          staged_value[v][staged_element(e)] = static_cast<acc_t>(grad_output[o]);
          staged_index[v][staged_element(e)] = argmax[o];
        }
      }
    }
    __syncthreads();
    if (box < t.nk) {
      const scalar_t* b = boxes + (t.n * p.boxes + t.k0 + box) * 4;
      const Walk<acc_t> start = border_walk<acc_t>(b[0], b[1], b[2], b[3], border, p.pool_size);
#pragma unroll
      for (int v = 0; v < kTileChannels; ++v) {
        if (t.c0 + v >= p.channels) {
          continue;
        }
        const int32_t i = staged_index[v][staged_thread(box, border)];
        const acc_t g = staged_value[v][staged_thread(box, border)];
        if (i < 0 || i > p.pool_size || g == acc_t(0)) {
          continue; // nothing to add (a zero gradient adds exact zeros)
        }
        const Walk<acc_t> w = walk_to(start, i);
        const Taps<acc_t> taps = taps_at(w.y, w.x, p.height, p.width);
        if (!taps.valid) {
          continue;
        }
        sum_t* target = grad + ((t.n * kBorders + border) * p.channels + t.c0 + v) * plane;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const acc_t add = g * taps.c.weight[j];
          if constexpr (kFixedPoint) {
            // value * scale rounded; two's complement makes a negative add subtract
            const double fixed = static_cast<double>(add) * scale;
            atomicAdd(reinterpret_cast<unsigned long long*>(target + taps.c.offset[j]),
                      static_cast<unsigned long long>(llrint(fixed)));
          } else {
            gpuAtomicAdd(target + taps.c.offset[j], add);
          }
        }
      }
    }
    __syncthreads();
  }
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    fixed_point_to_value_kernel(const int64_t* __restrict__ sums, scalar_t* __restrict__ out, int64_t n,
                                const double* __restrict__ max_abs, double adds_bound) {
  const double scale = fixed_point_scale(*max_abs, adds_bound);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = static_cast<scalar_t>(isfinite(scale) ? static_cast<double>(sums[i]) / scale : NAN);
  }
}

struct Grid {
  int64_t box_tiles, channel_tiles, tiles;
};

Grid grid_of(const BorderAlignParams& p) {
  Grid g;
  g.box_tiles = (p.boxes + kTileBoxes - 1) / kTileBoxes;
  g.channel_tiles = (p.channels + kTileChannels - 1) / kTileChannels;
  g.tiles = p.batch * g.channel_tiles * g.box_tiles;
  return g;
}

} // namespace

std::tuple<at::Tensor, at::Tensor> border_align_forward_cuda(const at::Tensor& input_, const at::Tensor& boxes_,
                                                             const BorderAlignParams& p, bool with_argmax) {
  const c10::cuda::CUDAGuard guard(input_.device());
  const at::Tensor input = input_.contiguous();
  const at::Tensor boxes = boxes_.contiguous();
  at::Tensor output = at::empty({p.batch, p.channels, p.boxes, kBorders}, input.options());
  at::Tensor argmax = at::empty(with_argmax ? output.sizes() : at::IntArrayRef{0}, input.options().dtype(at::kInt));
  if (output.numel() == 0) {
    return {output, argmax};
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const Grid grid = grid_of(p);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::border_align (CUDA)", [&] {
    if (with_argmax) {
      forward_kernel<scalar_t, true><<<blocks_for(grid.tiles), kThreads, 0, stream>>>(
          input.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(), output.mutable_data_ptr<scalar_t>(),
          argmax.mutable_data_ptr<int32_t>(), p, grid.box_tiles, grid.channel_tiles, grid.tiles);
    } else {
      forward_kernel<scalar_t, false><<<blocks_for(grid.tiles), kThreads, 0, stream>>>(
          input.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(), output.mutable_data_ptr<scalar_t>(),
          nullptr, p, grid.box_tiles, grid.channel_tiles, grid.tiles);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {output, argmax};
}

at::Tensor border_align_backward_cuda(const at::Tensor& grad_output_, const at::Tensor& boxes_,
                                      const at::Tensor& argmax_, const BorderAlignParams& p) {
  const c10::cuda::CUDAGuard guard(grad_output_.device());
  const at::ScalarType dtype = grad_output_.scalar_type();
  const bool reduced = dtype == at::kHalf || dtype == at::kBFloat16;
  const std::vector<int64_t> shape{p.batch, kBorders * p.channels, p.height, p.width};
  const int64_t numel = shape[0] * shape[1] * shape[2] * shape[3];
  if (grad_output_.numel() == 0 || numel == 0) {
    return at::zeros(shape, grad_output_.options());
  }
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor boxes = boxes_.contiguous();
  const at::Tensor argmax = argmax_.contiguous();
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const Grid grid = grid_of(p);
  const bool deterministic = at::globalContext().deterministicAlgorithms();
  at::Tensor grad;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mmops::border_align backward (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    if (deterministic) {
      const at::Tensor max_abs = grad_output.abs().amax().to(at::kDouble);
      at::Tensor sums = at::zeros(shape, grad_output.options().dtype(at::kLong));
      backward_kernel<scalar_t, int64_t, true><<<blocks_for(grid.tiles), kThreads, 0, stream>>>(
          grad_output.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(), argmax.const_data_ptr<int32_t>(),
          sums.mutable_data_ptr<int64_t>(), p, grid.box_tiles, grid.channel_tiles, grid.tiles,
          max_abs.const_data_ptr<double>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      grad = at::empty(shape, grad_output.options());
      const int64_t blocks = std::min<int64_t>((numel + kThreads - 1) / kThreads, int64_t(1) << 20);
      fixed_point_to_value_kernel<scalar_t>
          <<<blocks, kThreads, 0, stream>>>(sums.const_data_ptr<int64_t>(), grad.mutable_data_ptr<scalar_t>(), numel,
                                            max_abs.const_data_ptr<double>(), static_cast<double>(p.boxes));
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
    // float / double atomics straight into the gradient; half / bfloat16 into a float buffer
    grad = at::zeros(shape, grad_output.options().dtype(reduced ? at::kFloat : dtype));
    backward_kernel<scalar_t, acc_t, false><<<blocks_for(grid.tiles), kThreads, 0, stream>>>(
        grad_output.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(), argmax.const_data_ptr<int32_t>(),
        grad.mutable_data_ptr<acc_t>(), p, grid.box_tiles, grid.channel_tiles, grid.tiles, nullptr);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return reduced && !deterministic ? grad.to(dtype) : grad;
}

} // namespace kernels
} // namespace mmops

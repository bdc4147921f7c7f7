// CUDA kernels of border_align (border_align_math.h).
//
// Forward, C >= 32 channels: the input is read channels-last ([N, H, W, 4C];
// an NCHW input is transposed once, kernels/common/layout.h). A block owns 8
// boxes of one image (32 (box, border) items) and a chunk of 32 x VEC channels;
// each warp walks one item at a time: the walk and the taps of a point are
// warp-uniform, and lane l loads the VEC channels l * VEC .. of the four taps
// (one coalesced 32 x VEC-channel access per tap; two points' loads in flight).
// So the per-point arithmetic is shared by 32 x VEC channels and every load
// instruction reads whole cache lines, whatever the boxes (neighbouring or
// random). Tiles run box-fastest: the blocks resident at a time read one
// channel chunk of the map, which stays in L2.
// Forward, C < 32: NCHW, a block owns 64 consecutive boxes of one image and 4
// consecutive channels; thread t walks border t / 64 of box t % 64 for the 4
// channels (one walk, one set of taps per point, 16 independent loads per point).
// Both write the [N, C, H * W, 4] output (and argmax_idx) through a shared tile,
// so that a channel's run of boxes x 4 borders is written coalesced.
//
// Backward: the NCHW tile layout above (64 boxes x 4 channels per block),
// grad_output and argmax_idx read through the shared tile; each output adds
// its gradient times the four bilinear weights of its winning point (replayed
// walk) with atomics, straight into a zeroed gradient (float, double) or a
// float buffer (half, bfloat16) converted at the end; the order of the float
// additions varies from run to run (as mmcv's).
// Deterministic (torch.use_deterministic_algorithms(True)): the same adds as
// int64 fixed point (common/fixed_point.h's fixed_point_scale, from
// max |grad_output| and H * W adds per pixel), whose total does not depend on
// their order: bitwise repeatable gradients, rounded to about 2^-62 of
// H * W * max |grad_output|. A non-finite grad_output makes that gradient all NaN.
// An argmax_idx outside [0, pool_size] sends nothing (never an out-of-bounds add).

#include "border_align/border_align_kernels.h"
#include "common/cuda_helpers.cuh"
#include "common/fixed_point_cuda.cuh"
#include "common/layout.h"

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
#include <type_traits>
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

// ---- channels-last forward (C >= kMinChannelsLast)

constexpr int kMinChannelsLast = 32;
constexpr int kClBoxes = 8;                   // boxes of a tile
constexpr int kClItems = kClBoxes * kBorders; // (box, border) items of a tile
constexpr int kClWarps = 8;
constexpr int kClThreads = kClWarps * 32;
constexpr int kClItemStride = kClItems + 1; // a staged channel row, padded

// The sample of VEC channels at the taps (products rounded once, added in
// order: the CPU's arithmetic) and the loads it needs.
template <typename PackT, typename acc_t>
struct PointLoad {
  Taps<acc_t> taps;
  PackT px[4];
};

template <typename PackT, typename acc_t>
__device__ inline PointLoad<PackT, acc_t> load_point(const Walk<acc_t>& w, const PackT* pixels, int64_t pixel_stride,
                                                     int64_t height, int64_t width, bool wanted) {
  PointLoad<PackT, acc_t> l;
  l.taps = taps_at(w.y, w.x, height, width);
  const bool load = wanted && l.taps.valid;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    l.px[j] = load ? cuda_helpers::load_readonly(pixels + l.taps.c.offset[j] * pixel_stride) : PackT{};
  }
  return l;
}

template <typename acc_t, typename PackT>
__device__ inline acc_t point_value(const PointLoad<PackT, acc_t>& l, int v) {
  if (!l.taps.valid) {
    return acc_t(0);
  }
  acc_t value = mul_rn(l.taps.c.weight[0], static_cast<acc_t>(l.px[0].v[v]));
  value += mul_rn(l.taps.c.weight[1], static_cast<acc_t>(l.px[1].v[v]));
  value += mul_rn(l.taps.c.weight[2], static_cast<acc_t>(l.px[2].v[v]));
  value += mul_rn(l.taps.c.weight[3], static_cast<acc_t>(l.px[3].v[v]));
  return value;
}

template <typename scalar_t, int VEC, bool kArgmax>
__global__ void __launch_bounds__(kClThreads)
    forward_channels_last_kernel(const scalar_t* __restrict__ input, // [N, H, W, 4C] in memory
                                 const scalar_t* __restrict__ boxes, // [N, K, 4]
                                 scalar_t* __restrict__ output,      // [N, C, K, 4]
                                 int32_t* __restrict__ argmax,       // [N, C, K, 4] when kArgmax
                                 const BorderAlignParams p, int64_t box_tiles, int64_t channel_tiles, int64_t tiles) {
  using acc_t = at::opmath_type<scalar_t>;
  using PackT = cuda_helpers::Pack<scalar_t, VEC>;
  constexpr int kChannels = 32 * VEC; // channels of a tile
  // staged[row * kClItemStride + item], row = v * 32 + lane for channel lane * VEC + v
  __shared__ scalar_t staged_value[kChannels * kClItemStride];
  __shared__ int32_t staged_index[kArgmax ? kChannels * kClItemStride : 1];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int64_t plane = p.height * p.width;
  const int64_t pixel_stride = kBorders * p.channels / VEC; // packs from one pixel to the next
  // The tile loop is uniform across the block (the __syncthreads() inside it).
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t kt = tile % box_tiles;
    const int64_t rest = tile / box_tiles;
    const int64_t c0 = (rest % channel_tiles) * kChannels;
    const int64_t n = rest / channel_tiles;
    const int64_t k0 = kt * kClBoxes;
    const int nk = static_cast<int>(p.boxes - k0 < kClBoxes ? p.boxes - k0 : kClBoxes);
    const int64_t c = c0 + lane * VEC;                              // the lane's first channel within its group
    const bool active = c < p.channels;                             // VEC divides C: all of the lane's channels or none
    for (int item = warp; item < nk * kBorders; item += kClWarps) { // warp-uniform
      const int box = item / kBorders;
      const int border = item % kBorders;
      const scalar_t* b = boxes + (n * p.boxes + k0 + box) * 4;
      Walk<acc_t> w = border_walk<acc_t>(b[0], b[1], b[2], b[3], border, p.pool_size);
      const PackT* pixels = reinterpret_cast<const PackT*>(input + n * plane * kBorders * p.channels +
                                                           border * p.channels + (active ? c : 0));
      MaxTracker<acc_t> best[VEC];
      // Two points' loads are issued before either is used; the maximum sees them in order.
      for (int64_t i = 0; i <= p.pool_size; i += 2) {
        const bool second = i + 1 <= p.pool_size;
        Walk<acc_t> next = w;
        advance(next);
        const PointLoad<PackT, acc_t> first_point = load_point(w, pixels, pixel_stride, p.height, p.width, active);
        const PointLoad<PackT, acc_t> second_point =
            load_point(next, pixels, pixel_stride, p.height, p.width, active && second);
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
          best[v].update(point_value(first_point, v), static_cast<int>(i));
          if (second) {
            best[v].update(point_value(second_point, v), static_cast<int>(i + 1));
          }
        }
        w = next;
        advance(w);
      }
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        const int at = (v * 32 + lane) * kClItemStride + item;
        staged_value[at] = static_cast<scalar_t>(best[v].result());
        if constexpr (kArgmax) {
          staged_index[at] = best[v].index;
        }
      }
    }
    __syncthreads();
    // Coalesced write: channel c0 + cl holds nk * 4 consecutive outputs.
    for (int e = threadIdx.x; e < kChannels * kClItems; e += kClThreads) {
      const int cl = e / kClItems;
      const int item = e % kClItems;
      if (item < nk * kBorders && c0 + cl < p.channels) {
        const int at = ((cl % VEC) * 32 + cl / VEC) * kClItemStride + item;
        const int64_t o = ((n * p.channels + c0 + cl) * p.boxes + k0) * kBorders + item;
        output[o] = staged_value[at];
        if constexpr (kArgmax) {
          argmax[o] = staged_index[at];
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
  const at::Tensor boxes = boxes_.contiguous();
  at::Tensor output = at::empty({p.batch, p.channels, p.boxes, kBorders}, input_.options());
  at::Tensor argmax = at::empty(with_argmax ? output.sizes() : at::IntArrayRef{0}, input_.options().dtype(at::kInt));
  if (output.numel() == 0) {
    return {output, argmax};
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  int32_t* argmax_data = with_argmax ? argmax.mutable_data_ptr<int32_t>() : nullptr;
  if (p.channels >= kMinChannelsLast) {
    const at::Tensor input = channels_last_cuda(input_);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::border_align (CUDA)", [&] {
      constexpr int kVec = cuda_helpers::channel_vector<scalar_t>();
      using WidePack = cuda_helpers::Pack<scalar_t, kVec>;
      // whole vectors: VEC divides C, a tile of 32 x VEC channels is filled, the data aligned
      const bool vectorized = p.channels % kVec == 0 && p.channels >= 32 * kVec &&
                              reinterpret_cast<uintptr_t>(input.const_data_ptr<scalar_t>()) % alignof(WidePack) == 0;
      auto launch = [&](auto vec_tag) {
        constexpr int VEC = decltype(vec_tag)::value;
        const int64_t box_tiles = (p.boxes + kClBoxes - 1) / kClBoxes;
        const int64_t channel_tiles = (p.channels + 32 * VEC - 1) / (32 * VEC);
        const int64_t tiles = p.batch * channel_tiles * box_tiles;
        if (with_argmax) {
          forward_channels_last_kernel<scalar_t, VEC, true><<<blocks_for(tiles), kClThreads, 0, stream>>>(
              input.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(), output.mutable_data_ptr<scalar_t>(),
              argmax_data, p, box_tiles, channel_tiles, tiles);
        } else {
          forward_channels_last_kernel<scalar_t, VEC, false><<<blocks_for(tiles), kClThreads, 0, stream>>>(
              input.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(), output.mutable_data_ptr<scalar_t>(),
              nullptr, p, box_tiles, channel_tiles, tiles);
        }
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      };
      if (vectorized) {
        launch(std::integral_constant<int, kVec>{});
      } else {
        launch(std::integral_constant<int, 1>{});
      }
    });
    return {output, argmax};
  }
  const at::Tensor input = input_.contiguous();
  const Grid grid = grid_of(p);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::border_align (CUDA)", [&] {
    if (with_argmax) {
      forward_kernel<scalar_t, true><<<blocks_for(grid.tiles), kThreads, 0, stream>>>(
          input.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(), output.mutable_data_ptr<scalar_t>(),
          argmax_data, p, grid.box_tiles, grid.channel_tiles, grid.tiles);
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
      fixed_point::fixed_point_to_value_kernel<scalar_t, double>
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

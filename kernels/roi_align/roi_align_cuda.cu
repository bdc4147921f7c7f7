// CUDA kernels of roi_align.
//
// Forward. The kernel reads features channels-last ([N, H, W, C] in memory),
// so that the lanes of a warp fetch one bilinear tap for 32 x VEC consecutive
// channels with one coalesced load (VEC channels per lane, 16 or 8 bytes);
// an NCHW input is transposed once first. One block handles one roi and one
// chunk of channels:
//   * the per-axis bilinear taps of the roi's samples are computed once into
//     shared memory (the weights are separable) and reused by every channel;
//   * warps walk the bins, lanes the channels; wide per-lane vectors keep the
//     per-sample index arithmetic (which bounds this kernel) small per channel,
//     and the taps of two samples are loaded before either is used;
//   * results go through a shared tile so that the NCHW output [K, C, PH, PW]
//     is written coalesced.
// Backward, default: the same blocks read grad_output through the tile and
// scatter into a channels-last float (double) accumulation buffer with
// coalesced atomic adds, four channels per add on sm_90 (vector atomics); one
// pass then converts the buffer to the NCHW gradient.
// Backward, deterministic (torch.use_deterministic_algorithms): a gather.
// Every gradient value is owned by one thread that sums, in a fixed order, the
// contributions of the samples that touch it. A block owns a tile of 8 rows x
// 32 pixels of one image and 64 channels (32 for double); warp w owns tile row
// w and lane l channels l and l + 32. The block examines every roi (culled by its
// footprint) and each warp adds the samples whose taps fall on its row into a
// shared tile, written once to the NCHW gradient. No atomics: bitwise
// repeatable.
// A roi whose batch index is out of range pools zeros and gets no gradient.

#include "roi_align/roi_align_kernels.h"
#include "common/cuda_helpers.cuh"
#include "roi_align/roi_align_math.h"

#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

namespace mmops {
namespace kernels {
namespace {

using namespace roi_align_math;
using cuda_helpers::channel_vector;
using cuda_helpers::load_readonly;
using cuda_helpers::Pack;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxTaps = 256;    // per-axis taps cached in shared memory
constexpr int kBinChunk = 32;    // bins staged in the shared tile at a time
constexpr int kSampleBatch = 4;  // samples whose taps are loaded together

template <typename T>
__device__ inline T smaller(T a, T b) {
  return a < b ? a : b;
}

template <typename T>
__device__ inline T larger(T a, T b) {
  return a > b ? a : b;
}

// Pixel data and size of each feature map, passed by value to the kernels.
// Entries are read with select_entry (see roi_align_math.h).
template <typename T>
struct LevelTable {
  T* data[kMaxLevels];
  int64_t height[kMaxLevels];
  int64_t width[kMaxLevels];
};

// ---------------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------------

// Everything a block needs to know about its roi.
template <typename acc_t>
struct BlockRoi {
  int64_t batch;   // -1: the roi pools zeros (bad index or non-finite box)
  int level;
  int64_t height, width;  // of its feature map
  RoiBox<acc_t> box;
  bool cached;     // taps in shared memory (else computed per sample)
};

template <typename scalar_t, typename acc_t, typename T>
__device__ BlockRoi<acc_t> setup_roi(const scalar_t* rois, int64_t k, int64_t batch,
                                     const LevelTable<T>& levels, const RoIAlignParams& p,
                                     AxisTap<acc_t>* ytaps, AxisTap<acc_t>* xtaps) {
  const scalar_t* roi = rois + k * 5;
  const RoiSource<acc_t> src = locate_roi<acc_t>(
      static_cast<acc_t>(roi[0]), static_cast<acc_t>(roi[1]), static_cast<acc_t>(roi[2]),
      static_cast<acc_t>(roi[3]), static_cast<acc_t>(roi[4]), batch, p.spatial_scale,
      p.num_levels, p.finest_scale, p.aligned, p.pooled_height, p.pooled_width, p.sampling_ratio);
  BlockRoi<acc_t> r;
  r.batch = src.batch;
  r.level = src.level;
  r.box = src.box;
  r.height = select_entry(levels.height, r.level);
  r.width = select_entry(levels.width, r.level);
  const int ny = static_cast<int>(p.pooled_height) * r.box.grid_h;
  const int nx = static_cast<int>(p.pooled_width) * r.box.grid_w;
  r.cached = ny <= kMaxTaps && nx <= kMaxTaps;
  if (r.batch >= 0 && r.cached) {
    for (int i = threadIdx.x; i < ny + nx; i += blockDim.x) {
      if (i < ny) {
        ytaps[i] = axis_tap(sample_coord(r.box.start_y, r.box.bin_h, i / r.box.grid_h, i % r.box.grid_h, r.box.grid_h), r.height);
      } else {
        const int j = i - ny;
        xtaps[j] = axis_tap(sample_coord(r.box.start_x, r.box.bin_w, j / r.box.grid_w, j % r.box.grid_w, r.box.grid_w), r.width);
      }
    }
  }
  __syncthreads();
  return r;
}

template <typename acc_t>
__device__ inline AxisTap<acc_t> y_tap(const BlockRoi<acc_t>& r, const AxisTap<acc_t>* ytaps,
                                        int64_t ph, int iy) {
  return r.cached ? ytaps[ph * r.box.grid_h + iy]
                  : axis_tap(sample_coord(r.box.start_y, r.box.bin_h, ph, iy, r.box.grid_h), r.height);
}

template <typename acc_t>
__device__ inline AxisTap<acc_t> x_tap(const BlockRoi<acc_t>& r, const AxisTap<acc_t>* xtaps,
                                        int64_t pw, int ix) {
  return r.cached ? xtaps[pw * r.box.grid_w + ix]
                  : axis_tap(sample_coord(r.box.start_x, r.box.bin_w, pw, ix, r.box.grid_w), r.width);
}

// Shared tile: kBinChunk bins x (32 * VEC) channels, padded against bank
// conflicts; the argmax part only in max mode.
template <typename acc_t, int VEC, bool kMax>
struct Tile {
  static constexpr int kChannels = 32 * VEC;
  static constexpr int kStride = kChannels + 1;
  acc_t value[kBinChunk * kStride];
  int32_t argmax[kMax ? kBinChunk * kStride : 1];
  __device__ inline int at(int bin, int channel) const { return bin * kStride + channel; }
};

// Loads the four taps of one sample for VEC channels (nothing when the sample
// is outside the map: zero weights).
template <typename PackT, typename acc_t>
struct SampleLoad {
  PackT px[4];
  acc_t w[4];
};

template <typename PackT, typename acc_t>
__device__ inline SampleLoad<PackT, acc_t> load_sample(const PackT* pixels, int64_t pixel_stride,
                                                       int64_t width, const AxisTap<acc_t>& ty,
                                                       const AxisTap<acc_t>& tx, bool wanted) {
  SampleLoad<PackT, acc_t> s;
  const bool valid = wanted && ty.valid && tx.valid;
  const Corners<acc_t> cr = corners(ty, tx, width);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    s.w[j] = valid ? cr.weight[j] : acc_t(0);
    s.px[j] = valid ? load_readonly(pixels + cr.offset[j] * pixel_stride) : PackT{};
  }
  return s;
}

template <typename acc_t, typename PackT, int VEC>
__device__ inline acc_t sample_value(const SampleLoad<PackT, acc_t>& s, int v) {
  acc_t value = acc_t(0);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    value += s.w[j] * static_cast<acc_t>(s.px[j].v[v]);
  }
  return value;
}

template <typename scalar_t, int VEC, bool kMax>
__global__ void __launch_bounds__(kThreads) forward_kernel(
    const LevelTable<const scalar_t> levels,  // each [N, H_l, W_l, C]
    const scalar_t* __restrict__ rois, scalar_t* __restrict__ output,  // [K, C, PH, PW]
    int32_t* __restrict__ argmax, int64_t batch, int64_t channels, RoIAlignParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  using TileT = Tile<acc_t, VEC, kMax>;
  using PackT = Pack<scalar_t, VEC>;
  __shared__ AxisTap<acc_t> ytaps[kMaxTaps];
  __shared__ AxisTap<acc_t> xtaps[kMaxTaps];
  __shared__ TileT tile;

  const int64_t k = blockIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * TileT::kChannels;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t bins = p.pooled_height * p.pooled_width;
  const int64_t chunk_channels = smaller<int64_t>(TileT::kChannels, channels - c0);
  const BlockRoi<acc_t> r = setup_roi(rois, k, batch, levels, p, ytaps, xtaps);
  const int gh = r.box.grid_h, gw = r.box.grid_w;
  const acc_t inv_count = gh * gw > 0 ? acc_t(1) / static_cast<acc_t>(gh * gw) : acc_t(0);
  const int64_t c = c0 + lane * VEC;
  const int64_t width = r.width;
  const PackT* pixels = reinterpret_cast<const PackT*>(
      select_entry(levels.data, r.level) + ((r.batch > 0 ? r.batch : 0) * r.height * r.width) * channels + c);
  const int64_t pixel_stride = channels / VEC;  // in packs
  const bool active = r.batch >= 0 && c < channels;

  for (int64_t bin0 = 0; bin0 < bins; bin0 += kBinChunk) {
    const int64_t chunk_bins = smaller<int64_t>(kBinChunk, bins - bin0);
    for (int bl = warp; bl < chunk_bins; bl += kWarps) {
      const int64_t ph = (bin0 + bl) / p.pooled_width, pw = (bin0 + bl) % p.pooled_width;
      MaxTracker<acc_t> tracker[VEC];
      acc_t sum[VEC];
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        sum[v] = acc_t(0);
      }
      for (int iy = 0; active && iy < gh; ++iy) {
        const AxisTap<acc_t> ty = y_tap(r, ytaps, ph, iy);
        for (int ix = 0; ix < gw; ix += 2) {
          // Two samples' loads are issued before either is used.
          const bool second = ix + 1 < gw;
          const auto a = load_sample(pixels, pixel_stride, width, ty, x_tap(r, xtaps, pw, ix), true);
          const auto b = load_sample(pixels, pixel_stride, width, ty,
                                     x_tap(r, xtaps, pw, second ? ix + 1 : ix), second);
#pragma unroll
          for (int v = 0; v < VEC; ++v) {
            const acc_t va = sample_value<acc_t, PackT, VEC>(a, v);
            const acc_t vb = sample_value<acc_t, PackT, VEC>(b, v);
            if (kMax) {
              tracker[v].update(va, iy * gw + ix);
              if (second) {
                tracker[v].update(vb, iy * gw + ix + 1);
              }
            } else {
              sum[v] += va;
              sum[v] += vb;  // zero without a second sample
            }
          }
        }
      }
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        tile.value[tile.at(bl, lane * VEC + v)] = kMax ? tracker[v].result() : sum[v] * inv_count;
        if (kMax) {
          tile.argmax[tile.at(bl, lane * VEC + v)] = tracker[v].index;
        }
      }
    }
    __syncthreads();
    // Coalesced NCHW write: the chunk's channels are contiguous runs of bins.
    for (int i = threadIdx.x; i < chunk_channels * chunk_bins; i += kThreads) {
      const int cl = i / chunk_bins, bl = i % chunk_bins;
      const int64_t o = ((k * channels) + c0 + cl) * bins + bin0 + bl;
      output[o] = static_cast<scalar_t>(tile.value[tile.at(bl, cl)]);
      if (kMax && argmax) {
        argmax[o] = tile.argmax[tile.at(bl, cl)];
      }
    }
    __syncthreads();
  }
}

// ---------------------------------------------------------------------------
// Backward, default (scatter with atomics)
// ---------------------------------------------------------------------------

// buffer[0..VEC) += values, atomically: one vector atomic for four floats on
// sm_90 (the buffer is 16-byte aligned there), else one atomic per value.
template <typename sum_t, int VEC>
__device__ inline void atomic_add_channels(sum_t* address, const sum_t (&values)[VEC]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (std::is_same_v<sum_t, float> && VEC == 4) {
    atomicAdd(reinterpret_cast<float4*>(address), make_float4(values[0], values[1], values[2], values[3]));
    return;
  }
#endif
#pragma unroll
  for (int v = 0; v < VEC; ++v) {
    atomicAdd(address + v, values[v]);
  }
}

template <typename scalar_t, int VEC, bool kMax>
__global__ void __launch_bounds__(kThreads) scatter_backward_kernel(
    const scalar_t* __restrict__ grad_output,  // [K, C, PH, PW]
    const scalar_t* __restrict__ rois, const int32_t* __restrict__ argmax,
    const LevelTable<at::opmath_type<scalar_t>> grad_sums,  // each [N, H_l, W_l, C]
    int64_t batch, int64_t channels, RoIAlignParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  using TileT = Tile<acc_t, VEC, kMax>;
  __shared__ AxisTap<acc_t> ytaps[kMaxTaps];
  __shared__ AxisTap<acc_t> xtaps[kMaxTaps];
  __shared__ TileT tile;

  const int64_t k = blockIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * TileT::kChannels;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t bins = p.pooled_height * p.pooled_width;
  const int64_t chunk_channels = smaller<int64_t>(TileT::kChannels, channels - c0);
  const BlockRoi<acc_t> r = setup_roi(rois, k, batch, grad_sums, p, ytaps, xtaps);
  const int gh = r.box.grid_h, gw = r.box.grid_w;
  if (r.batch < 0 || gh * gw == 0) {
    return;  // uniform across the block
  }
  const acc_t inv_count = acc_t(1) / static_cast<acc_t>(gh * gw);
  const int64_t c = c0 + lane * VEC;
  const int64_t width = r.width;
  acc_t* pixels = select_entry(grad_sums.data, r.level) + (r.batch * r.height * r.width) * channels + c;

  // Adds value * (the sample's bilinear weights) to its four taps.
  auto scatter = [&](const AxisTap<acc_t>& ty, const AxisTap<acc_t>& tx, const acc_t (&value)[VEC]) {
    if (!(ty.valid && tx.valid)) {
      return;
    }
    const Corners<acc_t> cr = corners(ty, tx, width);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      acc_t add[VEC];
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        add[v] = value[v] * cr.weight[j];
      }
      atomic_add_channels<acc_t, VEC>(pixels + cr.offset[j] * channels, add);
    }
  };

  for (int64_t bin0 = 0; bin0 < bins; bin0 += kBinChunk) {
    const int64_t chunk_bins = smaller<int64_t>(kBinChunk, bins - bin0);
    for (int i = threadIdx.x; i < chunk_channels * chunk_bins; i += kThreads) {
      const int cl = i / chunk_bins, bl = i % chunk_bins;
      const int64_t o = ((k * channels) + c0 + cl) * bins + bin0 + bl;
      tile.value[tile.at(bl, cl)] = static_cast<acc_t>(grad_output[o]);
      if (kMax) {
        tile.argmax[tile.at(bl, cl)] = argmax[o];
      }
    }
    __syncthreads();
    if (c < channels) {
      for (int bl = warp; bl < chunk_bins; bl += kWarps) {
        const int64_t ph = (bin0 + bl) / p.pooled_width, pw = (bin0 + bl) % p.pooled_width;
        if (kMax) {
          // Each channel's gradient goes to its own winning sample.
#pragma unroll
          for (int v = 0; v < VEC; ++v) {
            const int s = tile.argmax[tile.at(bl, lane * VEC + v)];
            if (s >= 0 && s < gh * gw) {
              const AxisTap<acc_t> ty = y_tap(r, ytaps, ph, s / gw), tx = x_tap(r, xtaps, pw, s % gw);
              if (ty.valid && tx.valid) {
                const Corners<acc_t> cr = corners(ty, tx, width);
                const acc_t g = tile.value[tile.at(bl, lane * VEC + v)];
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                  atomicAdd(pixels + cr.offset[j] * channels + v, g * cr.weight[j]);
                }
              }
            }
          }
        } else {
          acc_t g_sample[VEC];
#pragma unroll
          for (int v = 0; v < VEC; ++v) {
            g_sample[v] = tile.value[tile.at(bl, lane * VEC + v)] * inv_count;
          }
          for (int iy = 0; iy < gh; ++iy) {
            const AxisTap<acc_t> ty = y_tap(r, ytaps, ph, iy);
            for (int ix = 0; ix < gw; ++ix) {
              scatter(ty, x_tap(r, xtaps, pw, ix), g_sample);
            }
          }
        }
      }
    }
    __syncthreads();
  }
}

// ---------------------------------------------------------------------------
// Backward, deterministic (gather)
// ---------------------------------------------------------------------------

constexpr int kGatherRows = kWarps;  // tile rows: one per warp
constexpr int kGatherWidth = 32;     // tile columns

// Channels per lane: each roi found near a tile is scanned once per block, so
// more channels per block means less scanning per gradient value. The tile
// is 8 x 32 pixels x 64 channels of float (x 32 channels of double), 66 KB.
template <typename acc_t>
constexpr int gather_vector() {
  return sizeof(acc_t) == 8 ? 1 : 2;
}

template <typename acc_t>
constexpr int gather_channels() {
  return 32 * gather_vector<acc_t>();
}

// acc[row][x][v * 32 + lane]; the padding makes the write-out (threads along
// x) conflict-free, and lanes on consecutive channels are too.
template <typename acc_t>
constexpr int gather_stride() {
  return gather_channels<acc_t>() + 1;
}

template <typename acc_t>
constexpr size_t gather_smem_bytes() {
  return sizeof(acc_t) * kGatherRows * kGatherWidth * gather_stride<acc_t>();
}

// Gradient maps, NCHW, and how the grid's tiles are numbered: level l's
// tiles are [first_tile[l], first_tile[l + 1]), image-major, then row-major.
template <typename T>
struct GatherTable {
  T* data[kMaxLevels];
  int64_t height[kMaxLevels];
  int64_t width[kMaxLevels];
  int64_t tiles_x[kMaxLevels];
  int64_t tiles_per_image[kMaxLevels];
  int64_t first_tile[kMaxLevels];
};

// A roi that may touch the block's tile.
template <typename acc_t>
struct ListedRoi {
  acc_t start_y, start_x, bin_h, bin_w;
  int32_t k;
  int16_t grid_h, grid_w;
};

// True if the taps of some sample of `box` may fall inside rows [y0, y1) and
// columns [x0, x1). Conservative: every sample lies strictly inside the box
// and its taps within one pixel of it.
template <typename acc_t>
__device__ inline bool may_touch(const RoiBox<acc_t>& box, int64_t pooled_h, int64_t pooled_w,
                                 int64_t y0, int64_t y1, int64_t x0, int64_t x1) {
  const acc_t y_end = box.start_y + box.bin_h * static_cast<acc_t>(pooled_h);
  const acc_t x_end = box.start_x + box.bin_w * static_cast<acc_t>(pooled_w);
  const acc_t lo_y = smaller(box.start_y, y_end) - acc_t(1), hi_y = larger(box.start_y, y_end) + acc_t(1);
  const acc_t lo_x = smaller(box.start_x, x_end) - acc_t(1), hi_x = larger(box.start_x, x_end) + acc_t(1);
  return hi_y >= static_cast<acc_t>(y0) && lo_y < static_cast<acc_t>(y1) &&
         hi_x >= static_cast<acc_t>(x0) && lo_x < static_cast<acc_t>(x1);
}

template <typename scalar_t, bool kMax>
__global__ void __launch_bounds__(kThreads) gather_backward_kernel(
    const at::opmath_type<scalar_t>* __restrict__ grad_t,  // [K, PH*PW, C]
    const int32_t* __restrict__ argmax_t,                  // [K, PH*PW, C] (max mode)
    const scalar_t* __restrict__ rois, int64_t num_rois,
    const GatherTable<scalar_t> table, int64_t batch, int64_t channels, RoIAlignParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  constexpr int TW = kGatherWidth;
  constexpr int VEC = gather_vector<acc_t>();
  constexpr int kStride = gather_stride<acc_t>();
  extern __shared__ __align__(16) unsigned char gather_smem[];
  acc_t* acc = reinterpret_cast<acc_t*>(gather_smem);  // [kGatherRows][TW][kStride]
  __shared__ ListedRoi<acc_t> listed[kThreads];
  __shared__ int warp_counts[kWarps];

  // Which tile: level, image, tile row and column.
  const int64_t tile = blockIdx.x;
  int level = 0;
#pragma unroll
  for (int l = 1; l < kMaxLevels; ++l) {
    level = (l < p.num_levels && tile >= table.first_tile[l]) ? l : level;
  }
  const int64_t height = select_entry(table.height, level);
  const int64_t width = select_entry(table.width, level);
  const int64_t tiles_x = select_entry(table.tiles_x, level);
  const int64_t tiles_per_image = select_entry(table.tiles_per_image, level);
  const int64_t local = tile - select_entry(table.first_tile, level);
  const int64_t n = local / tiles_per_image;
  const int64_t y0 = (local % tiles_per_image) / tiles_x * kGatherRows;
  const int64_t x0 = (local % tiles_per_image) % tiles_x * TW;

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * gather_channels<acc_t>();
  const int64_t c = c0 + lane;  // and c + 32 * v
  const int64_t row = y0 + warp;  // the tile row this warp owns
  const int64_t bins = p.pooled_height * p.pooled_width;

  acc_t* my_row = acc + warp * TW * kStride + lane;  // acc[warp][x][v * 32 + lane]
  for (int x = 0; x < TW; ++x) {
#pragma unroll
    for (int v = 0; v < VEC; ++v) {
      my_row[x * kStride + v * 32] = acc_t(0);
    }
  }

  for (int64_t r0 = 0; r0 < num_rois; r0 += kThreads) {
    // 1. Each thread examines one roi; the ones that may touch the tile are
    //    listed in roi order (the order of the adds, hence deterministic).
    const int64_t k = r0 + threadIdx.x;
    bool take = false;
    ListedRoi<acc_t> entry{};
    if (k < num_rois) {
      const scalar_t* roi = rois + k * 5;
      const RoiSource<acc_t> src = locate_roi<acc_t>(
          static_cast<acc_t>(roi[0]), static_cast<acc_t>(roi[1]), static_cast<acc_t>(roi[2]),
          static_cast<acc_t>(roi[3]), static_cast<acc_t>(roi[4]), batch, p.spatial_scale,
          p.num_levels, p.finest_scale, p.aligned, p.pooled_height, p.pooled_width, p.sampling_ratio);
      take = src.batch == n && src.level == level && src.box.grid_h > 0 && src.box.grid_w > 0 &&
             may_touch(src.box, p.pooled_height, p.pooled_width, y0, y0 + kGatherRows, x0, x0 + TW);
      entry = {src.box.start_y, src.box.start_x, src.box.bin_h, src.box.bin_w, static_cast<int32_t>(k),
               static_cast<int16_t>(src.box.grid_h), static_cast<int16_t>(src.box.grid_w)};
    }
    const unsigned ballot = __ballot_sync(0xffffffffu, take);
    if (lane == 0) {
      warp_counts[warp] = __popc(ballot);
    }
    __syncthreads();
    int offset = 0, total = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      offset += w < warp ? warp_counts[w] : 0;
      total += warp_counts[w];
    }
    if (take) {
      listed[offset + __popc(ballot & ((1u << lane) - 1u))] = entry;
    }
    __syncthreads();

    // 2. Each warp adds the samples of the listed rois whose taps fall on its
    //    row and inside the tile's columns; lane = channel.
    for (int i = 0; i < total && row < height; ++i) {
      const ListedRoi<acc_t> roi = listed[i];
      const int gh = roi.grid_h, gw = roi.grid_w;
      const int ny = static_cast<int>(p.pooled_height) * gh, nx = static_cast<int>(p.pooled_width) * gw;
      const acc_t inv_count = acc_t(1) / static_cast<acc_t>(gh * gw);
      const int64_t roi_grads = static_cast<int64_t>(roi.k) * bins * channels + c;
      for (int sy0 = 0; sy0 < ny; sy0 += 32) {
        // Lane j looks at sample row sy0 + j: its weight on this warp's row.
        const int sy = sy0 + lane;
        acc_t wy = acc_t(0);
        bool row_hit = false;
        if (sy < ny) {
          const AxisTap<acc_t> t = axis_tap(sample_coord(roi.start_y, roi.bin_h, sy / gh, sy % gh, gh), height);
          row_hit = t.valid && (t.lo == row || t.hi == row);
          wy = (t.lo == row ? t.w_lo : acc_t(0)) + (t.hi == row ? t.w_hi : acc_t(0));
        }
        for (unsigned rows = __ballot_sync(0xffffffffu, row_hit); rows != 0; rows &= rows - 1) {
          const int j = __ffs(rows) - 1;
          const acc_t weight_y = __shfl_sync(0xffffffffu, wy, j);
          const int ph = (sy0 + j) / gh, iy = (sy0 + j) % gh;
          for (int sx0 = 0; sx0 < nx; sx0 += 32) {
            // Lane j looks at sample column sx0 + j: its taps inside the tile.
            const int sx = sx0 + lane;
            AxisTap<acc_t> t{0, 0, acc_t(0), acc_t(0), false};
            if (sx < nx) {
              t = axis_tap(sample_coord(roi.start_x, roi.bin_w, sx / gw, sx % gw, gw), width);
            }
            const bool lo_in = t.valid && t.lo >= x0 && t.lo < x0 + TW;
            const bool hi_in = t.valid && t.hi >= x0 && t.hi < x0 + TW;
            for (unsigned cols = __ballot_sync(0xffffffffu, lo_in || hi_in); cols != 0; cols &= cols - 1) {
              const int m = __ffs(cols) - 1;
              const int x_lo = __shfl_sync(0xffffffffu, t.lo, m) - static_cast<int>(x0);
              const int x_hi = __shfl_sync(0xffffffffu, t.hi, m) - static_cast<int>(x0);
              const acc_t w_lo = __shfl_sync(0xffffffffu, t.w_lo, m);
              const acc_t w_hi = __shfl_sync(0xffffffffu, t.w_hi, m);
              const int pw = (sx0 + m) / gw, ix = (sx0 + m) % gw;
              const int64_t at_bin = roi_grads + (ph * p.pooled_width + pw) * channels;
              const acc_t weight_lo = weight_y * w_lo, weight_hi = weight_y * w_hi;
#pragma unroll
              for (int v = 0; v < VEC; ++v) {
                if (c + 32 * v >= channels) {
                  continue;
                }
                acc_t g;
                if (kMax) {
                  if (argmax_t[at_bin + 32 * v] != iy * gw + ix) {
                    continue;  // not this channel's winning sample
                  }
                  g = grad_t[at_bin + 32 * v];
                } else {
                  g = grad_t[at_bin + 32 * v] * inv_count;
                }
                if (x_lo >= 0 && x_lo < TW) {
                  my_row[x_lo * kStride + v * 32] += g * weight_lo;
                }
                if (x_hi >= 0 && x_hi < TW) {
                  my_row[x_hi * kStride + v * 32] += g * weight_hi;
                }
              }
            }
          }
        }
      }
    }
    __syncthreads();  // `listed` is rewritten by the next round
  }

  // 3. The tile to the NCHW gradient: rows of TW consecutive pixels.
  __syncthreads();
  scalar_t* grad = select_entry(table.data, level);
  for (int i = threadIdx.x; i < gather_channels<acc_t>() * kGatherRows * TW; i += kThreads) {
    const int x = i % TW, y = (i / TW) % kGatherRows, cl = i / (TW * kGatherRows);
    const int64_t cc = c0 + cl;
    if (cc < channels && y0 + y < height && x0 + x < width) {
      grad[((n * channels + cc) * height + y0 + y) * width + x0 + x] =
          static_cast<scalar_t>(acc[(y * TW + x) * kStride + cl]);
    }
  }
}

// ---------------------------------------------------------------------------
// Layout changes
// ---------------------------------------------------------------------------

// out[b][c][r] = in[b][r][c] for a batch of rows x cols matrices, through a
// padded shared tile so that both the reads and the writes are coalesced;
// 16 elements per thread keep enough loads in flight. Also converts the type.
constexpr int kTransposeTile = 64;

template <typename in_t, typename out_t>
__global__ void __launch_bounds__(256) transpose_kernel(
    const in_t* __restrict__ in, out_t* __restrict__ out, int64_t rows, int64_t cols) {
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

// Launches transpose_kernel over `batches` matrices of rows x cols.
template <typename in_t, typename out_t>
void transpose(const in_t* in, out_t* out, int64_t batches, int64_t rows, int64_t cols,
               cudaStream_t stream) {
  if (batches * rows * cols == 0) {
    return;
  }
  constexpr int64_t kMaxGridYZ = 65535;
  const int64_t row_tiles = (rows + kTransposeTile - 1) / kTransposeTile;
  TORCH_CHECK(row_tiles <= kMaxGridYZ, "mmops::roi_align: ", rows, " rows are too many to transpose");
  for (int64_t b0 = 0; b0 < batches; b0 += kMaxGridYZ) {
    const dim3 grid((cols + kTransposeTile - 1) / kTransposeTile, row_tiles,
                    std::min(kMaxGridYZ, batches - b0));
    transpose_kernel<in_t, out_t><<<grid, dim3(32, 8), 0, stream>>>(
        in + b0 * rows * cols, out + b0 * rows * cols, rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

// The input in channels-last memory order: as it is if it already is, else
// transposed by one kernel (ATen's generic copy is several times slower here).
at::Tensor channels_last_input(const at::Tensor& input, cudaStream_t stream) {
  if (input.is_contiguous(at::MemoryFormat::ChannelsLast)) {
    return input;
  }
  const at::Tensor nchw = input.contiguous();
  at::Tensor out = at::empty(input.sizes(), input.options(), at::MemoryFormat::ChannelsLast);
  if (out.numel() > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::roi_align transpose", [&] {
      transpose(nchw.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), input.size(0),
                input.size(1), input.size(2) * input.size(3), stream);
    });
  }
  return out;
}

template <typename scalar_t>
int vector_width(const at::Tensor& t, int64_t channels) {
  constexpr int vec = channel_vector<scalar_t>();
  const bool aligned = reinterpret_cast<uintptr_t>(t.const_data_ptr()) % (sizeof(scalar_t) * vec) == 0;
  return channels % vec == 0 && aligned ? vec : 1;
}

} // namespace

bool current_cuda_stream_is_capturing() {
  return c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
}

// Calls launch(vec, max) with the compile-time channel vector width (the wide
// one when `vectorized`) and pool mode.
template <typename scalar_t, typename Launch>
void launch_variant(bool vectorized, bool max_mode, Launch&& launch) {
  constexpr int kVec = channel_vector<scalar_t>();
  using Max = std::true_type;
  using Avg = std::false_type;
  if (vectorized && max_mode) {
    launch(std::integral_constant<int, kVec>{}, Max{});
  } else if (vectorized) {
    launch(std::integral_constant<int, kVec>{}, Avg{});
  } else if (max_mode) {
    launch(std::integral_constant<int, 1>{}, Max{});
  } else {
    launch(std::integral_constant<int, 1>{}, Avg{});
  }
}

std::tuple<at::Tensor, at::Tensor> roi_align_forward_cuda(
    at::TensorList features_, const at::Tensor& rois_, const RoIAlignParams& params,
    bool with_argmax) {
  c10::cuda::CUDAGuard device_guard(features_.front().device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  // Channels-last is what the kernel reads; NCHW maps are transposed once.
  std::vector<at::Tensor> features;
  for (const at::Tensor& f : features_) {
    features.push_back(channels_last_input(f, stream));
  }
  const at::Tensor& first = features.front();
  const at::Tensor rois = rois_.contiguous();
  const int64_t num_rois = rois.size(0), channels = first.size(1);
  at::Tensor output = at::empty({num_rois, channels, params.pooled_height, params.pooled_width}, first.options());
  const bool max_mode = params.pool_mode == PoolMode::Max;
  const bool store_argmax = with_argmax && max_mode;
  at::Tensor argmax = at::empty(store_argmax ? output.sizes() : at::IntArrayRef{0},
                                first.options().dtype(at::kInt));
  if (output.numel() == 0) {
    return {output, argmax};
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, first.scalar_type(), "mmops::roi_align (CUDA)", [&] {
    LevelTable<const scalar_t> levels{};
    bool vectorized = true;
    for (size_t l = 0; l < features.size(); ++l) {
      levels.data[l] = features[l].const_data_ptr<scalar_t>();
      levels.height[l] = features[l].size(2);
      levels.width[l] = features[l].size(3);
      vectorized = vectorized && vector_width<scalar_t>(features[l], channels) == channel_vector<scalar_t>();
    }
    launch_variant<scalar_t>(vectorized, max_mode, [&](auto vec_tag, auto max_tag) {
      constexpr int VEC = decltype(vec_tag)::value;
      constexpr bool kMax = decltype(max_tag)::value;
      const dim3 grid(num_rois, (channels + 32 * VEC - 1) / (32 * VEC));
      forward_kernel<scalar_t, VEC, kMax><<<grid, kThreads, 0, stream>>>(
          levels, rois.const_data_ptr<scalar_t>(), output.mutable_data_ptr<scalar_t>(),
          store_argmax ? argmax.mutable_data_ptr<int32_t>() : nullptr, first.size(0), channels, params);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  return {output, argmax};
}

namespace {

// Default backward: atomics into channels-last float (double) buffers, then
// one pass per map to the NCHW gradient in the input's dtype.
template <typename scalar_t>
void scatter_backward(const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
                      std::vector<at::Tensor>& grads, const RoIAlignParams& params, cudaStream_t stream) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t num_rois = rois.size(0), batch = grads.front().size(0), channels = grads.front().size(1);
  // at::zeros would drop the channels-last memory format.
  std::vector<at::Tensor> sums;
  LevelTable<acc_t> levels{};
  for (size_t l = 0; l < grads.size(); ++l) {
    sums.push_back(at::empty(grads[l].sizes(), grads[l].options().dtype(c10::CppTypeToScalarType<acc_t>::value),
                             at::MemoryFormat::ChannelsLast).zero_());
    levels.data[l] = sums[l].mutable_data_ptr<acc_t>();
    levels.height[l] = grads[l].size(2);
    levels.width[l] = grads[l].size(3);
  }
  // The buffers are fresh (aligned): vectors need only a channel count they divide.
  const bool vectorized = channels % channel_vector<scalar_t>() == 0;
  launch_variant<scalar_t>(vectorized, params.pool_mode == PoolMode::Max, [&](auto vec_tag, auto max_tag) {
    constexpr int VEC = decltype(vec_tag)::value;
    constexpr bool kMax = decltype(max_tag)::value;
    const dim3 grid(num_rois, (channels + 32 * VEC - 1) / (32 * VEC));
    scatter_backward_kernel<scalar_t, VEC, kMax><<<grid, kThreads, 0, stream>>>(
        grad_output.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(),
        kMax ? argmax.const_data_ptr<int32_t>() : nullptr, levels, batch, channels, params);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  for (size_t l = 0; l < grads.size(); ++l) {
    transpose(sums[l].const_data_ptr<acc_t>(), grads[l].mutable_data_ptr<scalar_t>(), batch,
              sums[l].size(2) * sums[l].size(3), channels, stream);
  }
}

// Deterministic backward: the gather kernel writes every gradient value once.
template <typename scalar_t>
void gather_backward(const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
                     std::vector<at::Tensor>& grads, const RoIAlignParams& params, cudaStream_t stream) {
  using acc_t = at::opmath_type<scalar_t>;
  constexpr int TW = kGatherWidth;
  const int64_t num_rois = rois.size(0), batch = grads.front().size(0), channels = grads.front().size(1);
  const int64_t bins = params.pooled_height * params.pooled_width;
  const bool max_mode = params.pool_mode == PoolMode::Max;
  TORCH_CHECK(num_rois <= std::numeric_limits<int32_t>::max(),
              "mmops::roi_align backward: at most 2^31 - 1 rois, got ", num_rois);
  // Channels innermost, so that a warp's lanes read 32 channels of one bin at once.
  at::Tensor grad_t = at::empty({num_rois, bins, channels},
                                grad_output.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
  transpose(grad_output.const_data_ptr<scalar_t>(), grad_t.mutable_data_ptr<acc_t>(), num_rois, channels, bins,
            stream);
  at::Tensor argmax_t;
  if (max_mode) {
    argmax_t = at::empty({num_rois, bins, channels}, argmax.options());
    transpose(argmax.const_data_ptr<int32_t>(), argmax_t.mutable_data_ptr<int32_t>(), num_rois, channels, bins,
              stream);
  }
  GatherTable<scalar_t> table{};
  int64_t tiles = 0;
  for (size_t l = 0; l < grads.size(); ++l) {
    const int64_t height = grads[l].size(2), width = grads[l].size(3);
    table.data[l] = grads[l].mutable_data_ptr<scalar_t>();
    table.height[l] = height;
    table.width[l] = width;
    table.tiles_x[l] = (width + TW - 1) / TW;
    table.tiles_per_image[l] = (height + kGatherRows - 1) / kGatherRows * table.tiles_x[l];
    table.first_tile[l] = tiles;
    tiles += batch * table.tiles_per_image[l];
  }
  if (tiles == 0) {
    return;  // every map is empty
  }
  const dim3 grid(tiles, (channels + gather_channels<acc_t>() - 1) / gather_channels<acc_t>());
  TORCH_CHECK(grid.y <= 65535, "mmops::roi_align backward: too many channels (", channels, ")");
  constexpr size_t smem = gather_smem_bytes<acc_t>();
  auto launch = [&](auto max_tag) {
    constexpr bool kMax = decltype(max_tag)::value;
    // More than the default 48 KB of dynamic shared memory must be asked for.
    C10_CUDA_CHECK(cudaFuncSetAttribute(gather_backward_kernel<scalar_t, kMax>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    gather_backward_kernel<scalar_t, kMax><<<grid, kThreads, smem, stream>>>(
        grad_t.const_data_ptr<acc_t>(), kMax ? argmax_t.const_data_ptr<int32_t>() : nullptr,
        rois.const_data_ptr<scalar_t>(), num_rois, table, batch, channels, params);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  if (max_mode) {
    launch(std::true_type{});
  } else {
    launch(std::false_type{});
  }
}

} // namespace

std::vector<at::Tensor> roi_align_backward_cuda(
    const at::Tensor& grad_output_, const at::Tensor& rois_, const at::Tensor& argmax_,
    const std::vector<std::vector<int64_t>>& feature_shapes, const RoIAlignParams& params) {
  c10::cuda::CUDAGuard device_guard(grad_output_.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor rois = rois_.contiguous();
  const bool max_mode = params.pool_mode == PoolMode::Max;
  const at::Tensor argmax = max_mode ? argmax_.contiguous() : argmax_;
  const int64_t batch = feature_shapes.front()[0], channels = feature_shapes.front()[1];
  std::vector<at::Tensor> grads;
  for (const auto& shape : feature_shapes) {
    grads.push_back(at::empty(shape, grad_output.options()));
  }
  if (grad_output.numel() == 0 || batch * channels == 0) {
    for (at::Tensor& g : grads) {
      g.zero_();
    }
    return grads;
  }
  const bool deterministic = at::globalContext().deterministicAlgorithms();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad_output.scalar_type(),
                                  "mmops::roi_align backward (CUDA)", [&] {
    if (deterministic) {
      gather_backward<scalar_t>(grad_output, rois, argmax, grads, params, stream);
    } else {
      scatter_backward<scalar_t>(grad_output, rois, argmax, grads, params, stream);
    }
  });
  return grads;
}

} // namespace kernels
} // namespace mmops

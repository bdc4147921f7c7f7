// CUDA kernels of roi_pool.
//
// Forward (float, half, bfloat16): see tile_max_kernel. Rois overlap heavily
// in detection (each pixel of the box-head benchmark lies in ~30 rois), so a
// block owns an image tile in shared memory and serves every roi overlapping
// it; the parts of a bin meet in an atomicMax on order-preserving keys, which a
// second pass decodes into the NCHW output and the argmax (channels-last
// [K, PH, PW, C] in memory). Each input element is read from device memory
// once, in either memory format.
// Forward (double): the roi-major kernel forward_kernel on a channels-last
// copy (one block per roi and 32 channels; a lane holds 2 channels).
// Backward: every output adds its gradient to exactly one input pixel (its
// argmax), different for every channel, so a channels-last buffer would not
// make the atomic adds coalesced. They go straight into the NCHW gradient
// (float for half/bfloat16, then converted once). A thread owns one bin of one
// roi and 4 channels (coalesced grad_output reads, one 16-byte argmax read);
// blocks run channel-major so the planes receiving adds at a time stay in L2.
// (A tiled backward — gradient tiles in shared memory visited like the forward
// — measured 0.58 ms vs 0.18 ms on the benchmark: its per-bin reads of argmax
// and grad_output are serial, latency-bound chains.)
// With torch.use_deterministic_algorithms(True) the adds are int64 fixed point
// (scaled from max |grad_output| so that no sum can overflow; resolution about
// 2^-46 of max |grad_output| per add for 1024 rois of 7x7), whose total does
// not depend on the order of the adds: bitwise repeatable gradients. A
// non-finite grad_output makes that gradient all NaN.
// A roi whose batch index is out of range, or whose box is not finite, pools
// zeros (argmax -1) and receives no gradient.

#include "roi_pool/roi_pool_kernels.h"
#include "common/cuda_helpers.cuh"
#include "roi_pool/roi_pool_math.h"

#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/Atomic.cuh>
#include <ATen/ops/abs.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

namespace mmops {
namespace kernels {
namespace {

using namespace roi_pool_math;
using cuda_helpers::channel_vector;
using cuda_helpers::load_readonly;
using cuda_helpers::Pack;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kBinChunk = 64;   // bins staged in the shared tile at a time
constexpr int kChunk = 32;      // channels of one block (forward)
constexpr int kGradChannels = 4;  // channels of one backward thread

__device__ inline int64_t smaller(int64_t a, int64_t b) {
  return a < b ? a : b;
}

template <typename acc_t>
struct Tile {
  static constexpr int kStride = kChunk + 1;  // padded against bank conflicts
  acc_t value[kBinChunk * kStride];
  int32_t argmax[kBinChunk * kStride];
  __device__ inline int at(int bin, int channel) const { return bin * kStride + channel; }
};

// Running maximum of a sequence of pixels (in scan order) that was seeded with
// its first pixel: the same result as MaxTracker (first maximum on ties, the
// first NaN wins and sticks) without MaxTracker's "nothing seen yet" test.
// Feeding the seed pixel again changes nothing.
template <typename T>
struct SeededMax {
  T best;
  int32_t index;  // -1: the sequence is empty
  __device__ inline void update(T value, int32_t pixel) {
    // value > best, or value is NaN and best is not; never once best is NaN
    const bool take = !(value <= best) && best == best;
    best = take ? value : best;
    index = take ? pixel : index;
  }
};

// Whether (value a, pixel ia) comes before (b, ib) as the result of one scan
// over the union of two disjoint pixel sets: NaN first (the earlier one), then
// the larger value, then the earlier pixel; an empty result (-1) last.
template <typename T>
__device__ inline bool earlier_max(T a, int32_t ia, T b, int32_t ib) {
  if (ia < 0 || ib < 0) {
    return ib < 0 && ia >= 0;
  }
  const bool na = a != a, nb = b != b;
  if (na || nb) {
    return na && (!nb || ia < ib);
  }
  return a > b || (a == b && ia < ib);
}

// Forward. A block handles one roi and kChunk (32) channels. Each lane holds
// VEC consecutive channels (one 16- or 8-byte load per pixel); the G = VEC
// groups of 32 / VEC lanes of a warp take the columns of a bin round-robin
// (group g: columns begin + g, begin + g + G, ...), so that one warp load
// covers G pixels x 32 channels, and the groups' maxima are merged with
// shuffles at the end of the bin. The block's channel chunk stays at 32
// channels so that the input slice that all rois of a chunk read at the same
// time stays small enough for L2.
template <typename scalar_t, int VEC, bool kArgmax>
__global__ void __launch_bounds__(kThreads) forward_kernel(
    const scalar_t* __restrict__ input,  // [N, H, W, C]
    const scalar_t* __restrict__ rois, scalar_t* __restrict__ output,  // [K, C, PH, PW]
    int32_t* __restrict__ argmax, int64_t batch, int64_t channels, int64_t height, int64_t width,
    RoIPoolParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  using PackT = Pack<scalar_t, VEC>;
  constexpr int G = VEC;                  // pixel columns per warp load
  constexpr int kLanes = 32 / G;          // lanes per pixel
  static_assert(kLanes * VEC == kChunk, "a warp load covers the block's channels");
  __shared__ Tile<acc_t> tile;

  const int64_t k = blockIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kChunk;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int group = lane / kLanes, cl0 = (lane % kLanes) * VEC;  // column group, first channel
  const int64_t bins = p.pooled_height * p.pooled_width;
  const int64_t chunk_channels = smaller(kChunk, channels - c0);
  const scalar_t* roi = rois + k * 5;
  const PoolBox<acc_t> box = make_pool_box<acc_t>(
      static_cast<acc_t>(roi[1]), static_cast<acc_t>(roi[2]), static_cast<acc_t>(roi[3]),
      static_cast<acc_t>(roi[4]), static_cast<acc_t>(p.spatial_scale), p.pooled_height,
      p.pooled_width);
  const int64_t b = box.valid ? batch_index(static_cast<acc_t>(roi[0]), batch) : -1;
  const int64_t c = c0 + cl0;
  const bool active = b >= 0 && c < channels;  // channels % VEC == 0: all VEC or none
  const int64_t stride = channels / VEC;        // packs per pixel
  const PackT* pixels = reinterpret_cast<const PackT*>(
      input + (b > 0 ? b : 0) * height * width * channels + (active ? c : 0));
  const int32_t w32 = static_cast<int32_t>(width);  // H * W < 2^31 (checked)

  for (int64_t bin0 = 0; bin0 < bins; bin0 += kBinChunk) {
    const int64_t chunk_bins = smaller(kBinChunk, bins - bin0);
    for (int bl = warp; bl < chunk_bins; bl += kWarps) {
      const int64_t ph = (bin0 + bl) / p.pooled_width, pw = (bin0 + bl) % p.pooled_width;
      const Range hr = bin_range(box.start_h, box.bin_h, ph, height);
      const Range wr = bin_range(box.start_w, box.bin_w, pw, width);
      const int32_t h0 = static_cast<int32_t>(hr.begin), h1 = static_cast<int32_t>(hr.end);
      const int32_t w0 = static_cast<int32_t>(wr.begin) + group, w1 = static_cast<int32_t>(wr.end);
      SeededMax<acc_t> m[VEC];
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        m[i].best = acc_t(0);
        m[i].index = -1;
      }
      if (active && h0 < h1 && w0 < w1) {
        const int32_t first = h0 * w32 + w0;
        const PackT* row = pixels + static_cast<int64_t>(first) * stride;
        const PackT v0 = load_readonly(row);
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          m[i].best = static_cast<acc_t>(v0.v[i]);
          m[i].index = first;
        }
        const int64_t row_step = width * stride, column_step = G * stride;
        int32_t row_pixel = first;
        for (int32_t h = h0; h < h1; ++h, row += row_step, row_pixel += w32) {
          const PackT* q = row;
          int32_t pixel = row_pixel;
#pragma unroll 4
          for (int32_t w = w0; w < w1; w += G, q += column_step, pixel += G) {
            const PackT v = load_readonly(q);
#pragma unroll
            for (int i = 0; i < VEC; ++i) {
              m[i].update(static_cast<acc_t>(v.v[i]), pixel);
            }
          }
        }
      }
      // Merge the column groups (lanes kLanes, 2 kLanes, ... apart hold the same channels).
#pragma unroll
      for (int offset = kLanes; offset < 32; offset *= 2) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          const acc_t ob = __shfl_xor_sync(0xffffffffu, m[i].best, offset);
          const int32_t oi = __shfl_xor_sync(0xffffffffu, m[i].index, offset);
          if (earlier_max(ob, oi, m[i].best, m[i].index)) {
            m[i].best = ob;
            m[i].index = oi;
          }
        }
      }
      if (group == 0) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          tile.value[tile.at(bl, cl0 + i)] = m[i].index < 0 ? acc_t(0) : m[i].best;
          if (kArgmax) {
            tile.argmax[tile.at(bl, cl0 + i)] = m[i].index;
          }
        }
      }
    }
    __syncthreads();
    // Coalesced NCHW write: the chunk's channels are contiguous runs of bins.
    for (int i = threadIdx.x; i < chunk_channels * chunk_bins; i += kThreads) {
      const int cl = i / chunk_bins, bl = i % chunk_bins;
      const int64_t o = ((k * channels) + c0 + cl) * bins + bin0 + bl;
      output[o] = static_cast<scalar_t>(tile.value[tile.at(bl, cl)]);
      if (kArgmax) {  // channels-last [K, bins, C]
        argmax[(k * bins + bin0 + bl) * channels + c0 + cl] = tile.argmax[tile.at(bl, cl)];
      }
    }
    __syncthreads();
  }
}

// Tiled forward for float, half and bfloat16. Overlapping rois read the same
// pixels many times (on the box-head benchmark every pixel lies in ~30 rois),
// so instead of one block per roi, a block owns an image tile of
// kTileH x kTileW pixels x kTileChannels channels, loads it into shared memory
// once, and for every roi of that image overlapping the tile takes the maximum
// of each bin's part inside the tile. The parts of a bin (in different tiles)
// meet in a 64-bit atomicMax on a key that orders exactly as the sequential
// scan does: high word = order-preserving code of the value (NaN on top), low
// word = ~pixel (on equal values the earlier pixel wins). Keys live in
// [K, bins, C] (channel fastest: a warp's atomics are coalesced); a finalize
// pass decodes them into the NCHW output and argmax. Without argmax (no
// gradient needed) the key is the 32-bit value code alone.
constexpr int kTileH = 16;
constexpr int kTileW = 16;
constexpr int kTilePixels = kTileH * kTileW;
constexpr int kLaneChannels = 2;                   // consecutive channels of one lane
constexpr int kTileChannels = 32 * kLaneChannels;  // channels of one block
constexpr int kTileStride = kTileChannels + 2;     // floats per pixel in shared memory (padded)
constexpr int kRoiBatch = 512;                     // rois culled per round

// Order-preserving code of a float: code(a) > code(b) <=> a > b for non-NaN
// values; every NaN codes to the top, -0 codes as +0 (they compare equal), and
// 0 is never a code (it means "no pixel yet").
__device__ inline uint32_t order_code(float v) {
  if (v != v) {
    return 0xFFFFFFFFu;
  }
  uint32_t bits = __float_as_uint(v);
  bits = bits == 0x80000000u ? 0u : bits;
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

__device__ inline float from_order_code(uint32_t code) {
  if (code == 0xFFFFFFFFu) {
    return NAN;
  }
  return __uint_as_float((code & 0x80000000u) ? (code & 0x7FFFFFFFu) : ~code);
}

template <bool kArgmax>
using KeyT = std::conditional_t<kArgmax, unsigned long long, unsigned int>;

template <bool kArgmax>
__device__ inline KeyT<kArgmax> bin_key(float value, int32_t pixel) {
  if constexpr (kArgmax) {
    return (static_cast<unsigned long long>(order_code(value)) << 32) |
        static_cast<unsigned int>(~pixel);
  } else {
    return order_code(value);
  }
}

template <typename scalar_t>
__device__ inline PoolBox<float> roi_box(const scalar_t* roi, const RoIPoolParams& p) {
  return make_pool_box<float>(static_cast<float>(roi[1]), static_cast<float>(roi[2]),
                              static_cast<float>(roi[3]), static_cast<float>(roi[4]),
                              static_cast<float>(p.spatial_scale), p.pooled_height, p.pooled_width);
}

// Where a roi's bins lie: image (-1: pools zeros) and the pixel rows / columns
// [begin, end) covered by all its bins (bins are monotonic). For culling.
struct RoiExtent {
  int32_t batch, h_begin, h_end, w_begin, w_end;
};

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads) roi_extent_kernel(
    const scalar_t* __restrict__ rois, RoiExtent* __restrict__ extents, int64_t num_rois,
    int64_t batch, int64_t height, int64_t width, RoIPoolParams p) {
  const int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k >= num_rois) {
    return;
  }
  const PoolBox<float> box = roi_box(rois + k * 5, p);
  RoiExtent e;
  e.batch = box.valid ? static_cast<int32_t>(batch_index(static_cast<float>(rois[k * 5]), batch)) : -1;
  e.h_begin = static_cast<int32_t>(bin_range(box.start_h, box.bin_h, 0, height).begin);
  e.h_end = static_cast<int32_t>(bin_range(box.start_h, box.bin_h, p.pooled_height - 1, height).end);
  e.w_begin = static_cast<int32_t>(bin_range(box.start_w, box.bin_w, 0, width).begin);
  e.w_end = static_cast<int32_t>(bin_range(box.start_w, box.bin_w, p.pooled_width - 1, width).end);
  extents[k] = e;
}

// The bins first .. first + 31 of one axis of a roi, each lane one bin: its
// pixel range clipped to the tile [tile_begin, tile_begin + tile_size), and a
// warp-wide mask of the bins that reach into the tile.
struct AxisParts {
  int begin, end;
  unsigned mask;
};

__device__ inline AxisParts axis_parts(int64_t start, float bin, int64_t first, int64_t pooled,
                                       int64_t size, int tile_begin, int tile_size, int lane) {
  AxisParts a{0, 0, 0u};
  const int64_t p = first + lane;
  if (p < pooled) {
    const Range r = bin_range(start, bin, p, size);
    a.begin = max(static_cast<int>(r.begin), tile_begin);
    a.end = min(static_cast<int>(r.end), tile_begin + tile_size);
  }
  a.mask = __ballot_sync(0xffffffffu, a.begin < a.end);
  return a;
}

// Calls visit(k, bin, h0, h1, w0, w1) (warp-uniform arguments) for the part
// inside this block's tile of every bin of every roi of image b that reaches
// into the tile. Rois are culled on their extents in rounds of kRoiBatch; a
// warp takes one roi at a time and finds the roi's bins that meet the tile by
// ballot. Called by all threads of the block (it synchronises).
template <typename scalar_t, typename Visit>
__device__ inline void for_each_bin_part(const scalar_t* __restrict__ rois,
                                         const RoiExtent* __restrict__ extents, int64_t num_rois,
                                         int32_t b, int ty0, int tx0, int64_t height, int64_t width,
                                         const RoIPoolParams& p, int32_t* roi_list, int& roi_count,
                                         Visit&& visit) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t r0 = 0; r0 < num_rois; r0 += kRoiBatch) {
    if (threadIdx.x == 0) {
      roi_count = 0;
    }
    __syncthreads();
    const int64_t r1 = smaller(r0 + kRoiBatch, num_rois);
    for (int64_t k = r0 + threadIdx.x; k < r1; k += kThreads) {
      const RoiExtent e = extents[k];
      if (e.batch == b && e.h_begin < ty0 + kTileH && e.h_end > ty0 && e.w_begin < tx0 + kTileW &&
          e.w_end > tx0) {
        roi_list[atomicAdd(&roi_count, 1)] = static_cast<int32_t>(k);
      }
    }
    __syncthreads();
    for (int i = warp; i < roi_count; i += kWarps) {
      const int64_t k = roi_list[i];
      const PoolBox<float> box = roi_box(rois + k * 5, p);
      for (int64_t ph0 = 0; ph0 < p.pooled_height; ph0 += 32) {
        const AxisParts rows = axis_parts(box.start_h, box.bin_h, ph0, p.pooled_height, height,
                                          ty0, kTileH, lane);
        for (int64_t pw0 = 0; rows.mask && pw0 < p.pooled_width; pw0 += 32) {
          const AxisParts cols = axis_parts(box.start_w, box.bin_w, pw0, p.pooled_width, width,
                                            tx0, kTileW, lane);
          for (unsigned rm = rows.mask; rm; rm &= rm - 1) {
            const int r = __ffs(rm) - 1;
            const int h0 = __shfl_sync(0xffffffffu, rows.begin, r);
            const int h1 = __shfl_sync(0xffffffffu, rows.end, r);
            for (unsigned cm = cols.mask; cm; cm &= cm - 1) {
              const int q = __ffs(cm) - 1;
              const int w0 = __shfl_sync(0xffffffffu, cols.begin, q);
              const int w1 = __shfl_sync(0xffffffffu, cols.end, q);
              visit(k, (ph0 + r) * p.pooled_width + pw0 + q, h0, h1, w0, w1);
            }
          }
        }
      }
    }
    __syncthreads();  // roi_list is rewritten next round
  }
}

template <typename scalar_t, bool kArgmax, bool kChannelsLast>
__global__ void __launch_bounds__(kThreads) tile_max_kernel(
    const scalar_t* __restrict__ input,  // [N, C, H, W] in either memory format
    const scalar_t* __restrict__ rois, const RoiExtent* __restrict__ extents,
    KeyT<kArgmax>* __restrict__ keys,  // [K, bins, C]
    int64_t num_rois, int64_t channels, int64_t height, int64_t width, int tiles_w,
    RoIPoolParams p) {
  extern __shared__ float4 shared_words[];
  float* tile = reinterpret_cast<float*>(shared_words);  // [kTilePixels][kTileStride]
  __shared__ int32_t roi_list[kRoiBatch];
  __shared__ int roi_count;

  const int32_t b = static_cast<int32_t>(blockIdx.z);
  const int ty0 = static_cast<int>(blockIdx.x / tiles_w) * kTileH;
  const int tx0 = static_cast<int>(blockIdx.x % tiles_w) * kTileW;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kTileChannels;
  const int lane = threadIdx.x % 32;

  // Load the tile (zeros outside the map or the channels: never read by a bin),
  // kLoadBatch loads in flight per thread before their shared-memory stores.
  constexpr int kLoadBatch = 16;
  constexpr int kLoads = kTilePixels * kTileChannels / kThreads;
  static_assert(kLoads % kLoadBatch == 0, "whole batches of loads");
  for (int j0 = 0; j0 < kLoads; j0 += kLoadBatch) {
    float v[kLoadBatch];
    int slot[kLoadBatch];
#pragma unroll
    for (int j = 0; j < kLoadBatch; ++j) {
      const int i = (j0 + j) * kThreads + threadIdx.x;
      int px, c;
      if (kChannelsLast) {  // lanes along channels: contiguous bytes per pixel
        px = i / kTileChannels;
        c = i % kTileChannels;
      } else {  // lanes along a tile row: contiguous runs of kTileW pixels
        c = i / kTilePixels;
        px = i % kTilePixels;
      }
      const int h = ty0 + px / kTileW, w = tx0 + px % kTileW;
      v[j] = 0.f;
      if (h < height && w < width && c0 + c < channels) {
        const int64_t index = kChannelsLast
            ? ((b * height + h) * width + w) * channels + c0 + c
            : ((b * channels + c0 + c) * height + h) * width + w;
        v[j] = static_cast<float>(input[index]);
      }
      slot[j] = px * kTileStride + c;
    }
#pragma unroll
    for (int j = 0; j < kLoadBatch; ++j) {
      tile[slot[j]] = v[j];
    }
  }
  // (for_each_bin_part synchronises before the first read of the tile)

  const int64_t c_lane = c0 + lane * kLaneChannels;  // the lane's first channel
  const int32_t w32 = static_cast<int32_t>(width);    // H * W < 2^31 (checked)
  const int64_t bins = p.pooled_height * p.pooled_width;
  for_each_bin_part(rois, extents, num_rois, b, ty0, tx0, height, width, p, roi_list, roi_count,
                    [&](int64_t k, int64_t bin, int h0, int h1, int w0, int w1) {
    // Scan the part: rows h0, h0 + 2, ... and h0 + 1, h0 + 3, ... as two
    // independent sequences (twice the instruction-level parallelism), both
    // seeded with the first pixel, merged as one row-major scan.
    const float* first = tile + ((h0 - ty0) * kTileW + (w0 - tx0)) * kTileStride +
        lane * kLaneChannels;
    const float2 seed = *reinterpret_cast<const float2*>(first);
    const int32_t seed_pixel = h0 * w32 + w0;
    SeededMax<float> even[kLaneChannels] = {{seed.x, seed_pixel}, {seed.y, seed_pixel}};
    SeededMax<float> odd[kLaneChannels] = {{seed.x, seed_pixel}, {seed.y, seed_pixel}};
    const int64_t row_step = kTileW * kTileStride;
    const float* row = first - (w0 - tx0) * kTileStride;
    int32_t row_pixel = h0 * w32;
    int h = h0;
    for (; h + 1 < h1; h += 2, row += 2 * row_step, row_pixel += 2 * w32) {
#pragma unroll 2
      for (int w = w0; w < w1; ++w) {
        const float2 u = *reinterpret_cast<const float2*>(row + (w - tx0) * kTileStride);
        const float2 v = *reinterpret_cast<const float2*>(row + row_step + (w - tx0) * kTileStride);
        even[0].update(u.x, row_pixel + w);
        even[1].update(u.y, row_pixel + w);
        odd[0].update(v.x, row_pixel + w32 + w);
        odd[1].update(v.y, row_pixel + w32 + w);
      }
    }
    if (h < h1) {
#pragma unroll 2
      for (int w = w0; w < w1; ++w) {
        const float2 u = *reinterpret_cast<const float2*>(row + (w - tx0) * kTileStride);
        even[0].update(u.x, row_pixel + w);
        even[1].update(u.y, row_pixel + w);
      }
    }
    KeyT<kArgmax>* key = keys + (k * bins + bin) * channels + c_lane;
#pragma unroll
    for (int j = 0; j < kLaneChannels; ++j) {
      const SeededMax<float>& m =
          earlier_max(odd[j].best, odd[j].index, even[j].best, even[j].index) ? odd[j] : even[j];
      if (c_lane + j < channels) {
        atomicMax(key + j, bin_key<kArgmax>(m.best, m.index));
      }
    }
  });
}

// keys [K, bins, C] -> output [K, C, PH, PW] through the shared tile so that
// both sides are coalesced, and argmax [K, bins, C]. An empty key (no pixel)
// gives 0 / -1.
template <typename scalar_t, bool kArgmax>
__global__ void __launch_bounds__(kThreads) decode_keys_kernel(
    const KeyT<kArgmax>* __restrict__ keys, scalar_t* __restrict__ output,
    int32_t* __restrict__ argmax, int64_t channels, int64_t bins) {
  __shared__ Tile<float> tile;
  const int64_t k = blockIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kChunk;
  const int64_t chunk_channels = smaller(kChunk, channels - c0);
  for (int64_t bin0 = 0; bin0 < bins; bin0 += kBinChunk) {
    const int64_t chunk_bins = smaller(kBinChunk, bins - bin0);
    for (int i = threadIdx.x; i < chunk_channels * chunk_bins; i += kThreads) {
      const int bl = i / chunk_channels, cl = i % chunk_channels;
      const KeyT<kArgmax> key = keys[(k * bins + bin0 + bl) * channels + c0 + cl];
      if constexpr (kArgmax) {
        const uint32_t code = static_cast<uint32_t>(key >> 32);
        tile.value[tile.at(bl, cl)] = key == 0 ? 0.f : from_order_code(code);
        // argmax is channels-last, like the keys
        argmax[(k * bins + bin0 + bl) * channels + c0 + cl] =
            key == 0 ? -1 : static_cast<int32_t>(~static_cast<uint32_t>(key));
      } else {
        tile.value[tile.at(bl, cl)] = key == 0 ? 0.f : from_order_code(key);
      }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < chunk_channels * chunk_bins; i += kThreads) {
      const int cl = i / chunk_bins, bl = i % chunk_bins;
      const int64_t o = ((k * channels) + c0 + cl) * bins + bin0 + bl;
      output[o] = static_cast<scalar_t>(tile.value[tile.at(bl, cl)]);
    }
    __syncthreads();
  }
}

// Backward. A thread owns one bin of one roi (j = k * bins + bin, blockIdx.x
// fastest) and kGradChannels consecutive channels (blockIdx.y): it looks the
// roi's image up once, then reads the argmax and grad_output of its channels
// and issues one atomic add per channel. Blocks run in channel-major order, so
// the gradient planes that receive the adds at any time are few and stay in L2.
// (argmax is channels-last: a thread's 4 channels are one 16-byte read.)
struct GradThread {
  int64_t k, bin, b;  // b < 0: nothing to do
};

template <typename scalar_t, typename acc_t>
__device__ inline GradThread grad_thread(const scalar_t* rois, int64_t num_rois, int64_t bins,
                                         int64_t batch) {
  GradThread t;
  const int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  t.k = j / bins;
  t.bin = j - t.k * bins;
  t.b = t.k < num_rois ? batch_index(static_cast<acc_t>(rois[t.k * 5]), batch) : -1;
  return t;
}

// Calls add(c, pixel, o) for each channel c of the thread whose argmax pixel is
// in the plane (o: index of the output). All loads first, then the adds.
template <typename Add>
__device__ inline void for_each_grad(const GradThread& t, const int32_t* __restrict__ argmax,
                                     int64_t channels, int64_t bins, int64_t plane, Add&& add) {
  for (int64_t c0 = static_cast<int64_t>(blockIdx.y) * kGradChannels; c0 < channels;
       c0 += static_cast<int64_t>(gridDim.y) * kGradChannels) {
    int32_t a[kGradChannels];
    const int64_t o0 = (t.k * channels + c0) * bins + t.bin;
    const int32_t* arg = argmax + (t.k * bins + t.bin) * channels + c0;  // channels-last
#pragma unroll
    for (int i = 0; i < kGradChannels; ++i) {
      a[i] = c0 + i < channels ? arg[i] : -1;
    }
#pragma unroll
    for (int i = 0; i < kGradChannels; ++i) {
      if (a[i] >= 0 && a[i] < plane) {
        add(c0 + i, a[i], o0 + i * bins);
      }
    }
  }
}

template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kThreads) backward_kernel(
    const scalar_t* __restrict__ grad_output,  // [K, C, PH, PW]
    const scalar_t* __restrict__ rois, const int32_t* __restrict__ argmax,
    acc_t* __restrict__ grad,  // [N, C, H, W]
    int64_t num_rois, int64_t batch, int64_t channels, int64_t bins, int64_t plane) {
  const GradThread t = grad_thread<scalar_t, acc_t>(rois, num_rois, bins, batch);
  if (t.b < 0) {
    return;
  }
  acc_t* image = grad + t.b * channels * plane;
  for_each_grad(t, argmax, channels, bins, plane, [&](int64_t c, int32_t a, int64_t o) {
    gpuAtomicAdd(image + c * plane + a, static_cast<acc_t>(grad_output[o]));
  });
}

// Deterministic variant: int64 fixed-point adds (see roi_pool_math.h).
template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kThreads) backward_fixed_point_kernel(
    const scalar_t* __restrict__ grad_output, const scalar_t* __restrict__ rois,
    const int32_t* __restrict__ argmax, int64_t* __restrict__ sums, const float* __restrict__ max_abs,
    double adds_bound, int64_t num_rois, int64_t batch, int64_t channels, int64_t bins,
    int64_t plane) {
  const double scale = fixed_point_scale(*max_abs, adds_bound);
  if (!isfinite(scale)) {
    return;  // the conversion writes NaN everywhere
  }
  const GradThread t = grad_thread<scalar_t, acc_t>(rois, num_rois, bins, batch);
  if (t.b < 0) {
    return;
  }
  int64_t* image = sums + t.b * channels * plane;
  for_each_grad(t, argmax, channels, bins, plane, [&](int64_t c, int32_t a, int64_t o) {
    const double v = static_cast<double>(static_cast<acc_t>(grad_output[o])) * scale;
    // Two's complement: adding the unsigned image of a negative value subtracts.
    atomicAdd(reinterpret_cast<unsigned long long*>(image + c * plane + a),
              static_cast<unsigned long long>(llrint(v)));
  });
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads) fixed_point_to_value_kernel(
    const int64_t* __restrict__ sums, scalar_t* __restrict__ out, int64_t n,
    const float* __restrict__ max_abs, double adds_bound) {
  const double scale = fixed_point_scale(*max_abs, adds_bound);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = static_cast<scalar_t>(isfinite(scale) ? static_cast<double>(sums[i]) / scale : NAN);
  }
}

// out[b][c][r] = in[b][r][c] for `batches` rows x cols matrices, through a
// padded shared tile (coalesced reads and writes): NCHW -> NHWC in one pass.
constexpr int kTransposeTile = 32;

template <typename T>
__global__ void __launch_bounds__(kTransposeTile * 8) transpose_kernel(
    const T* __restrict__ in, T* __restrict__ out, int64_t rows, int64_t cols) {
  __shared__ T tile[kTransposeTile][kTransposeTile + 1];
  const int64_t b = blockIdx.z;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTransposeTile;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTransposeTile;
  const T* src = in + b * rows * cols;
  T* dst = out + b * rows * cols;
  for (int i = threadIdx.y; i < kTransposeTile; i += blockDim.y) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) {
      tile[i][threadIdx.x] = src[r * cols + c];
    }
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTransposeTile; i += blockDim.y) {
    const int64_t c = c0 + i, r = r0 + threadIdx.x;
    if (r < rows && c < cols) {
      dst[c * rows + r] = tile[threadIdx.x][i];
    }
  }
}

at::Tensor channels_last_input(const at::Tensor& input, cudaStream_t stream) {
  if (input.is_contiguous(at::MemoryFormat::ChannelsLast)) {
    return input;
  }
  const at::Tensor nchw = input.contiguous();
  at::Tensor out = at::empty(input.sizes(), input.options(), at::MemoryFormat::ChannelsLast);
  const int64_t batches = input.size(0), rows = input.size(1), cols = input.size(2) * input.size(3);
  if (out.numel() == 0) {
    return out;
  }
  const dim3 grid((cols + kTransposeTile - 1) / kTransposeTile,
                  (rows + kTransposeTile - 1) / kTransposeTile, batches);
  TORCH_CHECK(grid.y <= 65535 && grid.z <= 65535, "mmops::roi_pool: input too large to transpose");
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::roi_pool transpose", [&] {
    transpose_kernel<scalar_t><<<grid, dim3(kTransposeTile, 8), 0, stream>>>(
        nchw.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

#define DISPATCH_FLOAT_HALF_BFLOAT16(TYPE, NAME, ...)                 \
  AT_DISPATCH_SWITCH(TYPE, NAME,                                      \
                     AT_DISPATCH_CASE(at::ScalarType::Float, __VA_ARGS__) \
                     AT_DISPATCH_CASE(at::ScalarType::Half, __VA_ARGS__)  \
                     AT_DISPATCH_CASE(at::ScalarType::BFloat16, __VA_ARGS__))

// RoiExtent of every roi (a byte tensor on the rois' device).
at::Tensor roi_extents(const at::Tensor& rois, int64_t batch, int64_t height, int64_t width,
                       const RoIPoolParams& params, cudaStream_t stream) {
  const int64_t num_rois = rois.size(0);
  at::Tensor extents = at::empty({num_rois * static_cast<int64_t>(sizeof(RoiExtent))},
                                 rois.options().dtype(at::kByte));
  DISPATCH_FLOAT_HALF_BFLOAT16(rois.scalar_type(), "mmops::roi_pool extents (CUDA)", [&] {
    roi_extent_kernel<scalar_t><<<(num_rois + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
        rois.const_data_ptr<scalar_t>(), reinterpret_cast<RoiExtent*>(extents.mutable_data_ptr()),
        num_rois, batch, height, width, params);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return extents;
}

// Grid of the tiled kernels: (tiles, channel chunks, images).
dim3 tile_grid(int64_t batch, int64_t channels, int64_t height, int64_t width, int64_t num_rois) {
  const int64_t tiles = ((height + kTileH - 1) / kTileH) * ((width + kTileW - 1) / kTileW);
  const int64_t chunks = (channels + kTileChannels - 1) / kTileChannels;
  TORCH_CHECK(tiles <= std::numeric_limits<int32_t>::max() && chunks <= 65535 && batch <= 65535,
              "mmops::roi_pool: input too large for the CUDA kernel (", batch, "x", channels, "x",
              height, "x", width, ")");
  TORCH_CHECK(num_rois <= std::numeric_limits<int32_t>::max(), "mmops::roi_pool: too many rois (",
              num_rois, ")");
  return dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(chunks), static_cast<unsigned>(batch));
}

constexpr size_t kTileBytes = sizeof(float) * kTilePixels * kTileStride;

// float / half / bfloat16 forward: tile_max_kernel into zeroed keys, then decode.
void tiled_forward(const at::Tensor& input, const at::Tensor& rois, const RoIPoolParams& params,
                   at::Tensor& output, at::Tensor* argmax, cudaStream_t stream) {
  const int64_t batch = input.size(0), channels = input.size(1);
  const int64_t height = input.size(2), width = input.size(3);
  const int64_t num_rois = rois.size(0), bins = params.pooled_height * params.pooled_width;
  const bool channels_last = !input.is_contiguous() &&
      input.is_contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor x = channels_last ? input : input.contiguous();
  const bool with_argmax = argmax != nullptr;
  at::Tensor keys = at::zeros({num_rois, bins, channels},
                              input.options().dtype(with_argmax ? at::kLong : at::kInt));
  const int64_t tiles_w = (width + kTileW - 1) / kTileW;
  if (batch > 0 && height > 0 && width > 0) {
    const at::Tensor extents = roi_extents(rois, batch, height, width, params, stream);
    const RoiExtent* extent_data = reinterpret_cast<const RoiExtent*>(extents.const_data_ptr());
    DISPATCH_FLOAT_HALF_BFLOAT16(input.scalar_type(), "mmops::roi_pool (CUDA)", [&] {
      auto launch = [&](auto arg_tag, auto layout_tag) {
        constexpr bool kArg = decltype(arg_tag)::value;
        constexpr bool kCL = decltype(layout_tag)::value;
        auto kernel = tile_max_kernel<scalar_t, kArg, kCL>;
        C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(kTileBytes)));
        kernel<<<tile_grid(batch, channels, height, width, num_rois), kThreads, kTileBytes, stream>>>(
            x.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(), extent_data,
            reinterpret_cast<KeyT<kArg>*>(keys.mutable_data_ptr()), num_rois, channels, height,
            width, static_cast<int>(tiles_w), params);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      };
      using Yes = std::true_type;
      using No = std::false_type;
      if (with_argmax) {
        channels_last ? launch(Yes{}, Yes{}) : launch(Yes{}, No{});
      } else {
        channels_last ? launch(No{}, Yes{}) : launch(No{}, No{});
      }
    });
  }
  DISPATCH_FLOAT_HALF_BFLOAT16(input.scalar_type(), "mmops::roi_pool decode (CUDA)", [&] {
    const dim3 grid(static_cast<unsigned>(num_rois), static_cast<unsigned>((channels + kChunk - 1) / kChunk));
    TORCH_CHECK(grid.y <= 65535, "mmops::roi_pool: too many channels (", channels, ")");
    if (with_argmax) {
      decode_keys_kernel<scalar_t, true><<<grid, kThreads, 0, stream>>>(
          reinterpret_cast<const KeyT<true>*>(keys.const_data_ptr()), output.mutable_data_ptr<scalar_t>(),
          argmax->mutable_data_ptr<int32_t>(), channels, bins);
    } else {
      decode_keys_kernel<scalar_t, false><<<grid, kThreads, 0, stream>>>(
          reinterpret_cast<const KeyT<false>*>(keys.const_data_ptr()), output.mutable_data_ptr<scalar_t>(),
          nullptr, channels, bins);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

} // namespace

std::tuple<at::Tensor, at::Tensor> roi_pool_forward_cuda(
    const at::Tensor& input_, const at::Tensor& rois_, const RoIPoolParams& params,
    bool with_argmax) {
  c10::cuda::CUDAGuard device_guard(input_.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int64_t num_rois = rois_.size(0), channels = input_.size(1);
  at::Tensor output = at::empty({num_rois, channels, params.pooled_height, params.pooled_width},
                                input_.options());
  at::Tensor argmax = with_argmax
      ? at::empty(output.sizes(), input_.options().dtype(at::kInt), at::MemoryFormat::ChannelsLast)
      : at::empty({0}, input_.options().dtype(at::kInt));
  if (output.numel() == 0) {
    return {output, argmax};
  }
  const at::Tensor rois = rois_.contiguous();
  if (input_.scalar_type() != at::kDouble) {
    tiled_forward(input_, rois, params, output, with_argmax ? &argmax : nullptr, stream);
    return {output, argmax};
  }
  const at::Tensor input = channels_last_input(input_, stream);
  AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "mmops::roi_pool (CUDA)", [&] {
    constexpr int kVec = channel_vector<scalar_t>();
    const bool aligned =
        reinterpret_cast<uintptr_t>(input.const_data_ptr()) % (sizeof(scalar_t) * kVec) == 0;
    const bool vectorized = kVec > 1 && channels % kVec == 0 && aligned;
    auto launch = [&](auto vec_tag, auto arg_tag) {
      constexpr int VEC = decltype(vec_tag)::value;
      constexpr bool kArg = decltype(arg_tag)::value;
      const dim3 grid(num_rois, (channels + kChunk - 1) / kChunk);
      TORCH_CHECK(grid.y <= 65535, "mmops::roi_pool: too many channels (", channels, ")");
      forward_kernel<scalar_t, VEC, kArg><<<grid, kThreads, 0, stream>>>(
          input.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(),
          output.mutable_data_ptr<scalar_t>(), kArg ? argmax.mutable_data_ptr<int32_t>() : nullptr,
          input.size(0), channels, input.size(2), input.size(3), params);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    };
    using Yes = std::true_type;
    using No = std::false_type;
    if (vectorized) {
      with_argmax ? launch(std::integral_constant<int, kVec>{}, Yes{})
                  : launch(std::integral_constant<int, kVec>{}, No{});
    } else {
      with_argmax ? launch(std::integral_constant<int, 1>{}, Yes{})
                  : launch(std::integral_constant<int, 1>{}, No{});
    }
  });
  return {output, argmax};
}

at::Tensor roi_pool_backward_cuda(const at::Tensor& grad_output_, const at::Tensor& rois_,
                                  const at::Tensor& argmax_, const std::vector<int64_t>& input_shape,
                                  const RoIPoolParams& params) {
  c10::cuda::CUDAGuard device_guard(grad_output_.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const auto dtype = grad_output_.scalar_type();
  const bool reduced = dtype == at::kHalf || dtype == at::kBFloat16;
  const bool deterministic = at::globalContext().deterministicAlgorithms();
  const int64_t total = grad_output_.numel();
  const int64_t numel = input_shape[0] * input_shape[1] * input_shape[2] * input_shape[3];
  if (total == 0 || numel == 0) {
    return at::zeros(input_shape, grad_output_.options());
  }
  const at::Tensor rois = rois_.contiguous();
  const at::Tensor argmax = argmax_.contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor grad_output = grad_output_.contiguous();
  const int64_t bins = params.pooled_height * params.pooled_width;
  const int64_t plane = input_shape[2] * input_shape[3];
  const int64_t num_rois = rois.size(0), channels = input_shape[1];
  // x: bins of all rois (fastest: channel-major order), y: groups of kGradChannels channels
  const int64_t bin_blocks = (num_rois * bins + kThreads - 1) / kThreads;
  TORCH_CHECK(bin_blocks <= std::numeric_limits<int32_t>::max(), "mmops::roi_pool backward: too many rois (",
              num_rois, ")");
  const dim3 grad_grid(static_cast<unsigned>(bin_blocks),
                       static_cast<unsigned>(std::min<int64_t>((channels + kGradChannels - 1) / kGradChannels, 65535)));
  const int64_t out_blocks = std::min<int64_t>((numel + kThreads - 1) / kThreads, int64_t(1) << 20);
  at::Tensor grad;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mmops::roi_pool backward (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    if (deterministic) {
      // every pixel of a plane receives at most one add per output bin of every roi
      const double adds_bound = static_cast<double>(rois.size(0)) * static_cast<double>(bins);
      const at::Tensor max_abs = grad_output.abs().amax().to(at::kFloat);
      at::Tensor sums = at::zeros(input_shape, grad_output.options().dtype(at::kLong));
      backward_fixed_point_kernel<scalar_t, acc_t><<<grad_grid, kThreads, 0, stream>>>(
          grad_output.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(),
          argmax.const_data_ptr<int32_t>(), sums.mutable_data_ptr<int64_t>(),
          max_abs.const_data_ptr<float>(), adds_bound, num_rois, input_shape[0], channels, bins, plane);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      grad = at::empty(input_shape, grad_output.options());
      fixed_point_to_value_kernel<scalar_t><<<out_blocks, kThreads, 0, stream>>>(
          sums.const_data_ptr<int64_t>(), grad.mutable_data_ptr<scalar_t>(), numel,
          max_abs.const_data_ptr<float>(), adds_bound);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
    // float / double atomics straight into the gradient; half / bfloat16 into a float buffer
    grad = at::zeros(input_shape, grad_output.options().dtype(reduced ? at::kFloat : dtype));
    backward_kernel<scalar_t, acc_t><<<grad_grid, kThreads, 0, stream>>>(
        grad_output.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(),
        argmax.const_data_ptr<int32_t>(), grad.mutable_data_ptr<acc_t>(), num_rois, input_shape[0],
        channels, bins, plane);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return reduced && !deterministic ? grad.to(dtype) : grad;
}

} // namespace kernels
} // namespace mmops

#pragma once
// Device code shared by the CUDA kernels of roi_align (roi_align_forward_cuda.cu,
// roi_align_backward_cuda.cu, roi_align_gather_backward_cuda.cu).
//
// The forward and the default (atomic) backward use the same blocks: one
// block handles one roi and one chunk of 32 x VEC channels of a channels-last
// ([N, H, W, C] in memory) map, so that the lanes of a warp touch one bilinear
// tap for 32 x VEC consecutive channels at once (VEC channels per lane, 16 or
// 8 bytes). The per-axis taps of the roi's samples are computed once into
// shared memory (the weights are separable) and reused by every channel; warps
// walk the bins, lanes the channels; a shared tile of bins x channels makes
// the NCHW [K, C, PH, PW] side (output, grad_output) coalesced.
// A roi whose batch index is out of range pools zeros and gets no gradient.

#include "common/cuda_helpers.cuh"
#include "roi_align/roi_align_kernels.h"
#include "roi_align/roi_align_math.h"

#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <vector>

namespace mmops {
namespace kernels {
namespace roi_align_cuda {

using namespace roi_align_math;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxTaps = 256; // per-axis taps cached in shared memory
constexpr int kBinChunk = 32; // bins staged in the shared tile at a time

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

// Everything a block needs to know about its roi.
template <typename acc_t>
struct BlockRoi {
  int64_t batch; // -1: the roi pools zeros (bad index or non-finite box)
  int level;
  int64_t height, width; // of its feature map
  RoiBox<acc_t> box;
  bool cached; // taps in shared memory (else computed per sample)
};

// Locates roi k and, when they fit, caches its per-axis taps in ytaps / xtaps.
// Ends with __syncthreads().
template <typename scalar_t, typename acc_t, typename T>
__device__ BlockRoi<acc_t> setup_roi(const scalar_t* rois, int64_t k, int64_t batch, const LevelTable<T>& levels,
                                     const RoIAlignParams& p, AxisTap<acc_t>* ytaps, AxisTap<acc_t>* xtaps) {
  const scalar_t* roi = rois + k * 5;
  const RoiSource<acc_t> src =
      locate_roi<acc_t>(static_cast<acc_t>(roi[0]), static_cast<acc_t>(roi[1]), static_cast<acc_t>(roi[2]),
                        static_cast<acc_t>(roi[3]), static_cast<acc_t>(roi[4]), batch, p.spatial_scale, p.num_levels,
                        p.finest_scale, p.aligned, p.pooled_height, p.pooled_width, p.sampling_ratio);
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
        ytaps[i] = axis_tap(sample_coord(r.box.start_y, r.box.bin_h, i / r.box.grid_h, i % r.box.grid_h, r.box.grid_h),
                            r.height);
      } else {
        const int j = i - ny;
        xtaps[j] = axis_tap(sample_coord(r.box.start_x, r.box.bin_w, j / r.box.grid_w, j % r.box.grid_w, r.box.grid_w),
                            r.width);
      }
    }
  }
  __syncthreads();
  return r;
}

template <typename acc_t>
__device__ inline AxisTap<acc_t> y_tap(const BlockRoi<acc_t>& r, const AxisTap<acc_t>* ytaps, int64_t ph, int iy) {
  return r.cached ? ytaps[ph * r.box.grid_h + iy]
                  : axis_tap(sample_coord(r.box.start_y, r.box.bin_h, ph, iy, r.box.grid_h), r.height);
}

template <typename acc_t>
__device__ inline AxisTap<acc_t> x_tap(const BlockRoi<acc_t>& r, const AxisTap<acc_t>* xtaps, int64_t pw, int ix) {
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

// What a block of the forward / atomic backward covers: roi k = blockIdx.x and
// channels [c0, c0 + chunk_channels) = chunk blockIdx.y of kChannels.
struct BlockSpan {
  int64_t k, c0;
  int lane, warp;
  int64_t bins; // PH * PW
  int64_t chunk_channels;
};

template <int kChannels>
__device__ __forceinline__ BlockSpan block_span(const RoIAlignParams& p, int64_t channels) {
  BlockSpan s;
  s.k = blockIdx.x;
  s.c0 = static_cast<int64_t>(blockIdx.y) * kChannels;
  s.lane = threadIdx.x % 32;
  s.warp = threadIdx.x / 32;
  s.bins = p.pooled_height * p.pooled_width;
  s.chunk_channels = smaller<int64_t>(kChannels, channels - s.c0);
  return s;
}

// Calls visit(cl, bl, o) for the block's channels cl and the chunk's bins bl
// (bins [bin0, bin0 + chunk_bins)), o being the NCHW offset of (k, c0 + cl,
// bin0 + bl): consecutive threads take consecutive bins (coalesced in NCHW).
template <typename Visit>
__device__ __forceinline__ void for_each_nchw_entry(const BlockSpan& s, int64_t channels, int64_t bin0,
                                                    int64_t chunk_bins, Visit&& visit) {
  for (int i = threadIdx.x; i < s.chunk_channels * chunk_bins; i += kThreads) {
    const int cl = i / chunk_bins, bl = i % chunk_bins;
    visit(cl, bl, ((s.k * channels) + s.c0 + cl) * s.bins + bin0 + bl);
  }
}

// Calls launch(vec, max) with the compile-time channel vector width (the wide
// one when `vectorized`) and pool mode.
template <typename scalar_t, typename Launch>
void launch_variant(bool vectorized, bool max_mode, Launch&& launch) {
  constexpr int kVec = cuda_helpers::channel_vector<scalar_t>();
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

// The deterministic backward (roi_align_gather_backward_cuda.cu): fills
// `grads` (NCHW, one per map, allocated) from contiguous grad_output, rois and
// (max mode) argmax, on `stream`.
void gather_backward(const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
                     std::vector<at::Tensor>& grads, const RoIAlignParams& params, cudaStream_t stream);

} // namespace roi_align_cuda
} // namespace kernels
} // namespace mmops

#pragma once
// Shared pieces of roi_pool's CUDA files:
//   roi_pool_tiled_cuda.cu      forward for float, half and bfloat16 (image tiles
//                               in shared memory, atomicMax on order-preserving keys)
//                               and the forward entry point, which picks the strategy
//   roi_pool_roi_major_cuda.cu  forward for double (one block per roi and 32 channels)
//   roi_pool_backward_cuda.cu   backward (atomic adds at the argmax; int64 fixed
//                               point when deterministic)
// Both forwards stage 64 bins x 32 channels in a shared Tile and write it to
// the NCHW output (write_chunk); both scan a bin's pixels with SeededMax and
// merge partial maxima with earlier_max, so they give exactly the sequential
// scan's result (roi_pool_math.h).

#include "roi_pool/roi_pool_kernels.h"
#include "roi_pool/roi_pool_math.h"

#include <ATen/core/Tensor.h>

#include <cuda_runtime.h>

#include <cstdint>

namespace mmops {
namespace kernels {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kBinChunk = 64; // bins staged in the shared tile at a time
constexpr int kChunk = 32;    // channels of one block (roi-major forward, decode)

__device__ inline int64_t smaller(int64_t a, int64_t b) {
  return a < b ? a : b;
}

template <typename acc_t>
struct Tile {
  static constexpr int kStride = kChunk + 1; // padded against bank conflicts
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
  int32_t index; // -1: the sequence is empty
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

// Writes the chunk of bins [bin0, bin0 + chunk_bins) x channels
// [c0, c0 + chunk_channels) of roi k staged in `tile` to the NCHW output,
// coalesced (the chunk's channels are contiguous runs of bins), and with
// kArgmax their argmax to the channels-last [K, bins, C] argmax.
template <bool kArgmax, typename acc_t, typename scalar_t>
__device__ __forceinline__ void write_chunk(const Tile<acc_t>& tile, scalar_t* __restrict__ output,
                                            int32_t* __restrict__ argmax, int64_t k, int64_t c0, int64_t channels,
                                            int64_t bins, int64_t bin0, int64_t chunk_channels, int64_t chunk_bins) {
  for (int i = threadIdx.x; i < chunk_channels * chunk_bins; i += kThreads) {
    const int cl = i / chunk_bins, bl = i % chunk_bins;
    const int64_t o = ((k * channels) + c0 + cl) * bins + bin0 + bl;
    output[o] = static_cast<scalar_t>(tile.value[tile.at(bl, cl)]);
    if (kArgmax) {
      argmax[(k * bins + bin0 + bl) * channels + c0 + cl] = tile.argmax[tile.at(bl, cl)];
    }
  }
}

} // namespace

// The two forward strategies (host side). `output` is [K, C, PH, PW] and not
// empty; `argmax` (null: not wanted) is its channels-last int32 twin. rois is
// contiguous.
void roi_pool_tiled_forward(const at::Tensor& input, const at::Tensor& rois, const RoIPoolParams& params,
                            at::Tensor& output, at::Tensor* argmax, cudaStream_t stream);
void roi_pool_roi_major_forward(const at::Tensor& input, const at::Tensor& rois, const RoIPoolParams& params,
                                at::Tensor& output, at::Tensor* argmax, cudaStream_t stream);

} // namespace kernels
} // namespace mmops

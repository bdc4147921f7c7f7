// CUDA forward of roi_pool for float, half and bfloat16: the tiled kernels
// (roi_extent_kernel, tile_max_kernel, decode_keys_kernel; design below), and
// the forward entry point, which sends double to the roi-major kernel
// (roi_pool_roi_major_cuda.cu). A roi whose batch index is out of range, or
// whose box is not finite, pools zeros (argmax -1).

#include "roi_pool/roi_pool_cuda.cuh"
#include "roi_pool/roi_pool_kernels.h"
#include "roi_pool/roi_pool_math.h"

#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <limits>
#include <type_traits>

namespace mmops {
namespace kernels {
namespace {

using namespace roi_pool_math;

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
constexpr int kLaneChannels = 2;                  // consecutive channels of one lane
constexpr int kTileChannels = 32 * kLaneChannels; // channels of one block
constexpr int kTileStride = kTileChannels + 2;    // floats per pixel in shared memory (padded)
constexpr int kRoiBatch = 512;                    // rois culled per round

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
    return (static_cast<unsigned long long>(order_code(value)) << 32) | static_cast<unsigned int>(~pixel);
  } else {
    return order_code(value);
  }
}

template <typename scalar_t>
__device__ inline PoolBox<float> roi_box(const scalar_t* roi, const RoIPoolParams& p) {
  return make_pool_box<float>(static_cast<float>(roi[1]), static_cast<float>(roi[2]), static_cast<float>(roi[3]),
                              static_cast<float>(roi[4]), static_cast<float>(p.spatial_scale), p.pooled_height,
                              p.pooled_width);
}

// Where a roi's bins lie: image (-1: pools zeros) and the pixel rows / columns
// [begin, end) covered by all its bins (bins are monotonic). For culling.
struct RoiExtent {
  int32_t batch, h_begin, h_end, w_begin, w_end;
};

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    roi_extent_kernel(const scalar_t* __restrict__ rois, RoiExtent* __restrict__ extents, int64_t num_rois,
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

__device__ inline AxisParts axis_parts(int64_t start, float bin, int64_t first, int64_t pooled, int64_t size,
                                       int tile_begin, int tile_size, int lane) {
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
__device__ inline void for_each_bin_part(const scalar_t* __restrict__ rois, const RoiExtent* __restrict__ extents,
                                         int64_t num_rois, int32_t b, int ty0, int tx0, int64_t height, int64_t width,
                                         const RoIPoolParams& p, int32_t* roi_list, int& roi_count, Visit&& visit) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t r0 = 0; r0 < num_rois; r0 += kRoiBatch) {
    if (threadIdx.x == 0) {
      roi_count = 0;
    }
    __syncthreads();
    const int64_t r1 = smaller(r0 + kRoiBatch, num_rois);
    for (int64_t k = r0 + threadIdx.x; k < r1; k += kThreads) {
      const RoiExtent e = extents[k];
      if (e.batch == b && e.h_begin < ty0 + kTileH && e.h_end > ty0 && e.w_begin < tx0 + kTileW && e.w_end > tx0) {
        roi_list[atomicAdd(&roi_count, 1)] = static_cast<int32_t>(k);
      }
    }
    __syncthreads();
    for (int i = warp; i < roi_count; i += kWarps) {
      const int64_t k = roi_list[i];
      const PoolBox<float> box = roi_box(rois + k * 5, p);
      for (int64_t ph0 = 0; ph0 < p.pooled_height; ph0 += 32) {
        const AxisParts rows = axis_parts(box.start_h, box.bin_h, ph0, p.pooled_height, height, ty0, kTileH, lane);
        for (int64_t pw0 = 0; rows.mask && pw0 < p.pooled_width; pw0 += 32) {
          const AxisParts cols = axis_parts(box.start_w, box.bin_w, pw0, p.pooled_width, width, tx0, kTileW, lane);
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
    __syncthreads(); // roi_list is rewritten next round
  }
}

// Loads the block's tile (zeros outside the map or the channels: never read
// by a bin), kLoadBatch loads in flight per thread before their shared-memory
// stores.
template <typename scalar_t, bool kChannelsLast>
__device__ __forceinline__ void load_tile(const scalar_t* __restrict__ input, float* tile, int32_t b, int ty0, int tx0,
                                          int64_t c0, int64_t channels, int64_t height, int64_t width) {
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
      if (kChannelsLast) { // lanes along channels: contiguous bytes per pixel
        px = i / kTileChannels;
        c = i % kTileChannels;
      } else { // lanes along a tile row: contiguous runs of kTileW pixels
        c = i / kTilePixels;
        px = i % kTilePixels;
      }
      const int h = ty0 + px / kTileW, w = tx0 + px % kTileW;
      v[j] = 0.f;
      if (h < height && w < width && c0 + c < channels) {
        const int64_t index = kChannelsLast ? ((b * height + h) * width + w) * channels + c0 + c
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
}

// Scans the part [h0, h1) x [w0, w1) of a bin for the lane's kLaneChannels
// channels, in the tile whose top-left pixel is (ty0, tx0): rows h0, h0 + 2,
// ... into `even` and rows h0 + 1, h0 + 3, ... into `odd`, two independent
// sequences (twice the instruction-level parallelism), both seeded with the
// first pixel. earlier_max of the two is the part's row-major scan result.
__device__ __forceinline__ void scan_part(SeededMax<float> (&even)[kLaneChannels],
                                          SeededMax<float> (&odd)[kLaneChannels], const float* tile, int ty0, int tx0,
                                          int h0, int h1, int w0, int w1, int32_t w32, int lane) {
  const float* first = tile + ((h0 - ty0) * kTileW + (w0 - tx0)) * kTileStride + lane * kLaneChannels;
  const float2 seed = *reinterpret_cast<const float2*>(first);
  const int32_t seed_pixel = h0 * w32 + w0;
#pragma unroll
  for (int j = 0; j < kLaneChannels; ++j) {
    even[j] = odd[j] = {j == 0 ? seed.x : seed.y, seed_pixel};
  }
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
}

template <typename scalar_t, bool kArgmax, bool kChannelsLast>
__global__ void __launch_bounds__(kThreads)
    tile_max_kernel(const scalar_t* __restrict__ input, // [N, C, H, W] in either memory format
                    const scalar_t* __restrict__ rois, const RoiExtent* __restrict__ extents,
                    KeyT<kArgmax>* __restrict__ keys, // [K, bins, C]
                    int64_t num_rois, int64_t channels, int64_t height, int64_t width, int tiles_w, RoIPoolParams p) {
  extern __shared__ float4 shared_words[];
  float* tile = reinterpret_cast<float*>(shared_words); // [kTilePixels][kTileStride]
  __shared__ int32_t roi_list[kRoiBatch];
  __shared__ int roi_count;

  const int32_t b = static_cast<int32_t>(blockIdx.z);
  const int ty0 = static_cast<int>(blockIdx.x / tiles_w) * kTileH;
  const int tx0 = static_cast<int>(blockIdx.x % tiles_w) * kTileW;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kTileChannels;
  const int lane = threadIdx.x % 32;

  load_tile<scalar_t, kChannelsLast>(input, tile, b, ty0, tx0, c0, channels, height, width);
  // (for_each_bin_part synchronises before the first read of the tile)

  const int64_t c_lane = c0 + lane * kLaneChannels; // the lane's first channel
  const int32_t w32 = static_cast<int32_t>(width);  // H * W < 2^31 (checked)
  const int64_t bins = p.pooled_height * p.pooled_width;
  for_each_bin_part(rois, extents, num_rois, b, ty0, tx0, height, width, p, roi_list, roi_count,
                    [&](int64_t k, int64_t bin, int h0, int h1, int w0, int w1) {
                      SeededMax<float> even[kLaneChannels], odd[kLaneChannels];
                      scan_part(even, odd, tile, ty0, tx0, h0, h1, w0, w1, w32, lane);
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
__global__ void __launch_bounds__(kThreads)
    decode_keys_kernel(const KeyT<kArgmax>* __restrict__ keys, scalar_t* __restrict__ output,
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
    write_chunk<false>(tile, output, nullptr, k, c0, channels, bins, bin0, chunk_channels, chunk_bins);
    __syncthreads();
  }
}

#define DISPATCH_FLOAT_HALF_BFLOAT16(TYPE, NAME, ...)                                       \
  AT_DISPATCH_SWITCH(TYPE, NAME,                                                            \
                     AT_DISPATCH_CASE(at::ScalarType::Float, __VA_ARGS__) AT_DISPATCH_CASE( \
                         at::ScalarType::Half, __VA_ARGS__) AT_DISPATCH_CASE(at::ScalarType::BFloat16, __VA_ARGS__))

// RoiExtent of every roi (a byte tensor on the rois' device).
at::Tensor roi_extents(const at::Tensor& rois, int64_t batch, int64_t height, int64_t width,
                       const RoIPoolParams& params, cudaStream_t stream) {
  const int64_t num_rois = rois.size(0);
  at::Tensor extents = at::empty({num_rois * static_cast<int64_t>(sizeof(RoiExtent))}, rois.options().dtype(at::kByte));
  DISPATCH_FLOAT_HALF_BFLOAT16(rois.scalar_type(), "mmops::roi_pool extents (CUDA)", [&] {
    roi_extent_kernel<scalar_t><<<(num_rois + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
        rois.const_data_ptr<scalar_t>(), reinterpret_cast<RoiExtent*>(extents.mutable_data_ptr()), num_rois, batch,
        height, width, params);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return extents;
}

// Grid of the tiled kernels: (tiles, channel chunks, images).
dim3 tile_grid(int64_t batch, int64_t channels, int64_t height, int64_t width, int64_t num_rois) {
  const int64_t tiles = ((height + kTileH - 1) / kTileH) * ((width + kTileW - 1) / kTileW);
  const int64_t chunks = (channels + kTileChannels - 1) / kTileChannels;
  TORCH_CHECK(tiles <= std::numeric_limits<int32_t>::max() && chunks <= 65535 && batch <= 65535,
              "mmops::roi_pool: input too large for the CUDA kernel (", batch, "x", channels, "x", height, "x", width,
              ")");
  TORCH_CHECK(num_rois <= std::numeric_limits<int32_t>::max(), "mmops::roi_pool: too many rois (", num_rois, ")");
  return dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(chunks), static_cast<unsigned>(batch));
}

constexpr size_t kTileBytes = sizeof(float) * kTilePixels * kTileStride;

} // namespace

// float / half / bfloat16 forward: tile_max_kernel into zeroed keys, then decode.
void roi_pool_tiled_forward(const at::Tensor& input, const at::Tensor& rois, const RoIPoolParams& params,
                            at::Tensor& output, at::Tensor* argmax, cudaStream_t stream) {
  const int64_t batch = input.size(0), channels = input.size(1);
  const int64_t height = input.size(2), width = input.size(3);
  const int64_t num_rois = rois.size(0), bins = params.pooled_height * params.pooled_width;
  const bool channels_last = !input.is_contiguous() && input.is_contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor x = channels_last ? input : input.contiguous();
  const bool with_argmax = argmax != nullptr;
  at::Tensor keys = at::zeros({num_rois, bins, channels}, input.options().dtype(with_argmax ? at::kLong : at::kInt));
  const int64_t tiles_w = (width + kTileW - 1) / kTileW;
  if (batch > 0 && height > 0 && width > 0) {
    const at::Tensor extents = roi_extents(rois, batch, height, width, params, stream);
    const RoiExtent* extent_data = reinterpret_cast<const RoiExtent*>(extents.const_data_ptr());
    DISPATCH_FLOAT_HALF_BFLOAT16(input.scalar_type(), "mmops::roi_pool (CUDA)", [&] {
      auto launch = [&](auto arg_tag, auto layout_tag) {
        constexpr bool kArg = decltype(arg_tag)::value;
        constexpr bool kCL = decltype(layout_tag)::value;
        auto kernel = tile_max_kernel<scalar_t, kArg, kCL>;
        C10_CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kTileBytes)));
        kernel<<<tile_grid(batch, channels, height, width, num_rois), kThreads, kTileBytes, stream>>>(
            x.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(), extent_data,
            reinterpret_cast<KeyT<kArg>*>(keys.mutable_data_ptr()), num_rois, channels, height, width,
            static_cast<int>(tiles_w), params);
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
      decode_keys_kernel<scalar_t, false>
          <<<grid, kThreads, 0, stream>>>(reinterpret_cast<const KeyT<false>*>(keys.const_data_ptr()),
                                          output.mutable_data_ptr<scalar_t>(), nullptr, channels, bins);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

std::tuple<at::Tensor, at::Tensor> roi_pool_forward_cuda(const at::Tensor& input, const at::Tensor& rois_,
                                                         const RoIPoolParams& params, bool with_argmax) {
  c10::cuda::CUDAGuard device_guard(input.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int64_t num_rois = rois_.size(0), channels = input.size(1);
  at::Tensor output = at::empty({num_rois, channels, params.pooled_height, params.pooled_width}, input.options());
  at::Tensor argmax = with_argmax
                          ? at::empty(output.sizes(), input.options().dtype(at::kInt), at::MemoryFormat::ChannelsLast)
                          : at::empty({0}, input.options().dtype(at::kInt));
  if (output.numel() == 0) {
    return {output, argmax};
  }
  const at::Tensor rois = rois_.contiguous();
  if (input.scalar_type() == at::kDouble) {
    roi_pool_roi_major_forward(input, rois, params, output, with_argmax ? &argmax : nullptr, stream);
  } else {
    roi_pool_tiled_forward(input, rois, params, output, with_argmax ? &argmax : nullptr, stream);
  }
  return {output, argmax};
}

} // namespace kernels
} // namespace mmops

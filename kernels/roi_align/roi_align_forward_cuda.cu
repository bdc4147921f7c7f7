// CUDA forward of roi_align and multi_level_roi_align.
//
// The kernel reads the maps channels-last (an NCHW map is transposed once,
// kernels/common/layout.h); one block per (roi, chunk of channels), see
// roi_align_cuda.cuh. Wide per-lane vectors keep the per-sample index
// arithmetic (which bounds this kernel) small per channel, and the taps of two
// samples are loaded before either is used. Results go through the shared
// tile so that the NCHW output [K, C, PH, PW] is written coalesced.

#include "common/layout.h"
#include "roi_align/roi_align_cuda.cuh"

#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using namespace roi_align_cuda;
using cuda_helpers::channel_vector;
using cuda_helpers::load_readonly;
using cuda_helpers::Pack;

// Loads the four taps of one sample for VEC channels (nothing when the sample
// is outside the map: zero weights).
template <typename PackT, typename acc_t>
struct SampleLoad {
  PackT px[4];
  acc_t w[4];
};

template <typename PackT, typename acc_t>
__device__ inline SampleLoad<PackT, acc_t> load_sample(const PackT* pixels, int64_t pixel_stride, int64_t width,
                                                       const AxisTap<acc_t>& ty, const AxisTap<acc_t>& tx,
                                                       bool wanted) {
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
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const LevelTable<const scalar_t> levels,                          // each [N, H_l, W_l, C]
                   const scalar_t* __restrict__ rois, scalar_t* __restrict__ output, // [K, C, PH, PW]
                   int32_t* __restrict__ argmax, int64_t batch, int64_t channels, RoIAlignParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  using TileT = Tile<acc_t, VEC, kMax>;
  using PackT = Pack<scalar_t, VEC>;
  __shared__ AxisTap<acc_t> ytaps[kMaxTaps];
  __shared__ AxisTap<acc_t> xtaps[kMaxTaps];
  __shared__ TileT tile;

  const BlockSpan s = block_span<TileT::kChannels>(p, channels);
  const int lane = s.lane, warp = s.warp;
  const BlockRoi<acc_t> r = setup_roi(rois, s.k, batch, levels, p, ytaps, xtaps);
  const int gh = r.box.grid_h, gw = r.box.grid_w;
  const acc_t inv_count = gh * gw > 0 ? acc_t(1) / static_cast<acc_t>(gh * gw) : acc_t(0);
  const int64_t c = s.c0 + lane * VEC;
  const int64_t width = r.width;
  const PackT* pixels = reinterpret_cast<const PackT*>(
      select_entry(levels.data, r.level) + ((r.batch > 0 ? r.batch : 0) * r.height * r.width) * channels + c);
  const int64_t pixel_stride = channels / VEC; // in packs
  const bool active = r.batch >= 0 && c < channels;

  for (int64_t bin0 = 0; bin0 < s.bins; bin0 += kBinChunk) {
    const int64_t chunk_bins = smaller<int64_t>(kBinChunk, s.bins - bin0);
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
          const auto b =
              load_sample(pixels, pixel_stride, width, ty, x_tap(r, xtaps, pw, second ? ix + 1 : ix), second);
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
              sum[v] += vb; // zero without a second sample
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
    for_each_nchw_entry(s, channels, bin0, chunk_bins, [&](int cl, int bl, int64_t o) {
      output[o] = static_cast<scalar_t>(tile.value[tile.at(bl, cl)]);
      if (kMax && argmax) {
        argmax[o] = tile.argmax[tile.at(bl, cl)];
      }
    });
    __syncthreads();
  }
}

template <typename scalar_t>
int vector_width(const at::Tensor& t, int64_t channels) {
  constexpr int vec = channel_vector<scalar_t>();
  const bool aligned = reinterpret_cast<uintptr_t>(t.const_data_ptr()) % (sizeof(scalar_t) * vec) == 0;
  return channels % vec == 0 && aligned ? vec : 1;
}

} // namespace

std::tuple<at::Tensor, at::Tensor> roi_align_forward_cuda(at::TensorList features_, const at::Tensor& rois_,
                                                          const RoIAlignParams& params, bool with_argmax) {
  c10::cuda::CUDAGuard device_guard(features_.front().device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  // Channels-last is what the kernel reads; NCHW maps are transposed once.
  std::vector<at::Tensor> features;
  for (const at::Tensor& f : features_) {
    features.push_back(channels_last_cuda(f));
  }
  const at::Tensor& first = features.front();
  const at::Tensor rois = rois_.contiguous();
  const int64_t num_rois = rois.size(0), channels = first.size(1);
  at::Tensor output = at::empty({num_rois, channels, params.pooled_height, params.pooled_width}, first.options());
  const bool max_mode = params.pool_mode == PoolMode::Max;
  const bool store_argmax = with_argmax && max_mode;
  at::Tensor argmax = at::empty(store_argmax ? output.sizes() : at::IntArrayRef{0}, first.options().dtype(at::kInt));
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

} // namespace kernels
} // namespace mmops

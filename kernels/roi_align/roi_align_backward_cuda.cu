// CUDA backward of roi_align and multi_level_roi_align: the entry point, and
// the default strategy (scatter with atomics).
//
// Default: the forward's blocks (roi_align_cuda.cuh) read grad_output through
// the shared tile and scatter into a channels-last float (double) accumulation
// buffer with coalesced atomic adds, four channels per add on sm_90 (vector
// atomics); one transpose per map then converts the buffer to the NCHW
// gradient. The order of the float additions varies from run to run.
// Deterministic (torch.use_deterministic_algorithms): the gather of
// roi_align_gather_backward_cuda.cu.

#include "common/layout_cuda.cuh"
#include "roi_align/roi_align_cuda.cuh"

#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>
#include <type_traits>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using namespace roi_align_cuda;
using cuda_helpers::channel_vector;

// buffer[0..VEC) += values, atomically: one vector atomic for four floats on
// sm_90 (the buffer is 16-byte aligned there), else one atomic per value.
template <typename sum_t, int VEC>
__device__ inline void atomic_add_channels(sum_t* address, const sum_t (&values)[VEC]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr bool kVectorAtomic = std::is_same_v<sum_t, float> && VEC == 4;
#else
  constexpr bool kVectorAtomic = false;
#endif
  // if constexpr / else, not an early return: the loop after it would be unreachable code (nvcc warns)
  if constexpr (kVectorAtomic) {
    atomicAdd(reinterpret_cast<float4*>(address), make_float4(values[0], values[1], values[2], values[3]));
  } else {
#pragma unroll
    for (int v = 0; v < VEC; ++v) {
      atomicAdd(address + v, values[v]);
    }
  }
}

template <typename scalar_t, int VEC, bool kMax>
__global__ void __launch_bounds__(kThreads)
    scatter_backward_kernel(const scalar_t* __restrict__ grad_output, // [K, C, PH, PW]
                            const scalar_t* __restrict__ rois, const int32_t* __restrict__ argmax,
                            const LevelTable<at::opmath_type<scalar_t>> grad_sums, // each [N, H_l, W_l, C]
                            int64_t batch, int64_t channels, RoIAlignParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  using TileT = Tile<acc_t, VEC, kMax>;
  __shared__ AxisTap<acc_t> ytaps[kMaxTaps];
  __shared__ AxisTap<acc_t> xtaps[kMaxTaps];
  __shared__ TileT tile;

  const BlockSpan s = block_span<TileT::kChannels>(p, channels);
  const int lane = s.lane, warp = s.warp;
  const BlockRoi<acc_t> r = setup_roi(rois, s.k, batch, grad_sums, p, ytaps, xtaps);
  const int gh = r.box.grid_h, gw = r.box.grid_w;
  if (r.batch < 0 || gh * gw == 0) {
    return; // uniform across the block
  }
  const acc_t inv_count = acc_t(1) / static_cast<acc_t>(gh * gw);
  const int64_t c = s.c0 + lane * VEC;
  const int64_t width = r.width;
  acc_t* pixels = select_entry(grad_sums.data, r.level) + (r.batch * r.height * r.width) * channels + c;

  // Adds value * (the sample's bilinear weights) to its four taps.
  auto scatter = [&](const AxisTap<acc_t>& ty, const AxisTap<acc_t>& tx, const acc_t(&value)[VEC]) {
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

  for (int64_t bin0 = 0; bin0 < s.bins; bin0 += kBinChunk) {
    const int64_t chunk_bins = smaller<int64_t>(kBinChunk, s.bins - bin0);
    for_each_nchw_entry(s, channels, bin0, chunk_bins, [&](int cl, int bl, int64_t o) {
      tile.value[tile.at(bl, cl)] = static_cast<acc_t>(grad_output[o]);
      if (kMax) {
        tile.argmax[tile.at(bl, cl)] = argmax[o];
      }
    });
    __syncthreads();
    if (c < channels) {
      for (int bl = warp; bl < chunk_bins; bl += kWarps) {
        const int64_t ph = (bin0 + bl) / p.pooled_width, pw = (bin0 + bl) % p.pooled_width;
        if (kMax) {
          // Each channel's gradient goes to its own winning sample.
#pragma unroll
          for (int v = 0; v < VEC; ++v) {
            const int sample = tile.argmax[tile.at(bl, lane * VEC + v)];
            if (sample >= 0 && sample < gh * gw) {
              const AxisTap<acc_t> ty = y_tap(r, ytaps, ph, sample / gw), tx = x_tap(r, xtaps, pw, sample % gw);
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

// Atomics into channels-last float (double) buffers, then one transpose per
// map to the NCHW gradient in the input's dtype.
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
                             at::MemoryFormat::ChannelsLast)
                       .zero_());
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
    layout::transpose(sums[l].const_data_ptr<acc_t>(), grads[l].mutable_data_ptr<scalar_t>(), batch,
                      sums[l].size(2) * sums[l].size(3), channels, stream);
  }
}

} // namespace

std::vector<at::Tensor> roi_align_backward_cuda(const at::Tensor& grad_output_, const at::Tensor& rois_,
                                                const at::Tensor& argmax_,
                                                const std::vector<std::vector<int64_t>>& feature_shapes,
                                                const RoIAlignParams& params) {
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
  if (at::globalContext().deterministicAlgorithms()) {
    roi_align_cuda::gather_backward(grad_output, rois, argmax, grads, params, stream);
    return grads;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad_output.scalar_type(), "mmops::roi_align backward (CUDA)",
      [&] { scatter_backward<scalar_t>(grad_output, rois, argmax, grads, params, stream); });
  return grads;
}

} // namespace kernels
} // namespace mmops

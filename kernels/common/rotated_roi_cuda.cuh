#pragma once
// CUDA kernels of rotated RoIAlign (roi_align_rotated, riroi_align_rotated).
//
// One block per (roi, chunk of 32 x VEC output channels); the map is read
// channels-last ([N, H, W, C] in memory, an NCHW map transposed once by
// layout::channels_last_cuda) so that the 32 lanes of a warp read one bilinear
// tap for 32 x VEC consecutive channels together, VEC per lane in one load
// (VEC = 4, 2 for double; 1 for riroi, a channel count that VEC does not
// divide, or a misaligned map). The sample geometry is computed per lane and
// serves its VEC channels, so VEC divides that cost. Warps walk the bins; a
// shared tile of 32 bins x 32 VEC channels turns the NCHW side ([K, C, PH, PW]
// output / grad_output) into coalesced runs of bins.
// The backward scatters with atomics into a channels-last opmath buffer
// (coalesced, one float4 atomic per lane and tap on sm_90), transposed into
// the NCHW gradient at the end; under torch.use_deterministic_algorithms a
// gather-by-input-channel kernel instead.
// A roi with a batch index outside [0, N) or a non-finite value pools zeros
// and gets no gradient (the index is guarded here, checked on the host only
// with the strict switch).

#include "common/cuda_helpers.cuh"
#include "common/layout.h"
#include "common/layout_cuda.cuh"
#include "common/rotated_roi.h"

#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace mmops {
namespace kernels {
namespace rotated_roi_cuda {

using rotated_roi::Corners;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kChannels = 32; // output channels per block (one per lane)
constexpr int kBinChunk = 32; // bins staged in the shared tile at a time

template <typename acc_t, typename scalar_t>
__device__ inline rotated_roi::Roi<acc_t> load_roi(const scalar_t* rois, int64_t k, int64_t batch,
                                                   const RotatedRoiParams& p) {
  acc_t values[6];
#pragma unroll
  for (int j = 0; j < 6; ++j) {
    values[j] = static_cast<acc_t>(rois[k * 6 + j]);
  }
  return rotated_roi::make_roi(values, batch, p);
}

// VEC consecutive channels of a lane travel in one load / one vector atomic
// (roi_align_rotated with channels % VEC == 0 and an aligned map: the host
// picks VEC; riroi's rotated source channels are not consecutive: VEC 1).
template <typename acc_t, int VEC>
struct Lanes {
  acc_t v[VEC];
};

// Sum over one bin's samples of VEC channels (pixels: the first of them in a
// channels-last image, `stride` = C).
template <int VEC, typename acc_t, typename scalar_t>
__device__ inline Lanes<acc_t, VEC> bin_sum(const scalar_t* __restrict__ pixels, int64_t stride,
                                            const rotated_roi::Roi<acc_t>& r, int64_t ph, int64_t pw, int64_t height,
                                            int64_t width) {
  using PackT = cuda_helpers::Pack<scalar_t, VEC>;
  Lanes<acc_t, VEC> sum{};
  for (int iy = 0; iy < r.grid_h; ++iy) {
    for (int ix = 0; ix < r.grid_w; ++ix) {
      const Corners<acc_t> c = rotated_roi::sample_taps(r, ph, pw, iy, ix, height, width);
      PackT taps[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        taps[j] = cuda_helpers::load_readonly(reinterpret_cast<const PackT*>(pixels + c.offset[j] * stride));
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          sum.v[i] += c.weight[j] * static_cast<acc_t>(taps[j].v[i]);
        }
      }
    }
  }
  return sum;
}

template <typename scalar_t, int VEC>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const scalar_t* __restrict__ input, // [N, H, W, C]
                   const scalar_t* __restrict__ rois, scalar_t* __restrict__ output, int64_t batch, int64_t channels,
                   int64_t height, int64_t width, RotatedRoiParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  constexpr int kBlockChannels = kChannels * VEC;
  __shared__ acc_t tile[kBinChunk][kBlockChannels + 1];
  const int64_t k = blockIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kBlockChannels;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t co = c0 + lane * VEC; // channels % VEC == 0: all VEC in range or none
  const int64_t bins = p.pooled_height * p.pooled_width;
  const rotated_roi::Roi<acc_t> r = load_roi<acc_t>(rois, k, batch, p);
  // an empty map reads nothing (a tap of weight 0 still reads offset 0)
  const bool active = co < channels && r.batch >= 0 && r.inv_count != acc_t(0) && height > 0 && width > 0;
  const rotated_roi::SourceChannels src = rotated_roi::source_channels(active ? co : 0, r, p);
  const scalar_t* image = input + (active ? r.batch : 0) * height * width * channels;
  for (int64_t bin0 = 0; bin0 < bins; bin0 += kBinChunk) {
    const int nb = static_cast<int>(bins - bin0 < kBinChunk ? bins - bin0 : kBinChunk);
    for (int b = warp; b < nb; b += kWarps) {
      const int64_t bin = bin0 + b, ph = bin / p.pooled_width, pw = bin - ph * p.pooled_width;
      Lanes<acc_t, VEC> v{};
      if (active) {
        const Lanes<acc_t, VEC> lo = bin_sum<VEC>(image + src.lo, channels, r, ph, pw, height, width);
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          v.v[i] = r.w_lo * lo.v[i];
        }
        if (r.w_hi != acc_t(0)) {
          const Lanes<acc_t, VEC> hi = bin_sum<VEC>(image + src.hi, channels, r, ph, pw, height, width);
#pragma unroll
          for (int i = 0; i < VEC; ++i) {
            v.v[i] += r.w_hi * hi.v[i];
          }
        }
      }
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        tile[b][lane * VEC + i] = v.v[i] * r.inv_count;
      }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < nb * kBlockChannels; i += kThreads) {
      const int ci = i / nb, b = i - ci * nb;
      if (c0 + ci < channels) {
        output[(k * channels + c0 + ci) * bins + bin0 + b] = static_cast<scalar_t>(tile[b][ci]);
      }
    }
    __syncthreads();
  }
}

// pixels[0, VEC) += g: one vector atomic where the hardware has it (sm_90's
// float2 / float4 atomicAdd), else VEC scalar ones.
template <int VEC, typename acc_t>
__device__ inline void atomic_add_lanes(acc_t* address, const Lanes<acc_t, VEC>& g) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr bool kVectorAtomic = std::is_same_v<acc_t, float> && (VEC == 4 || VEC == 2);
#else
  constexpr bool kVectorAtomic = false;
#endif
  if constexpr (kVectorAtomic && VEC == 4) {
    atomicAdd(reinterpret_cast<float4*>(address), make_float4(g.v[0], g.v[1], g.v[2], g.v[3]));
  } else if constexpr (kVectorAtomic && VEC == 2) {
    atomicAdd(reinterpret_cast<float2*>(address), make_float2(g.v[0], g.v[1]));
  } else {
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      atomicAdd(address + i, g.v[i]);
    }
  }
}

template <int VEC, typename acc_t>
__device__ inline void scatter_bin(acc_t* __restrict__ pixels, int64_t stride, const rotated_roi::Roi<acc_t>& r,
                                   int64_t ph, int64_t pw, int64_t height, int64_t width, const Lanes<acc_t, VEC>& g) {
  for (int iy = 0; iy < r.grid_h; ++iy) {
    for (int ix = 0; ix < r.grid_w; ++ix) {
      const Corners<acc_t> c = rotated_roi::sample_taps(r, ph, pw, iy, ix, height, width);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (c.weight[j] != acc_t(0)) {
          Lanes<acc_t, VEC> add;
#pragma unroll
          for (int i = 0; i < VEC; ++i) {
            add.v[i] = g.v[i] * c.weight[j];
          }
          atomic_add_lanes<VEC>(pixels + c.offset[j] * stride, add);
        }
      }
    }
  }
}

template <int VEC, typename acc_t>
__device__ inline Lanes<acc_t, VEC> scaled(const Lanes<acc_t, VEC>& g, acc_t w) {
  Lanes<acc_t, VEC> out;
#pragma unroll
  for (int i = 0; i < VEC; ++i) {
    out.v[i] = g.v[i] * w;
  }
  return out;
}

template <typename scalar_t, int VEC>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const scalar_t* __restrict__ grad_output, // [K, C, PH, PW]
                    const scalar_t* __restrict__ rois,
                    at::opmath_type<scalar_t>* __restrict__ grad, // [N, H, W, C]
                    int64_t batch, int64_t channels, int64_t height, int64_t width, RotatedRoiParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  constexpr int kBlockChannels = kChannels * VEC;
  __shared__ acc_t tile[kBinChunk][kBlockChannels + 1];
  const int64_t k = blockIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kBlockChannels;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t co = c0 + lane * VEC;
  const int64_t bins = p.pooled_height * p.pooled_width;
  const rotated_roi::Roi<acc_t> r = load_roi<acc_t>(rois, k, batch, p);
  if (r.batch < 0 || r.inv_count == acc_t(0)) {
    return; // the same for the whole block: no barrier is skipped by part of it
  }
  const bool active = co < channels;
  const rotated_roi::SourceChannels src = rotated_roi::source_channels(active ? co : 0, r, p);
  acc_t* image = grad + r.batch * height * width * channels;
  for (int64_t bin0 = 0; bin0 < bins; bin0 += kBinChunk) {
    const int nb = static_cast<int>(bins - bin0 < kBinChunk ? bins - bin0 : kBinChunk);
    for (int i = threadIdx.x; i < nb * kBlockChannels; i += kThreads) {
      const int ci = i / nb, b = i - ci * nb;
      tile[b][ci] = c0 + ci < channels
                        ? static_cast<acc_t>(grad_output[(k * channels + c0 + ci) * bins + bin0 + b]) * r.inv_count
                        : acc_t(0);
    }
    __syncthreads();
    for (int b = warp; b < nb && active; b += kWarps) {
      const int64_t bin = bin0 + b, ph = bin / p.pooled_width, pw = bin - ph * p.pooled_width;
      Lanes<acc_t, VEC> g;
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        g.v[i] = tile[b][lane * VEC + i];
      }
      scatter_bin<VEC>(image + src.lo, channels, r, ph, pw, height, width, scaled<VEC>(g, r.w_lo));
      if (r.w_hi != acc_t(0)) {
        scatter_bin<VEC>(image + src.hi, channels, r, ph, pw, height, width, scaled<VEC>(g, r.w_hi));
      }
    }
    __syncthreads();
  }
}

// The deterministic backward (torch.use_deterministic_algorithms): one warp per
// (image, 32 input channels); a lane owns its input channel, walks the image's
// rois in order and gathers from the output channels that read it
// (output_channels), so every gradient value has one writer in a fixed order.
// Less parallel than the atomic backward (N x C / 32 warps).
template <typename scalar_t>
__global__ void __launch_bounds__(32)
    deterministic_backward_kernel(const scalar_t* __restrict__ grad_output, // [K, C, PH, PW]
                                  const scalar_t* __restrict__ rois,
                                  at::opmath_type<scalar_t>* __restrict__ grad, // [N, H, W, C]
                                  int64_t num_rois, int64_t batch, int64_t channels, int64_t height, int64_t width,
                                  RotatedRoiParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t image = blockIdx.x;
  const int64_t ci = static_cast<int64_t>(blockIdx.y) * kChannels + threadIdx.x;
  if (ci >= channels) {
    return;
  }
  const int64_t bins = p.pooled_height * p.pooled_width;
  acc_t* pixels = grad + image * height * width * channels + ci;
  for (int64_t k = 0; k < num_rois; ++k) {
    const rotated_roi::Roi<acc_t> r = load_roi<acc_t>(rois, k, batch, p);
    if (r.batch != image || r.inv_count == acc_t(0)) {
      continue;
    }
    const rotated_roi::SourceChannels from = rotated_roi::output_channels(ci, r, p);
    const scalar_t* roi_go = grad_output + k * channels * bins;
    for (int64_t bin = 0; bin < bins; ++bin) {
      const int64_t ph = bin / p.pooled_width, pw = bin - ph * p.pooled_width;
      acc_t g = r.w_lo * static_cast<acc_t>(roi_go[from.lo * bins + bin]);
      if (r.w_hi != acc_t(0)) {
        g += r.w_hi * static_cast<acc_t>(roi_go[from.hi * bins + bin]);
      }
      g *= r.inv_count;
      for (int iy = 0; iy < r.grid_h; ++iy) {
        for (int ix = 0; ix < r.grid_w; ++ix) {
          const Corners<acc_t> c = rotated_roi::sample_taps(r, ph, pw, iy, ix, height, width);
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            if (c.weight[j] != acc_t(0)) {
              pixels[c.offset[j] * channels] += g * c.weight[j];
            }
          }
        }
      }
    }
  }
}

// The largest grid.y of a launch.
constexpr int64_t kMaxGridY = 65535;

inline dim3 launch_grid(int64_t num_rois, int64_t channels, int64_t block_channels, const char* name) {
  const int64_t chunks = (channels + block_channels - 1) / block_channels;
  TORCH_CHECK(chunks <= kMaxGridY, name, ": ", channels, " channels are too many for one launch (at most ",
              kMaxGridY * block_channels, ")");
  TORCH_CHECK(num_rois <= std::numeric_limits<int32_t>::max(), name, ": at most 2^31 - 1 rois, but got ", num_rois);
  return dim3(static_cast<unsigned>(num_rois), static_cast<unsigned>(chunks));
}

// Whether VEC channels of a lane can travel together: consecutive source
// channels (no orientation shift), whole packs per pixel and an aligned base.
template <typename T, int VEC>
bool can_vectorize(const T* base, int64_t channels, const RotatedRoiParams& p) {
  return VEC > 1 && !p.rotate_channels && channels % VEC == 0 &&
         reinterpret_cast<std::uintptr_t>(base) % (sizeof(T) * VEC) == 0;
}

// output [K, C, PH, PW] (NCHW-contiguous) of input [N, C, H, W] (any strides).
inline at::Tensor forward(const at::Tensor& input_, const at::Tensor& rois_, const RotatedRoiParams& p,
                          const char* name) {
  c10::cuda::CUDAGuard device_guard(input_.device());
  const int64_t batch = input_.size(0), channels = input_.size(1), height = input_.size(2), width = input_.size(3);
  at::Tensor output = at::empty({rois_.size(0), channels, p.pooled_height, p.pooled_width}, input_.options());
  if (output.numel() == 0) {
    return output;
  }
  const at::Tensor rois = rois_.contiguous();
  const at::Tensor input = channels_last_cuda(input_);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops rotated RoIAlign forward", [&] {
    constexpr int kVec = cuda_helpers::channel_vector<scalar_t>();
    const scalar_t* in = input.const_data_ptr<scalar_t>();
    if (can_vectorize<scalar_t, kVec>(in, channels, p)) {
      forward_kernel<scalar_t, kVec>
          <<<launch_grid(rois.size(0), channels, kChannels * kVec, name), kThreads, 0, stream>>>(
              in, rois.const_data_ptr<scalar_t>(), output.mutable_data_ptr<scalar_t>(), batch, channels, height, width,
              p);
    } else {
      forward_kernel<scalar_t, 1><<<launch_grid(rois.size(0), channels, kChannels, name), kThreads, 0, stream>>>(
          in, rois.const_data_ptr<scalar_t>(), output.mutable_data_ptr<scalar_t>(), batch, channels, height, width, p);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return output;
}

// Gradient [N, C, H, W] (input_shape, NCHW-contiguous) of the input.
inline at::Tensor backward(const at::Tensor& grad_output_, const at::Tensor& rois_,
                           const std::vector<int64_t>& input_shape, const RotatedRoiParams& p, const char* name) {
  c10::cuda::CUDAGuard device_guard(grad_output_.device());
  at::Tensor grad = at::empty(input_shape, grad_output_.options());
  const int64_t batch = input_shape[0], channels = input_shape[1], height = input_shape[2], width = input_shape[3];
  if (grad_output_.numel() == 0 || grad.numel() == 0) {
    return grad.zero_();
  }
  const bool deterministic = at::globalContext().deterministicAlgorithms();
  TORCH_CHECK(!deterministic || batch <= std::numeric_limits<int32_t>::max(), name,
              ": the deterministic backward takes at most 2^31 - 1 images, but got ", batch);
  const dim3 grid = launch_grid(rois_.size(0), channels, kChannels, name);
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor rois = rois_.contiguous();
  const auto acc_dtype = at::toOpMathType(grad_output.scalar_type());
  at::Tensor sums = at::zeros({batch, height, width, channels}, grad_output.options().dtype(acc_dtype));
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad_output.scalar_type(), "mmops rotated RoIAlign backward", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        constexpr int kVec = cuda_helpers::channel_vector<acc_t>();
        const scalar_t* go = grad_output.const_data_ptr<scalar_t>();
        const scalar_t* rp = rois.const_data_ptr<scalar_t>();
        acc_t* sp = sums.mutable_data_ptr<acc_t>();
        if (deterministic) {
          const dim3 per_image(static_cast<unsigned>(batch), grid.y);
          deterministic_backward_kernel<scalar_t>
              <<<per_image, kChannels, 0, stream>>>(go, rp, sp, rois.size(0), batch, channels, height, width, p);
        } else if (can_vectorize<acc_t, kVec>(sp, channels, p)) {
          backward_kernel<scalar_t, kVec>
              <<<launch_grid(rois.size(0), channels, kChannels * kVec, name), kThreads, 0, stream>>>(
                  go, rp, sp, batch, channels, height, width, p);
        } else {
          backward_kernel<scalar_t, 1><<<grid, kThreads, 0, stream>>>(go, rp, sp, batch, channels, height, width, p);
        }
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        layout::transpose(sums.const_data_ptr<acc_t>(), grad.mutable_data_ptr<scalar_t>(), batch, height * width,
                          channels, stream);
      });
  return grad;
}

} // namespace rotated_roi_cuda
} // namespace kernels
} // namespace mmops

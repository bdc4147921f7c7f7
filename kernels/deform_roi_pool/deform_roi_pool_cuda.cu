// CUDA kernels of deform_roi_pool (NCHW, as mmcv's).
//
// Forward: one thread per output value (roi, channel, bin); a warp covers
// consecutive bins of one channel, so the rois' geometry is read by all lanes
// at once. Backward: the input gradient by atomic adds of each output's share
// into a float (double) NCHW buffer, converted to the input's dtype after (no
// half atomics); the offset gradient as a gather, one warp per (roi, bin) over
// the channels, reduced with shuffles (deterministic, no atomics). Batch
// indices are guarded in the kernels (a bad one pools zeros).

#include "deform_roi_pool/deform_roi_pool_kernels.h"
#include "deform_roi_pool/deform_roi_pool_math.h"

#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>

namespace mmops {
namespace kernels {
namespace {

using namespace deform_roi_pool_math;

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;

struct Shape {
  int64_t rois, batch, channels, height, width, pooled_h, pooled_w;
};

// Blocks of a grid-stride loop over `work` items, `per_block` a block.
unsigned int blocks_for(int64_t work, int64_t per_block = kThreads) {
  return static_cast<unsigned int>(std::min<int64_t>((work + per_block - 1) / per_block, int64_t(1) << 20));
}

// Box and shifted origin of bin `bin` of roi k.
template <typename acc_t, typename scalar_t>
__device__ inline void bin_geometry(const scalar_t* rois, const scalar_t* offset, const Shape& s,
                                    const DeformRoIPoolParams& p, int64_t k, int64_t bin, DeformBox<acc_t>& box,
                                    BinOrigin<acc_t>& origin) {
  acc_t roi[5];
#pragma unroll
  for (int i = 0; i < 5; ++i) {
    roi[i] = static_cast<acc_t>(rois[k * 5 + i]);
  }
  box = make_box<acc_t>(roi, s.batch, static_cast<acc_t>(p.spatial_scale), s.pooled_h, s.pooled_w, p.sampling_ratio);
  const int64_t bins = s.pooled_h * s.pooled_w;
  const acc_t dx = offset != nullptr ? static_cast<acc_t>(offset[(k * 2) * bins + bin]) : acc_t(0);
  const acc_t dy = offset != nullptr ? static_cast<acc_t>(offset[(k * 2 + 1) * bins + bin]) : acc_t(0);
  origin = bin_origin(box, bin / s.pooled_w, bin % s.pooled_w, dx, dy, static_cast<acc_t>(p.gamma));
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const scalar_t* __restrict__ input, const scalar_t* __restrict__ rois,
                   const scalar_t* __restrict__ offset, scalar_t* __restrict__ output, Shape s, DeformRoIPoolParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t bins = s.pooled_h * s.pooled_w, total = s.rois * s.channels * bins;
  const int64_t plane = s.height * s.width;
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < total; o += int64_t(gridDim.x) * blockDim.x) {
    const int64_t bin = o % bins, c = (o / bins) % s.channels, k = o / (bins * s.channels);
    DeformBox<acc_t> box;
    BinOrigin<acc_t> origin;
    bin_geometry(rois, offset, s, p, k, bin, box, origin);
    const int count = box.grid_h * box.grid_w;
    acc_t sum = acc_t(0);
    if (count > 0) {
      const scalar_t* map = input + (box.batch * s.channels + c) * plane;
      for (int iy = 0; iy < box.grid_h; ++iy) {
        for (int ix = 0; ix < box.grid_w; ++ix) {
          const SampleTaps<acc_t> t = sample_taps(box, origin, iy, ix, s.height, s.width);
          if (t.ty.valid && t.tx.valid) {
            sum += blend(t, load_quad(t, s.width, [&](int64_t i) { return static_cast<acc_t>(map[i]); }));
          }
        }
      }
      sum /= static_cast<acc_t>(count);
    }
    output[o] = static_cast<scalar_t>(sum);
  }
}

// grad_sum (acc_t, NCHW) += each output's share at its samples' taps.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    grad_input_kernel(const scalar_t* __restrict__ grad_output, const scalar_t* __restrict__ rois,
                      const scalar_t* __restrict__ offset, at::opmath_type<scalar_t>* __restrict__ grad_sum, Shape s,
                      DeformRoIPoolParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t bins = s.pooled_h * s.pooled_w, total = s.rois * s.channels * bins;
  const int64_t plane = s.height * s.width;
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < total; o += int64_t(gridDim.x) * blockDim.x) {
    const int64_t bin = o % bins, c = (o / bins) % s.channels, k = o / (bins * s.channels);
    DeformBox<acc_t> box;
    BinOrigin<acc_t> origin;
    bin_geometry(rois, offset, s, p, k, bin, box, origin);
    const int count = box.grid_h * box.grid_w;
    if (count == 0) {
      continue;
    }
    const acc_t share = static_cast<acc_t>(grad_output[o]) / static_cast<acc_t>(count);
    acc_t* map = grad_sum + (box.batch * s.channels + c) * plane;
    for (int iy = 0; iy < box.grid_h; ++iy) {
      for (int ix = 0; ix < box.grid_w; ++ix) {
        const SampleTaps<acc_t> t = sample_taps(box, origin, iy, ix, s.height, s.width);
        if (!(t.ty.valid && t.tx.valid)) {
          continue;
        }
        const int64_t r0 = int64_t(t.ty.lo) * s.width, r1 = int64_t(t.ty.hi) * s.width;
        atomicAdd(map + r0 + t.tx.lo, share * t.ty.w_lo * t.tx.w_lo);
        atomicAdd(map + r0 + t.tx.hi, share * t.ty.w_lo * t.tx.w_hi);
        atomicAdd(map + r1 + t.tx.lo, share * t.ty.w_hi * t.tx.w_lo);
        atomicAdd(map + r1 + t.tx.hi, share * t.ty.w_hi * t.tx.w_hi);
      }
    }
  }
}

template <typename acc_t>
__device__ inline acc_t warp_sum(acc_t v) {
#pragma unroll
  for (int d = 16; d > 0; d /= 2) {
    v += __shfl_down_sync(0xffffffffu, v, d);
  }
  return v;
}

// One warp per (roi, bin): lanes stride the channels.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    grad_offset_kernel(const scalar_t* __restrict__ grad_output, const scalar_t* __restrict__ input,
                       const scalar_t* __restrict__ rois, const scalar_t* __restrict__ offset,
                       scalar_t* __restrict__ grad_offset, Shape s, DeformRoIPoolParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t bins = s.pooled_h * s.pooled_w, total = s.rois * bins, plane = s.height * s.width;
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t kb = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32; kb < total; kb += warps) {
    const int64_t k = kb / bins, bin = kb % bins;
    DeformBox<acc_t> box;
    BinOrigin<acc_t> origin;
    bin_geometry(rois, offset, s, p, k, bin, box, origin);
    const int count = box.grid_h * box.grid_w;
    acc_t sx = acc_t(0), sy = acc_t(0);
    for (int iy = 0; iy < box.grid_h; ++iy) {
      for (int ix = 0; ix < box.grid_w; ++ix) {
        const SampleTaps<acc_t> t = sample_taps(box, origin, iy, ix, s.height, s.width);
        if (!(t.ty.valid && t.tx.valid) || (t.sx == acc_t(0) && t.sy == acc_t(0))) {
          continue; // uniform across the warp
        }
        for (int64_t c = lane; c < s.channels; c += 32) {
          const scalar_t* map = input + (box.batch * s.channels + c) * plane;
          const Quad<acc_t> q = load_quad(t, s.width, [&](int64_t i) { return static_cast<acc_t>(map[i]); });
          const acc_t g = static_cast<acc_t>(grad_output[(k * s.channels + c) * bins + bin]);
          sx += g * d_dx(t, q);
          sy += g * d_dy(t, q);
        }
      }
    }
    sx = warp_sum(sx);
    sy = warp_sum(sy);
    if (lane == 0) {
      // count == 0: also a box of non-finite size, whose product would be NaN
      const acc_t scale = count > 0 ? static_cast<acc_t>(p.gamma) / static_cast<acc_t>(count) : acc_t(0);
      grad_offset[(k * 2) * bins + bin] = static_cast<scalar_t>(count > 0 ? sx * scale * box.roi_w : acc_t(0));
      grad_offset[(k * 2 + 1) * bins + bin] = static_cast<scalar_t>(count > 0 ? sy * scale * box.roi_h : acc_t(0));
    }
  }
}

Shape shape_of(const at::Tensor& input, const at::Tensor& rois, const DeformRoIPoolParams& p) {
  return {rois.size(0), input.size(0), input.size(1), input.size(2), input.size(3), p.pooled_height, p.pooled_width};
}

template <typename scalar_t>
const scalar_t* offset_ptr(const at::Tensor& offset) {
  return offset.defined() ? offset.const_data_ptr<scalar_t>() : nullptr;
}

} // namespace

at::Tensor deform_roi_pool_forward_cuda(const at::Tensor& input_, const at::Tensor& rois_,
                                        const std::optional<at::Tensor>& offset_, const DeformRoIPoolParams& params) {
  c10::cuda::CUDAGuard device_guard(input_.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const at::Tensor input = input_.contiguous(), rois = rois_.contiguous();
  const at::Tensor offset = offset_.has_value() ? offset_->contiguous() : at::Tensor();
  at::Tensor output =
      at::empty({rois.size(0), input.size(1), params.pooled_height, params.pooled_width}, input.options());
  if (output.numel() == 0) {
    return output;
  }
  const Shape s = shape_of(input, rois, params);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::deform_roi_pool (CUDA)", [&] {
    forward_kernel<scalar_t><<<blocks_for(output.numel()), kThreads, 0, stream>>>(
        input.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(), offset_ptr<scalar_t>(offset),
        output.mutable_data_ptr<scalar_t>(), s, params);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return output;
}

std::tuple<at::Tensor, at::Tensor> deform_roi_pool_backward_cuda(const at::Tensor& grad_output_,
                                                                 const at::Tensor& input_, const at::Tensor& rois_,
                                                                 const std::optional<at::Tensor>& offset_,
                                                                 const DeformRoIPoolParams& params) {
  c10::cuda::CUDAGuard device_guard(grad_output_.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const at::Tensor grad_output = grad_output_.contiguous(), input = input_.contiguous(), rois = rois_.contiguous();
  const at::Tensor offset = offset_.has_value() ? offset_->contiguous() : at::Tensor();
  at::Tensor grad_offset =
      offset.defined() ? at::zeros(offset.sizes(), offset.options()) : at::empty({0}, input.options());
  if (grad_output.numel() == 0 || input.numel() == 0) {
    return {at::zeros(input.sizes(), input.options()), grad_offset};
  }
  // The float atomics add in a varying order: no deterministic variant (yet).
  at::globalContext().alertNotDeterministic("mmops::deform_roi_pool backward (CUDA)");
  const Shape s = shape_of(input, rois, params);
  at::Tensor grad_input;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::deform_roi_pool backward (CUDA)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        at::Tensor sum = at::zeros(input.sizes(), input.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
        grad_input_kernel<scalar_t><<<blocks_for(grad_output.numel()), kThreads, 0, stream>>>(
            grad_output.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(), offset_ptr<scalar_t>(offset),
            sum.mutable_data_ptr<acc_t>(), s, params);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        grad_input = sum.scalar_type() == input.scalar_type() ? sum : sum.to(input.scalar_type());
        if (offset.defined()) {
          const unsigned int blocks = blocks_for(s.rois * s.pooled_h * s.pooled_w, kWarpsPerBlock);
          grad_offset_kernel<scalar_t><<<blocks, kThreads, 0, stream>>>(
              grad_output.const_data_ptr<scalar_t>(), input.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(),
              offset_ptr<scalar_t>(offset), grad_offset.mutable_data_ptr<scalar_t>(), s, params);
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
      });
  return {grad_input, grad_offset};
}

} // namespace kernels
} // namespace mmops

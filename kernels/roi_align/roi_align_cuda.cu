// CUDA kernels of roi_align.
//
// Forward: one thread per output value (roi, channel, bin), NCHW.
// Backward: one thread per output gradient, scattered with atomic adds into a
// gradient buffer of the accumulation type (float for half/bfloat16).
// A roi whose batch index is out of range pools zeros and scatters nothing, so
// no out-of-bounds access can happen whatever the rois hold.

#include "roi_align/roi_align_kernels.h"
#include "roi_align/roi_align_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/Atomic.cuh>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>

namespace mmops {
namespace kernels {
namespace {

using namespace roi_align_math;

constexpr int kThreads = 256;

int64_t grid_size(int64_t work) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  // Grid-stride loops cover the rest; 2^20 blocks saturate any current GPU.
  return std::min<int64_t>(std::max<int64_t>(blocks, 1), int64_t(1) << 20);
}

template <typename scalar_t, typename acc_t>
__device__ inline RoiBox<acc_t> load_box(const scalar_t* roi, const RoIAlignParams& p) {
  return make_roi_box<acc_t>(
      static_cast<acc_t>(roi[1]), static_cast<acc_t>(roi[2]), static_cast<acc_t>(roi[3]),
      static_cast<acc_t>(roi[4]), static_cast<acc_t>(p.spatial_scale), p.aligned,
      p.pooled_height, p.pooled_width, p.sampling_ratio);
}

template <typename scalar_t>
__global__ void forward_kernel(
    const scalar_t* __restrict__ input, const scalar_t* __restrict__ rois,
    scalar_t* __restrict__ output, int32_t* __restrict__ argmax, int64_t total,
    int64_t batch, int64_t channels, int64_t height, int64_t width, RoIAlignParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t pw_count = p.pooled_width, ph_count = p.pooled_height;
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < total;
       index += int64_t(gridDim.x) * blockDim.x) {
    const int64_t pw = index % pw_count;
    const int64_t ph = (index / pw_count) % ph_count;
    const int64_t c = (index / (pw_count * ph_count)) % channels;
    const int64_t k = index / (pw_count * ph_count * channels);
    const scalar_t* roi = rois + k * 5;
    const int64_t b = batch_index(static_cast<acc_t>(roi[0]), batch);
    const RoiBox<acc_t> box = load_box<scalar_t, acc_t>(roi, p);
    if (b < 0 || !box.valid) {
      output[index] = scalar_t(0);
      if (argmax) {
        argmax[index] = -1;
      }
      continue;
    }
    const scalar_t* plane = input + (b * channels + c) * height * width;
    auto load = [plane](int64_t offset) { return static_cast<acc_t>(plane[offset]); };
    const int gh = box.grid_h, gw = box.grid_w;
    if (p.pool_mode == PoolMode::Max) {
      MaxTracker<acc_t> tracker;
      for (int iy = 0; iy < gh; ++iy) {
        const AxisTap<acc_t> ty = axis_tap(sample_coord(box.start_y, box.bin_h, ph, iy, gh), height);
        for (int ix = 0; ix < gw; ++ix) {
          const AxisTap<acc_t> tx = axis_tap(sample_coord(box.start_x, box.bin_w, pw, ix, gw), width);
          tracker.update(interpolate(ty, tx, width, load), iy * gw + ix);
        }
      }
      output[index] = static_cast<scalar_t>(tracker.result());
      if (argmax) {
        argmax[index] = tracker.index;
      }
    } else {
      acc_t sum = 0;
      for (int iy = 0; iy < gh; ++iy) {
        const AxisTap<acc_t> ty = axis_tap(sample_coord(box.start_y, box.bin_h, ph, iy, gh), height);
        for (int ix = 0; ix < gw; ++ix) {
          const AxisTap<acc_t> tx = axis_tap(sample_coord(box.start_x, box.bin_w, pw, ix, gw), width);
          sum += interpolate(ty, tx, width, load);
        }
      }
      const int count = gh * gw;
      output[index] = static_cast<scalar_t>(count > 0 ? sum / static_cast<acc_t>(count) : acc_t(0));
    }
  }
}

template <typename scalar_t, typename acc_t>
__global__ void backward_kernel(
    const scalar_t* __restrict__ grad_output, const scalar_t* __restrict__ rois,
    const int32_t* __restrict__ argmax, acc_t* __restrict__ grad_input, int64_t total,
    int64_t batch, int64_t channels, int64_t height, int64_t width, RoIAlignParams p) {
  const int64_t pw_count = p.pooled_width, ph_count = p.pooled_height;
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < total;
       index += int64_t(gridDim.x) * blockDim.x) {
    const int64_t pw = index % pw_count;
    const int64_t ph = (index / pw_count) % ph_count;
    const int64_t c = (index / (pw_count * ph_count)) % channels;
    const int64_t k = index / (pw_count * ph_count * channels);
    const scalar_t* roi = rois + k * 5;
    const int64_t b = batch_index(static_cast<acc_t>(roi[0]), batch);
    const RoiBox<acc_t> box = load_box<scalar_t, acc_t>(roi, p);
    const int gh = box.grid_h, gw = box.grid_w;
    if (b < 0 || gh * gw == 0) {
      continue;
    }
    acc_t* plane = grad_input + (b * channels + c) * height * width;
    const acc_t g = static_cast<acc_t>(grad_output[index]);
    auto scatter = [plane, width](const AxisTap<acc_t>& ty, const AxisTap<acc_t>& tx, acc_t value) {
      if (!(ty.valid && tx.valid)) {
        return;
      }
      const Corners<acc_t> cr = corners(ty, tx, width);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        gpuAtomicAdd(plane + cr.offset[j], value * cr.weight[j]);
      }
    };
    if (p.pool_mode == PoolMode::Max) {
      const int s = argmax[index];
      if (s >= 0 && s < gh * gw) {
        const int iy = s / gw, ix = s % gw;
        scatter(axis_tap(sample_coord(box.start_y, box.bin_h, ph, iy, gh), height),
                axis_tap(sample_coord(box.start_x, box.bin_w, pw, ix, gw), width), g);
      }
    } else {
      const acc_t g_sample = g / static_cast<acc_t>(gh * gw);
      for (int iy = 0; iy < gh; ++iy) {
        const AxisTap<acc_t> ty = axis_tap(sample_coord(box.start_y, box.bin_h, ph, iy, gh), height);
        for (int ix = 0; ix < gw; ++ix) {
          scatter(ty, axis_tap(sample_coord(box.start_x, box.bin_w, pw, ix, gw), width), g_sample);
        }
      }
    }
  }
}

} // namespace

bool current_cuda_stream_is_capturing() {
  return c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
}

std::tuple<at::Tensor, at::Tensor> roi_align_forward_cuda(
    const at::Tensor& input_, const at::Tensor& rois_, const RoIAlignParams& params,
    bool with_argmax) {
  c10::cuda::CUDAGuard device_guard(input_.device());
  const at::Tensor input = input_.contiguous();
  const at::Tensor rois = rois_.contiguous();
  at::Tensor output = at::empty(
      {rois.size(0), input.size(1), params.pooled_height, params.pooled_width}, input.options());
  const bool store_argmax = with_argmax && params.pool_mode == PoolMode::Max;
  at::Tensor argmax = at::empty(store_argmax ? output.sizes() : at::IntArrayRef{0},
                                input.options().dtype(at::kInt));
  const int64_t total = output.numel();
  if (total == 0) {
    return {output, argmax};
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::roi_align (CUDA)", [&] {
    forward_kernel<scalar_t><<<grid_size(total), kThreads, 0, stream>>>(
        input.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(),
        output.mutable_data_ptr<scalar_t>(),
        store_argmax ? argmax.mutable_data_ptr<int32_t>() : nullptr, total, input.size(0),
        input.size(1), input.size(2), input.size(3), params);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {output, argmax};
}

at::Tensor roi_align_backward_cuda(
    const at::Tensor& grad_output_, const at::Tensor& rois_, const at::Tensor& argmax_,
    at::IntArrayRef input_shape, const RoIAlignParams& params) {
  c10::cuda::CUDAGuard device_guard(grad_output_.device());
  at::globalContext().alertNotDeterministic("mmops::roi_align backward (CUDA)");
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor rois = rois_.contiguous();
  const at::Tensor argmax = argmax_.contiguous();
  const auto dtype = grad_output.scalar_type();
  const bool reduced = dtype == at::kHalf || dtype == at::kBFloat16;
  at::Tensor grad_acc = at::zeros(input_shape, grad_output.options().dtype(reduced ? at::kFloat : dtype));
  const int64_t total = grad_output.numel();
  if (total > 0 && grad_acc.numel() > 0) {
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mmops::roi_align backward (CUDA)", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      backward_kernel<scalar_t, acc_t><<<grid_size(total), kThreads, 0, stream>>>(
          grad_output.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(),
          params.pool_mode == PoolMode::Max ? argmax.const_data_ptr<int32_t>() : nullptr,
          grad_acc.mutable_data_ptr<acc_t>(), total, input_shape[0], input_shape[1],
          input_shape[2], input_shape[3], params);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  }
  return reduced ? grad_acc.to(dtype) : grad_acc;
}

} // namespace kernels
} // namespace mmops

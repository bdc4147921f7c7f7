// CUDA kernels of bezier_align.
//
// Forward: one thread per output value (k, c, ph, pw), NCHW order, so that
// consecutive threads take neighbouring bins of one roi and channel: the roi's
// 17 values are a broadcast load, the bins' samples lie close together in the
// channel's plane. The thread evaluates its bin centre on the two curves and
// averages the bin's samples (common/roi_bilinear.h taps) in float (double).
// Backward: the same threads scatter grad_output / samples times the bilinear
// weights. Default: float (double) atomics into an NCHW buffer (float for
// half / bfloat16, rounded once at the end); the order of the adds varies from
// run to run. With torch.use_deterministic_algorithms(True): int64 fixed-point
// adds (common/fixed_point.h), exact and order-free, so bitwise repeatable.
// A roi whose batch index is out of range (guarded here; an error with the
// strict index switch) or whose control points are not finite pools zeros and
// sends no gradient.

#include "bezier_align/bezier_align_kernels.h"
#include "common/fixed_point_cuda.cuh"

#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <ATen/cuda/Atomic.cuh>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using namespace bezier_align_math;

constexpr int kThreads = 256;

// Grid-stride launches: enough blocks to fill the GPU, capped.
int64_t blocks_for(int64_t items) {
  return std::min<int64_t>((items + kThreads - 1) / kThreads, int64_t(1) << 20);
}

// Output value `index` of [K, C, PH, PW] and its roi.
template <typename acc_t>
struct Item {
  int64_t k, c, ph, pw;
  int64_t batch; // -1: the roi pools zeros
  BezierRoi<acc_t> roi;
};

template <typename scalar_t, typename acc_t>
__device__ inline Item<acc_t> item_of(int64_t index, const scalar_t* __restrict__ rois, int64_t batch, int64_t channels,
                                      const BezierAlignParams& p) {
  Item<acc_t> it;
  it.pw = index % p.pooled_width;
  it.ph = (index / p.pooled_width) % p.pooled_height;
  it.c = (index / (p.pooled_width * p.pooled_height)) % channels;
  it.k = index / (p.pooled_width * p.pooled_height * channels);
  const scalar_t* roi = rois + it.k * kRoiColumns;
  it.roi = make_bezier_roi<acc_t>(roi, static_cast<acc_t>(p.spatial_scale), p.aligned, p.pooled_height, p.pooled_width,
                                  p.sampling_ratio);
  const int64_t b = batch_index(static_cast<acc_t>(roi[0]), batch);
  it.batch = it.roi.valid && it.roi.grid_h * it.roi.grid_w > 0 ? b : -1;
  return it;
}

// Calls visit(corners) for each sample of the item's bin that lies in the map.
template <typename acc_t, typename Visit>
__device__ inline void for_each_sample(const Item<acc_t>& it, const BezierAlignParams& p, int64_t height, int64_t width,
                                       Visit&& visit) {
  const BezierRoi<acc_t>& r = it.roi;
  const BinCenter<acc_t> center = bin_center(r, it.ph, it.pw, p.pooled_height, p.pooled_width);
  for (int iy = 0; iy < r.grid_h; ++iy) {
    const AxisTap<acc_t> ty = axis_tap(sample_coord(center.y, r.bin_h, iy, r.grid_h), height);
    if (!ty.valid) {
      continue;
    }
    for (int ix = 0; ix < r.grid_w; ++ix) {
      const AxisTap<acc_t> tx = axis_tap(sample_coord(center.x, r.bin_w, ix, r.grid_w), width);
      if (tx.valid) {
        visit(corners(ty, tx, width));
      }
    }
  }
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const scalar_t* __restrict__ input, // [N, C, H, W]
                   const scalar_t* __restrict__ rois,  // [K, 17]
                   scalar_t* __restrict__ output,      // [K, C, PH, PW]
                   int64_t total, int64_t batch, int64_t channels, int64_t height, int64_t width, BezierAlignParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < total;
       index += int64_t(gridDim.x) * blockDim.x) {
    const Item<acc_t> it = item_of<scalar_t, acc_t>(index, rois, batch, channels, p);
    acc_t sum = acc_t(0);
    if (it.batch >= 0) {
      const scalar_t* plane = input + (it.batch * channels + it.c) * height * width;
      for_each_sample(it, p, height, width, [&](const Corners<acc_t>& cr) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          sum += cr.weight[j] * static_cast<acc_t>(plane[cr.offset[j]]);
        }
      });
      sum /= static_cast<acc_t>(it.roi.grid_h * it.roi.grid_w);
    }
    output[index] = static_cast<scalar_t>(sum);
  }
}

// kFixedPoint: sum_t is int64_t (fixed point at the scale of max_abs); else acc_t atomics.
template <typename scalar_t, typename sum_t, bool kFixedPoint>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const scalar_t* __restrict__ grad_output, // [K, C, PH, PW]
                    const scalar_t* __restrict__ rois,        // [K, 17]
                    sum_t* __restrict__ grad,                 // [N, C, H, W]
                    int64_t total, int64_t batch, int64_t channels, int64_t height, int64_t width, BezierAlignParams p,
                    const double* __restrict__ max_abs, double adds_bound) {
  using acc_t = at::opmath_type<scalar_t>;
  double scale = 1.0;
  if constexpr (kFixedPoint) {
    scale = fixed_point::fixed_point_scale(*max_abs, adds_bound);
    if (!isfinite(scale)) {
      return; // the conversion writes NaN everywhere
    }
  }
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < total;
       index += int64_t(gridDim.x) * blockDim.x) {
    const Item<acc_t> it = item_of<scalar_t, acc_t>(index, rois, batch, channels, p);
    const acc_t g = static_cast<acc_t>(grad_output[index]);
    if (it.batch < 0 || g == acc_t(0)) {
      continue; // nothing to add (a zero gradient adds exact zeros)
    }
    const acc_t g_sample = g / static_cast<acc_t>(it.roi.grid_h * it.roi.grid_w);
    sum_t* plane = grad + (it.batch * channels + it.c) * height * width;
    for_each_sample(it, p, height, width, [&](const Corners<acc_t>& cr) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const acc_t add = g_sample * cr.weight[j];
        if constexpr (kFixedPoint) {
          fixed_point::fixed_point_add(plane + cr.offset[j], static_cast<double>(add), scale);
        } else {
          gpuAtomicAdd(plane + cr.offset[j], add);
        }
      }
    });
  }
}

} // namespace

at::Tensor bezier_align_forward_cuda(const at::Tensor& input_, const at::Tensor& rois_, const BezierAlignParams& p) {
  const c10::cuda::CUDAGuard guard(input_.device());
  const at::Tensor input = input_.contiguous();
  const at::Tensor rois = rois_.contiguous();
  at::Tensor output = at::empty({rois.size(0), input.size(1), p.pooled_height, p.pooled_width}, input.options());
  const int64_t total = output.numel();
  if (total == 0) {
    return output;
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::bezier_align (CUDA)", [&] {
    forward_kernel<scalar_t><<<blocks_for(total), kThreads, 0, stream>>>(
        input.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(), output.mutable_data_ptr<scalar_t>(), total,
        input.size(0), input.size(1), input.size(2), input.size(3), p);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return output;
}

at::Tensor bezier_align_backward_cuda(const at::Tensor& grad_output_, const at::Tensor& rois_,
                                      const std::vector<int64_t>& input_shape, const BezierAlignParams& p) {
  const c10::cuda::CUDAGuard guard(grad_output_.device());
  const at::ScalarType dtype = grad_output_.scalar_type();
  const bool reduced = dtype == at::kHalf || dtype == at::kBFloat16;
  const int64_t numel = input_shape[0] * input_shape[1] * input_shape[2] * input_shape[3];
  const int64_t total = grad_output_.numel();
  if (total == 0 || numel == 0) {
    return at::zeros(input_shape, grad_output_.options());
  }
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor rois = rois_.contiguous();
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const bool deterministic = at::globalContext().deterministicAlgorithms();
  at::Tensor grad;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mmops::bezier_align backward (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    if (deterministic) {
      // per channel plane, each output's weights sum to at most 1: a pixel receives at most
      // max_abs from each of the K * PH * PW outputs of its channel
      const double adds_bound = static_cast<double>(rois.size(0)) * static_cast<double>(p.pooled_height) *
                                static_cast<double>(p.pooled_width);
      const at::Tensor max_abs = grad_output.abs().amax().to(at::kDouble);
      at::Tensor sums = at::zeros(input_shape, grad_output.options().dtype(at::kLong));
      backward_kernel<scalar_t, int64_t, true><<<blocks_for(total), kThreads, 0, stream>>>(
          grad_output.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(), sums.mutable_data_ptr<int64_t>(),
          total, input_shape[0], input_shape[1], input_shape[2], input_shape[3], p, max_abs.const_data_ptr<double>(),
          adds_bound);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      grad = at::empty(input_shape, grad_output.options());
      fixed_point::fixed_point_to_value_kernel<scalar_t, double><<<blocks_for(numel), kThreads, 0, stream>>>(
          sums.const_data_ptr<int64_t>(), grad.mutable_data_ptr<scalar_t>(), numel, max_abs.const_data_ptr<double>(),
          adds_bound);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
    // float / double atomics straight into the gradient; half / bfloat16 into a float buffer
    grad = at::zeros(input_shape, grad_output.options().dtype(reduced ? at::kFloat : dtype));
    backward_kernel<scalar_t, acc_t, false><<<blocks_for(total), kThreads, 0, stream>>>(
        grad_output.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(), grad.mutable_data_ptr<acc_t>(), total,
        input_shape[0], input_shape[1], input_shape[2], input_shape[3], p, nullptr, 0.0);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return reduced && !deterministic ? grad.to(dtype) : grad;
}

} // namespace kernels
} // namespace mmops

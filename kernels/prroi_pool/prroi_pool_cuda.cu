// CUDA kernels of prroi_pool (prroi_pool_math.h).
//
// - Forward: one thread per output (k, c, ph, pw), pw fastest, so the threads
//   of a warp read neighbouring bins of one plane; a bin is the separable sum
//   sum_i wy(i) sum_j wx(j) D[i][j] over the few pixels its tents touch.
// - Input backward: one thread per output, adding grad / area * wy(i) wx(j)
//   to every pixel of its bin with atomics (float / double into the gradient,
//   half / bfloat16 into a float buffer converted once): order-dependent in
//   the last bits, as mmcv's. With torch.use_deterministic_algorithms(True) the
//   adds are int64 fixed point (common/fixed_point.h): bitwise repeatable.
//   A pixel of plane (n, c) gets at most one add per output of that channel,
//   each of magnitude <= |grad_output| (wy <= min(1, bin_h), wx likewise).
// - Rois backward: one block per roi; its threads sum the roi's outputs
//   (channels and bins, fixed assignment) and reduce in a fixed tree: no
//   atomics, deterministic.
// A roi whose batch index is out of range pools zeros and gets no gradient
// (indices are validated on CUDA only in strict mode).

#include "common/fixed_point_cuda.cuh"
#include "prroi_pool/prroi_pool_kernels.h"
#include "prroi_pool/prroi_pool_math.h"

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

namespace mmops {
namespace kernels {
namespace {

using namespace prroi_pool_math;

constexpr int kThreads = 256;

int64_t blocks_for(int64_t work) {
  return std::min<int64_t>((work + kThreads - 1) / kThreads, int64_t(1) << 20);
}

// The output (k, c, ph, pw) of flat index idx, its roi's bin and kind.
template <typename scalar_t, typename acc_t>
struct OutputBin {
  int64_t k, c, ph, pw, image;
  RoiKind kind;
  PrBin<acc_t> bin;
};

template <typename scalar_t, typename acc_t>
__device__ inline OutputBin<scalar_t, acc_t> output_bin(int64_t idx, const scalar_t* __restrict__ rois, int64_t batch,
                                                        int64_t channels, int64_t pooled_height, int64_t pooled_width,
                                                        acc_t scale) {
  OutputBin<scalar_t, acc_t> o;
  o.pw = idx % pooled_width;
  int64_t t = idx / pooled_width;
  o.ph = t % pooled_height;
  t /= pooled_height;
  o.c = t % channels;
  o.k = t / channels;
  const scalar_t* roi = rois + o.k * 5;
  const acc_t x1 = roi[1], y1 = roi[2], x2 = roi[3], y2 = roi[4];
  o.image = roi_image(static_cast<acc_t>(roi[0]), batch);
  o.kind = roi_kind(o.image, batch, x1, y1, x2, y2, scale);
  o.bin = bin_of(x1, y1, x2, y2, o.ph, o.pw, pooled_height, pooled_width, scale);
  if (o.kind == RoiKind::kPools && !(o.bin.area > acc_t(0))) {
    o.kind = RoiKind::kZeros;
  }
  return o;
}

template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const scalar_t* __restrict__ input, const scalar_t* __restrict__ rois, scalar_t* __restrict__ out,
                   int64_t total, int64_t batch, int64_t channels, int64_t height, int64_t width, int64_t pooled_height,
                   int64_t pooled_width, acc_t scale) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const OutputBin<scalar_t, acc_t> o = output_bin(idx, rois, batch, channels, pooled_height, pooled_width, scale);
    if (o.kind != RoiKind::kPools) {
      out[idx] = static_cast<scalar_t>(non_pooling_value<acc_t>(o.kind));
      continue;
    }
    const scalar_t* plane = input + (o.image * channels + o.c) * height * width;
    out[idx] = static_cast<scalar_t>(bin_integral(plane, height, width, o.bin) / o.bin.area);
  }
}

// sum_t: acc_t (atomics of values) or int64_t (fixed point, kFixedPoint).
template <typename scalar_t, typename acc_t, typename sum_t, bool kFixedPoint>
__global__ void __launch_bounds__(kThreads)
    input_backward_kernel(const scalar_t* __restrict__ grad_output, const scalar_t* __restrict__ rois,
                          sum_t* __restrict__ grad, const float* __restrict__ max_abs, double adds_bound, int64_t total,
                          int64_t batch, int64_t channels, int64_t height, int64_t width, int64_t pooled_height,
                          int64_t pooled_width, acc_t scale) {
  double fixed_scale = 1.0;
  if constexpr (kFixedPoint) {
    fixed_scale = fixed_point::fixed_point_scale(static_cast<double>(*max_abs), adds_bound);
    if (!isfinite(fixed_scale)) {
      return; // the conversion writes NaN everywhere
    }
  }
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const OutputBin<scalar_t, acc_t> o = output_bin(idx, rois, batch, channels, pooled_height, pooled_width, scale);
    const acc_t share = static_cast<acc_t>(grad_output[idx]) / o.bin.area;
    if (o.kind != RoiKind::kPools || share == acc_t(0)) {
      continue;
    }
    sum_t* plane = grad + (o.image * channels + o.c) * height * width;
    const PixelRange rows = pixel_range(o.bin.y1, o.bin.y2, height);
    const PixelRange cols = pixel_range(o.bin.x1, o.bin.x2, width);
    for (int64_t i = rows.first; i <= rows.last; ++i) {
      const acc_t row_share = share * axis_weight(o.bin.y1, o.bin.y2, i);
      for (int64_t j = cols.first; j <= cols.last; ++j) {
        const acc_t add = row_share * axis_weight(o.bin.x1, o.bin.x2, j);
        if constexpr (kFixedPoint) {
          fixed_point::fixed_point_add(plane + i * width + j, static_cast<double>(add), fixed_scale);
        } else {
          gpuAtomicAdd(plane + i * width + j, add);
        }
      }
    }
  }
}

// One block per roi (grid-stride over rois): the four coordinate gradients.
template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kThreads)
    rois_backward_kernel(const scalar_t* __restrict__ grad_output, const scalar_t* __restrict__ input,
                         const scalar_t* __restrict__ rois, scalar_t* __restrict__ grad_rois, int64_t num_rois,
                         int64_t batch, int64_t channels, int64_t height, int64_t width, int64_t pooled_height,
                         int64_t pooled_width, acc_t scale) {
  __shared__ acc_t partial[4][kThreads];
  const int64_t per_roi = channels * pooled_height * pooled_width;
  for (int64_t k = blockIdx.x; k < num_rois; k += gridDim.x) {
    const scalar_t* roi = rois + k * 5;
    const acc_t x1 = roi[1], y1 = roi[2], x2 = roi[3], y2 = roi[4];
    const int64_t image = roi_image(static_cast<acc_t>(roi[0]), batch);
    const RoiKind kind = roi_kind(image, batch, x1, y1, x2, y2, scale);
    acc_t sum[4] = {0, 0, 0, 0};
    if (kind == RoiKind::kPools) {
      for (int64_t r = threadIdx.x; r < per_roi; r += blockDim.x) {
        const acc_t up = static_cast<acc_t>(grad_output[k * per_roi + r]);
        if (up == acc_t(0)) {
          continue;
        }
        const int64_t pw = r % pooled_width, ph = (r / pooled_width) % pooled_height;
        const int64_t c = r / (pooled_width * pooled_height);
        const PrBin<acc_t> bin = bin_of(x1, y1, x2, y2, ph, pw, pooled_height, pooled_width, scale);
        const scalar_t* plane = input + (image * channels + c) * height * width;
        const RoiCoordGrad<acc_t> d =
            roi_coord_grad(plane, height, width, bin, ph, pw, pooled_height, pooled_width, scale);
        sum[0] += up * d.x1;
        sum[1] += up * d.y1;
        sum[2] += up * d.x2;
        sum[3] += up * d.y2;
      }
    }
    for (int i = 0; i < 4; ++i) {
      partial[i][threadIdx.x] = sum[i];
    }
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
      if (threadIdx.x < stride) {
        for (int i = 0; i < 4; ++i) {
          partial[i][threadIdx.x] += partial[i][threadIdx.x + stride];
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      const acc_t none = non_pooling_value<acc_t>(kind); // kNaN: NaN, kZeros: 0
      grad_rois[k * 5] = scalar_t(0);
      for (int i = 0; i < 4; ++i) {
        grad_rois[k * 5 + 1 + i] = static_cast<scalar_t>(kind == RoiKind::kPools ? partial[i][0] : none);
      }
    }
    __syncthreads(); // partial is reused by the block's next roi
  }
}

} // namespace

at::Tensor prroi_pool_forward_cuda(const at::Tensor& input_, const at::Tensor& rois_, const PrRoIPoolParams& params) {
  c10::cuda::CUDAGuard device_guard(input_.device());
  const at::Tensor input = input_.contiguous(), rois = rois_.contiguous();
  at::Tensor output =
      at::empty({rois.size(0), input.size(1), params.pooled_height, params.pooled_width}, input.options());
  const int64_t total = output.numel();
  if (total == 0) {
    return output;
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::prroi_pool (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    forward_kernel<scalar_t, acc_t><<<blocks_for(total), kThreads, 0, stream>>>(
        input.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(), output.mutable_data_ptr<scalar_t>(), total,
        input.size(0), input.size(1), input.size(2), input.size(3), params.pooled_height, params.pooled_width,
        static_cast<acc_t>(params.spatial_scale));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return output;
}

at::Tensor prroi_pool_input_backward_cuda(const at::Tensor& grad_output_, const at::Tensor& rois_,
                                          const std::vector<int64_t>& input_shape, const PrRoIPoolParams& params) {
  c10::cuda::CUDAGuard device_guard(grad_output_.device());
  const auto dtype = grad_output_.scalar_type();
  const bool reduced = dtype == at::kHalf || dtype == at::kBFloat16;
  const bool deterministic = at::globalContext().deterministicAlgorithms();
  const int64_t total = grad_output_.numel();
  const int64_t numel = input_shape[0] * input_shape[1] * input_shape[2] * input_shape[3];
  if (total == 0 || numel == 0) {
    return at::zeros(input_shape, grad_output_.options());
  }
  const at::Tensor grad_output = grad_output_.contiguous(), rois = rois_.contiguous();
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  at::Tensor grad;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mmops::prroi_pool backward (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const acc_t scale = static_cast<acc_t>(params.spatial_scale);
    if (deterministic) {
      const double adds_bound = static_cast<double>(rois.size(0)) * params.pooled_height * params.pooled_width;
      const at::Tensor max_abs = grad_output.abs().amax().to(at::kFloat);
      at::Tensor sums = at::zeros(input_shape, grad_output.options().dtype(at::kLong));
      input_backward_kernel<scalar_t, acc_t, int64_t, true><<<blocks_for(total), kThreads, 0, stream>>>(
          grad_output.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(), sums.mutable_data_ptr<int64_t>(),
          max_abs.const_data_ptr<float>(), adds_bound, total, input_shape[0], input_shape[1], input_shape[2],
          input_shape[3], params.pooled_height, params.pooled_width, scale);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      grad = at::empty(input_shape, grad_output.options());
      fixed_point::fixed_point_to_value_kernel<scalar_t, float><<<blocks_for(numel), kThreads, 0, stream>>>(
          sums.const_data_ptr<int64_t>(), grad.mutable_data_ptr<scalar_t>(), numel, max_abs.const_data_ptr<float>(),
          adds_bound);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
    grad = at::zeros(input_shape, grad_output.options().dtype(reduced ? at::kFloat : dtype));
    input_backward_kernel<scalar_t, acc_t, acc_t, false><<<blocks_for(total), kThreads, 0, stream>>>(
        grad_output.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(), grad.mutable_data_ptr<acc_t>(),
        nullptr, 0.0, total, input_shape[0], input_shape[1], input_shape[2], input_shape[3], params.pooled_height,
        params.pooled_width, scale);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return reduced && !deterministic ? grad.to(dtype) : grad;
}

at::Tensor prroi_pool_rois_backward_cuda(const at::Tensor& grad_output_, const at::Tensor& input_,
                                         const at::Tensor& rois_, const PrRoIPoolParams& params) {
  c10::cuda::CUDAGuard device_guard(input_.device());
  const at::Tensor grad_output = grad_output_.contiguous(), input = input_.contiguous(), rois = rois_.contiguous();
  at::Tensor grad = at::zeros(rois.sizes(), rois.options());
  const int64_t num_rois = rois.size(0);
  if (num_rois == 0) {
    return grad;
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(num_rois, int64_t(1) << 20));
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::prroi_pool rois backward (CUDA)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        rois_backward_kernel<scalar_t, acc_t><<<blocks, kThreads, 0, stream>>>(
            grad_output.const_data_ptr<scalar_t>(), input.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(),
            grad.mutable_data_ptr<scalar_t>(), num_rois, input.size(0), input.size(1), input.size(2), input.size(3),
            params.pooled_height, params.pooled_width, static_cast<acc_t>(params.spatial_scale));
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return grad;
}

} // namespace kernels
} // namespace mmops

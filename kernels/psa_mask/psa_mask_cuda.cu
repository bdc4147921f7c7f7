// CUDA kernels of psa_mask: both directions are gathers (psa_mask_math.h), one
// thread per written element, so the writes are coalesced (consecutive threads,
// consecutive w) and no two threads write one value: no atomics, no zero-fill.
// Indexing is 64-bit: the output has N * (H * W)^2 elements.

#include "psa_mask/psa_mask_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>

namespace mmops {
namespace kernels {
namespace {

using namespace psa_mask_math;

constexpr int kThreads = 256;

// Grid-stride launches: enough blocks to fill the GPU, capped (grid.x < 2^31).
int64_t blocks_for(int64_t items) {
  return std::min<int64_t>((items + kThreads - 1) / kThreads, int64_t(1) << 20);
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const scalar_t* __restrict__ input, scalar_t* __restrict__ output, int64_t total, int64_t height,
                   int64_t width, int64_t mask_h, int64_t mask_w, bool collect) {
  const int64_t plane = height * width;
  const int64_t channels = mask_h * mask_w;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = e % width;
    const int64_t b = (e / width) % height;
    const int64_t na = e / plane; // n * plane + a
    const int64_t n = na / plane, a = na - n * plane;
    int64_t pixel = 0;
    const int64_t k = source_of(a, b, c, height, width, mask_h, mask_w, collect, &pixel);
    output[e] = k < 0 ? scalar_t(0) : input[(n * channels + k) * plane + pixel];
  }
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const scalar_t* __restrict__ grad_output, scalar_t* __restrict__ grad_input, int64_t total,
                    int64_t height, int64_t width, int64_t mask_h, int64_t mask_w, bool collect) {
  const int64_t plane = height * width;
  const int64_t channels = mask_h * mask_w;
  const int64_t half_h = (mask_h - 1) / 2, half_w = (mask_w - 1) / 2;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t w = e % width;
    const int64_t h = (e / width) % height;
    const int64_t nk = e / plane;
    const int64_t n = nk / channels, k = nk - n * channels;
    const int64_t t = target_of(k, h, w, height, width, mask_w, half_h, half_w, collect);
    grad_input[e] = t < 0 ? scalar_t(0) : grad_output[n * plane * plane + t];
  }
}

} // namespace

at::Tensor psa_mask_forward_cuda(const at::Tensor& input, const PsaMaskParams& p) {
  const c10::cuda::CUDAGuard guard(input.device());
  const at::Tensor in = input.contiguous();
  at::Tensor out = at::empty({p.batch, p.height * p.width, p.height, p.width}, in.options());
  const int64_t total = out.numel();
  if (total == 0) {
    return out;
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, in.scalar_type(), "mmops::psa_mask (CUDA)", [&] {
    forward_kernel<scalar_t><<<blocks_for(total), kThreads, 0, stream>>>(
        in.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), total, p.height, p.width, p.mask_h, p.mask_w,
        p.type == PsaType::Collect);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

at::Tensor psa_mask_backward_cuda(const at::Tensor& grad_output, const PsaMaskParams& p) {
  const c10::cuda::CUDAGuard guard(grad_output.device());
  const at::Tensor go = grad_output.contiguous();
  at::Tensor grad = at::empty({p.batch, p.mask_h * p.mask_w, p.height, p.width}, go.options());
  const int64_t total = grad.numel();
  if (total == 0) {
    return grad;
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, go.scalar_type(), "mmops::psa_mask backward (CUDA)", [&] {
    backward_kernel<scalar_t><<<blocks_for(total), kThreads, 0, stream>>>(
        go.const_data_ptr<scalar_t>(), grad.mutable_data_ptr<scalar_t>(), total, p.height, p.width, p.mask_h, p.mask_w,
        p.type == PsaType::Collect);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return grad;
}

} // namespace kernels
} // namespace mmops

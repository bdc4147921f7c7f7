// CUDA kernels of masked_conv2d: the gathers and scatters around the GEMM
// (masked_conv_gemm.cpp). One thread per (row, masked position), the position
// index fastest so that the column / value rows are read and written
// coalesced; 64-bit indices (the buffers can pass 2^31 elements); grid-stride
// loops. Positions come from nonzero over the output grid, so every one is in
// range; input pixels are bounds-checked against the zero padding.

#include "masked_conv/masked_conv_kernels.h"
#include "masked_conv/masked_conv_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <ATen/cuda/Atomic.cuh>

#include <algorithm>
#include <cstdint>

namespace mmops {
namespace kernels {
namespace {

using masked_conv::tap_source;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t(1) << 20;

unsigned int blocks_for(int64_t threads) {
  return static_cast<unsigned int>(std::min<int64_t>((threads + kThreads - 1) / kThreads, kMaxBlocks));
}

struct Strides {
  int64_t n, c, h, w;
};

Strides strides_of(const at::Tensor& t) {
  return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
}

struct Plane {
  int64_t height, width;
};

// cols[(c * taps + tap) * M + m] = input[n, c, y, x] of tap (i, j) at position m.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    im2col_kernel(const scalar_t* __restrict__ input, Strides st, Plane plane, const int64_t* __restrict__ positions,
                  int64_t m_count, int64_t channels, MaskedConvParams p, scalar_t* __restrict__ cols) {
  const int64_t taps = p.kernel_h * p.kernel_w;
  const int64_t total = channels * m_count;
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < total;
       index += int64_t(gridDim.x) * blockDim.x) {
    const int64_t m = index % m_count, c = index / m_count;
    const int64_t n = positions[3 * m], h = positions[3 * m + 1], w = positions[3 * m + 2];
    const scalar_t* src = input + n * st.n + c * st.c;
    scalar_t* dst = cols + c * taps * m_count + m;
    for (int64_t i = 0; i < p.kernel_h; ++i) {
      for (int64_t j = 0; j < p.kernel_w; ++j) {
        int64_t y = 0, x = 0;
        const bool inside =
            tap_source(h, w, i, j, p.stride_h, p.stride_w, p.pad_h, p.pad_w, plane.height, plane.width, y, x);
        *dst = inside ? src[y * st.h + x * st.w] : scalar_t(0);
        dst += m_count;
      }
    }
  }
}

// grad_input[n, c, y, x] += grad_cols[(c * taps + tap) * M + m] (atomic: patches overlap).
template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kThreads)
    col2im_kernel(const scalar_t* __restrict__ grad_cols, const int64_t* __restrict__ positions, int64_t m_count,
                  int64_t channels, Plane plane, MaskedConvParams p, acc_t* __restrict__ grad_input) {
  const int64_t total = channels * m_count;
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < total;
       index += int64_t(gridDim.x) * blockDim.x) {
    const int64_t m = index % m_count, c = index / m_count;
    const int64_t n = positions[3 * m], h = positions[3 * m + 1], w = positions[3 * m + 2];
    acc_t* dst = grad_input + (n * channels + c) * plane.height * plane.width;
    const scalar_t* src = grad_cols + c * p.kernel_h * p.kernel_w * m_count + m;
    for (int64_t i = 0; i < p.kernel_h; ++i) {
      for (int64_t j = 0; j < p.kernel_w; ++j) {
        int64_t y = 0, x = 0;
        if (tap_source(h, w, i, j, p.stride_h, p.stride_w, p.pad_h, p.pad_w, plane.height, plane.width, y, x)) {
          gpuAtomicAdd(dst + y * plane.width + x, static_cast<acc_t>(*src));
        }
        src += m_count;
      }
    }
  }
}

// output[n, o, h, w] = values[o * M + m] (output contiguous).
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    scatter_kernel(const scalar_t* __restrict__ values, const int64_t* __restrict__ positions, int64_t m_count,
                   int64_t channels, Plane plane, scalar_t* __restrict__ output) {
  const int64_t total = channels * m_count;
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < total;
       index += int64_t(gridDim.x) * blockDim.x) {
    const int64_t m = index % m_count, o = index / m_count;
    const int64_t n = positions[3 * m], h = positions[3 * m + 1], w = positions[3 * m + 2];
    output[((n * channels + o) * plane.height + h) * plane.width + w] = values[index];
  }
}

// values[o * M + m] = grad_output[n, o, h, w] (any strides).
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    gather_kernel(const scalar_t* __restrict__ grad_output, Strides st, const int64_t* __restrict__ positions,
                  int64_t m_count, int64_t channels, scalar_t* __restrict__ values) {
  const int64_t total = channels * m_count;
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < total;
       index += int64_t(gridDim.x) * blockDim.x) {
    const int64_t m = index % m_count, o = index / m_count;
    const int64_t n = positions[3 * m], h = positions[3 * m + 1], w = positions[3 * m + 2];
    values[index] = grad_output[n * st.n + o * st.c + h * st.h + w * st.w];
  }
}

void im2col_cuda(const at::Tensor& input, const at::Tensor& positions, at::Tensor& cols, const MaskedConvParams& p) {
  c10::cuda::CUDAGuard device_guard(input.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int64_t m_count = positions.size(0), channels = input.size(1);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::masked_conv2d im2col (CUDA)", [&] {
        im2col_kernel<scalar_t><<<blocks_for(channels * m_count), kThreads, 0, stream>>>(
            input.const_data_ptr<scalar_t>(), strides_of(input), Plane{input.size(2), input.size(3)},
            positions.const_data_ptr<int64_t>(), m_count, channels, p, cols.mutable_data_ptr<scalar_t>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
}

void col2im_cuda(const at::Tensor& grad_cols, const at::Tensor& positions, at::Tensor& grad_input,
                 const MaskedConvParams& p) {
  c10::cuda::CUDAGuard device_guard(grad_cols.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int64_t m_count = positions.size(0), channels = grad_input.size(1);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad_cols.scalar_type(), "mmops::masked_conv2d col2im (CUDA)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        col2im_kernel<scalar_t, acc_t><<<blocks_for(channels * m_count), kThreads, 0, stream>>>(
            grad_cols.const_data_ptr<scalar_t>(), positions.const_data_ptr<int64_t>(), m_count, channels,
            Plane{grad_input.size(2), grad_input.size(3)}, p, grad_input.mutable_data_ptr<acc_t>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
}

void scatter_cuda(const at::Tensor& values, const at::Tensor& positions, at::Tensor& output) {
  c10::cuda::CUDAGuard device_guard(values.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int64_t m_count = positions.size(0), channels = output.size(1);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, values.scalar_type(), "mmops::masked_conv2d scatter (CUDA)", [&] {
        scatter_kernel<scalar_t><<<blocks_for(channels * m_count), kThreads, 0, stream>>>(
            values.const_data_ptr<scalar_t>(), positions.const_data_ptr<int64_t>(), m_count, channels,
            Plane{output.size(2), output.size(3)}, output.mutable_data_ptr<scalar_t>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
}

void gather_cuda(const at::Tensor& grad_output, const at::Tensor& positions, at::Tensor& values) {
  c10::cuda::CUDAGuard device_guard(grad_output.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int64_t m_count = positions.size(0), channels = values.size(0);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad_output.scalar_type(), "mmops::masked_conv2d gather (CUDA)", [&] {
        gather_kernel<scalar_t><<<blocks_for(channels * m_count), kThreads, 0, stream>>>(
            grad_output.const_data_ptr<scalar_t>(), strides_of(grad_output), positions.const_data_ptr<int64_t>(),
            m_count, channels, values.mutable_data_ptr<scalar_t>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
}

// col2im adds into grad_input with atomics: the order of the float additions varies.
constexpr MaskedKernels kCuda{&im2col_cuda, &col2im_cuda, &scatter_cuda, &gather_cuda,
                              "mmops::masked_conv2d backward (CUDA, grad_input)"};

} // namespace

at::Tensor masked_conv2d_forward_cuda(const at::Tensor& input, const at::Tensor& mask, const at::Tensor& weight,
                                      const at::Tensor& bias, const MaskedConvParams& p) {
  c10::cuda::CUDAGuard device_guard(input.device());
  return masked_conv2d_forward_gemm(kCuda, input, mask, weight, bias, p);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> masked_conv2d_backward_cuda(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& mask, const at::Tensor& weight,
    const MaskedConvParams& p, std::array<bool, 3> output_mask) {
  c10::cuda::CUDAGuard device_guard(input.device());
  return masked_conv2d_backward_gemm(kCuda, grad_output, input, mask, weight, p, output_mask);
}

} // namespace kernels
} // namespace mmops

// CUDA kernels of correlation (correlation_math.h), on NCHW inputs (made
// contiguous), with the CPU kernels' summation order and arithmetic (products
// rounded once, mul_rn; float accumulation for float16 / bfloat16): bitwise
// the CPU's results.
//
// Forward: thread (n, ph, chunk of 8 pw, oh, ow), ow fastest. For every kernel
// tap it loads input1[n, c, y, x] once per channel and multiplies it with the
// input2 values of its 8 horizontal displacements (one row of input2): 9 loads
// for 8 products instead of 16. Neighbouring threads take neighbouring ow, so
// with stride 1 every load instruction reads consecutive addresses of one
// channel row (coalesced), and the 8 displacements of a thread hit the same
// cache lines. Writes: consecutive ow, coalesced.
// Backward: a gather per input pixel, no atomics (deterministic): thread (n,
// chunk of 4 channels, y, x), x fastest; for every displacement d it sums
// grad_output over the outputs whose tap reads the pixel (taps in order: the
// same G for its 4 channels) and adds G * input2[p + d] (grad_input1) or
// G * input1[p - d] (grad_input2): loads of consecutive x, coalesced. One
// launch per gradient.
// 64-bit indexing, grid-stride loops (at most 2^20 blocks), CUDAGuard, the
// current stream, a launch check after every launch, no host synchronisation.

#include "common/host_device_math.h"
#include "correlation/correlation_kernels.h"

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

using namespace correlation_math;
using host_device_math::mul_rn;

constexpr int kThreads = 256;
constexpr int kPw = 8;       // horizontal displacements per forward thread
constexpr int kChannels = 4; // channels per backward thread

int64_t blocks_for(int64_t items) {
  return std::min<int64_t>((items + kThreads - 1) / kThreads, int64_t(1) << 20);
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const scalar_t* __restrict__ in1, const scalar_t* __restrict__ in2, scalar_t* __restrict__ out,
                   const CorrelationParams p, int64_t pw_chunks, int64_t items) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t plane = p.height * p.width;
  for (int64_t item = blockIdx.x * int64_t(kThreads) + threadIdx.x; item < items;
       item += int64_t(gridDim.x) * kThreads) {
    const int64_t ow = item % p.out_w;
    int64_t rest = item / p.out_w;
    const int64_t oh = rest % p.out_h;
    rest /= p.out_h;
    const int64_t pw0 = (rest % pw_chunks) * kPw;
    rest /= pw_chunks;
    const int64_t ph = rest % p.patch;
    const int64_t n = rest / p.patch;
    const int64_t dy = displacement(ph, p.max_displacement, p.dilation_patch_h);
    acc_t acc[kPw];
#pragma unroll
    for (int q = 0; q < kPw; ++q) {
      acc[q] = acc_t(0);
    }
    for (int64_t i = 0; i < p.kernel_h; ++i) {
      const int64_t y1 = input_coord(oh, i, p.stride_h, p.pad_h, p.dilation_h);
      if (!inside(y1, p.height) || !inside(y1 + dy, p.height)) {
        continue;
      }
      for (int64_t j = 0; j < p.kernel_w; ++j) {
        const int64_t x1 = input_coord(ow, j, p.stride_w, p.pad_w, p.dilation_w);
        if (!inside(x1, p.width)) {
          continue;
        }
        int64_t x2[kPw];
        bool valid[kPw];
#pragma unroll
        for (int q = 0; q < kPw; ++q) {
          x2[q] = x1 + displacement(pw0 + q, p.max_displacement, p.dilation_patch_w);
          valid[q] = pw0 + q < p.patch && inside(x2[q], p.width);
        }
        const scalar_t* a = in1 + n * p.channels * plane + y1 * p.width + x1;
        const scalar_t* b = in2 + n * p.channels * plane + (y1 + dy) * p.width;
        for (int64_t c = 0; c < p.channels; ++c, a += plane, b += plane) {
          const acc_t va = static_cast<acc_t>(__ldg(a));
#pragma unroll
          for (int q = 0; q < kPw; ++q) {
            if (valid[q]) {
              acc[q] += mul_rn(va, static_cast<acc_t>(__ldg(b + x2[q])));
            }
          }
        }
      }
    }
#pragma unroll
    for (int q = 0; q < kPw; ++q) {
      if (pw0 + q < p.patch) {
        out[(((n * p.patch + ph) * p.patch + pw0 + q) * p.out_h + oh) * p.out_w + ow] = static_cast<scalar_t>(acc[q]);
      }
    }
  }
}

// The sum of grad_output plane g over the outputs whose tap reads input1 pixel (qy, qx).
template <typename scalar_t, typename acc_t>
__device__ inline acc_t gathered_grad(const scalar_t* g, int64_t qy, int64_t qx, const CorrelationParams& p) {
  acc_t sum = acc_t(0);
  for (int64_t i = 0; i < p.kernel_h; ++i) {
    const int64_t oh = output_coord(qy, i, p.stride_h, p.pad_h, p.dilation_h, p.out_h);
    if (oh < 0) {
      continue;
    }
    for (int64_t j = 0; j < p.kernel_w; ++j) {
      const int64_t ow = output_coord(qx, j, p.stride_w, p.pad_w, p.dilation_w, p.out_w);
      if (ow >= 0) {
        sum += static_cast<acc_t>(__ldg(g + oh * p.out_w + ow));
      }
    }
  }
  return sum;
}

// kSecond false: grad_input1 (other = input2, read at p + d); true: grad_input2
// (other = input1, read at p - d, the input1 pixel of the outputs).
template <typename scalar_t, bool kSecond>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const scalar_t* __restrict__ grad_output, const scalar_t* __restrict__ other,
                    scalar_t* __restrict__ grad, const CorrelationParams p, int64_t channel_chunks, int64_t items) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t plane = p.height * p.width;
  const int64_t out_plane = p.out_h * p.out_w;
  for (int64_t item = blockIdx.x * int64_t(kThreads) + threadIdx.x; item < items;
       item += int64_t(gridDim.x) * kThreads) {
    const int64_t x = item % p.width;
    int64_t rest = item / p.width;
    const int64_t y = rest % p.height;
    rest /= p.height;
    const int64_t c0 = (rest % channel_chunks) * kChannels;
    const int64_t n = rest / channel_chunks;
    acc_t acc[kChannels];
#pragma unroll
    for (int v = 0; v < kChannels; ++v) {
      acc[v] = acc_t(0);
    }
    for (int64_t ph = 0; ph < p.patch; ++ph) {
      const int64_t dy = displacement(ph, p.max_displacement, p.dilation_patch_h);
      const int64_t oy = kSecond ? y - dy : y + dy; // the other input's pixel
      if (!inside(oy, p.height)) {
        continue;
      }
      for (int64_t pw = 0; pw < p.patch; ++pw) {
        const int64_t dx = displacement(pw, p.max_displacement, p.dilation_patch_w);
        const int64_t ox = kSecond ? x - dx : x + dx;
        if (!inside(ox, p.width)) {
          continue;
        }
        const scalar_t* g = grad_output + ((n * p.patch + ph) * p.patch + pw) * out_plane;
        // the input1 pixel of the outputs: p itself, or p - d
        const acc_t G =
            kSecond ? gathered_grad<scalar_t, acc_t>(g, oy, ox, p) : gathered_grad<scalar_t, acc_t>(g, y, x, p);
        const scalar_t* o = other + (n * p.channels + c0) * plane + oy * p.width + ox;
#pragma unroll
        for (int v = 0; v < kChannels; ++v) {
          if (c0 + v < p.channels) {
            acc[v] += mul_rn(G, static_cast<acc_t>(__ldg(o + v * plane)));
          }
        }
      }
    }
#pragma unroll
    for (int v = 0; v < kChannels; ++v) {
      if (c0 + v < p.channels) {
        grad[((n * p.channels + c0 + v) * p.height + y) * p.width + x] = static_cast<scalar_t>(acc[v]);
      }
    }
  }
}

} // namespace

at::Tensor correlation_forward_cuda(const at::Tensor& input1_, const at::Tensor& input2_, const CorrelationParams& p) {
  const c10::cuda::CUDAGuard guard(input1_.device());
  at::Tensor output = at::zeros({p.batch, p.patch, p.patch, p.out_h, p.out_w}, input1_.options());
  if (output.numel() == 0 || p.channels == 0) {
    return output;
  }
  const at::Tensor input1 = input1_.contiguous();
  const at::Tensor input2 = input2_.contiguous();
  const int64_t pw_chunks = (p.patch + kPw - 1) / kPw;
  const int64_t items = p.batch * p.patch * pw_chunks * p.out_h * p.out_w;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input1.scalar_type(), "mmops::correlation (CUDA)", [&] {
    forward_kernel<scalar_t><<<blocks_for(items), kThreads, 0, stream>>>(
        input1.const_data_ptr<scalar_t>(), input2.const_data_ptr<scalar_t>(), output.mutable_data_ptr<scalar_t>(), p,
        pw_chunks, items);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return output;
}

std::tuple<at::Tensor, at::Tensor> correlation_backward_cuda(const at::Tensor& grad_output_, const at::Tensor& input1_,
                                                             const at::Tensor& input2_, const CorrelationParams& p) {
  const c10::cuda::CUDAGuard guard(input1_.device());
  if (grad_output_.numel() == 0 || input1_.numel() == 0) {
    return {at::zeros(input1_.sizes(), input1_.options()), at::zeros(input2_.sizes(), input2_.options())};
  }
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor input1 = input1_.contiguous();
  const at::Tensor input2 = input2_.contiguous();
  at::Tensor grad1 = at::empty(input1.sizes(), input1.options());
  at::Tensor grad2 = at::empty(input2.sizes(), input2.options());
  const int64_t channel_chunks = (p.channels + kChannels - 1) / kChannels;
  const int64_t items = p.batch * channel_chunks * p.height * p.width;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input1.scalar_type(), "mmops::correlation backward (CUDA)",
                                  [&] {
                                    backward_kernel<scalar_t, false><<<blocks_for(items), kThreads, 0, stream>>>(
                                        grad_output.const_data_ptr<scalar_t>(), input2.const_data_ptr<scalar_t>(),
                                        grad1.mutable_data_ptr<scalar_t>(), p, channel_chunks, items);
                                    C10_CUDA_KERNEL_LAUNCH_CHECK();
                                    backward_kernel<scalar_t, true><<<blocks_for(items), kThreads, 0, stream>>>(
                                        grad_output.const_data_ptr<scalar_t>(), input1.const_data_ptr<scalar_t>(),
                                        grad2.mutable_data_ptr<scalar_t>(), p, channel_chunks, items);
                                    C10_CUDA_KERNEL_LAUNCH_CHECK();
                                  });
  return {grad1, grad2};
}

} // namespace kernels
} // namespace mmops

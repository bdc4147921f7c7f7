// CUDA kernels of bias_act (bias_act_math.h). Both passes are elementwise and
// memory-bound (floor: the forward reads input and writes output; the backward
// reads grad_output and one of output / input and writes grad_input, once
// each). One kernel per activation (a template argument, as mmcv's), over the
// storage of dense tensors (bias_act_kernels.h). Thread i takes 16-byte packs
// i, i + stride, ... (4 float, 8 half / bfloat16, 2 double: one vector load per
// tensor) when the size is a whole number of packs and every pointer is 16-byte
// aligned, else one value; the bias index of a pack's first value costs one
// division and one remainder, the next values step it (a pack may straddle
// channels: channels_last). 32-bit indices when every pack index fits, 64-bit
// otherwise; no atomics, deterministic; half / bfloat16 compute in float.

#include "bias_act/bias_act_kernels.h"
#include "common/cuda_helpers.cuh"
#include "common/packed_launch_cuda.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace mmops {
namespace kernels {
namespace {

using namespace bias_act_math;
using cuda_helpers::load_readonly;
using cuda_helpers::Pack;

using packed_launch::aligned16;
using packed_launch::blocks_for;
using packed_launch::kThreads;
using packed_launch::pack_size;
using packed_launch::with_pack_and_index;

// The biases of the VEC values from storage index `first` on: bias[(e / step) % channels]
// (0 without a bias).
template <typename scalar_t, typename acc_t, int VEC, typename index_t>
__device__ inline void load_bias(const scalar_t* __restrict__ bias, index_t first, index_t step, index_t channels,
                                 acc_t (&out)[VEC]) {
  if (bias == nullptr) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      out[j] = acc_t(0);
    }
    return;
  }
  const index_t q = first / step;
  index_t c = q % channels;
  index_t r = first - q * step;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    out[j] = static_cast<acc_t>(bias[c]);
    if (++r == step) {
      r = 0;
      c = c + 1 == channels ? 0 : c + 1;
    }
  }
}

template <BiasAct A, typename scalar_t, typename acc_t, int VEC, typename index_t>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ bias, scalar_t* __restrict__ y,
                   index_t packs, index_t step, index_t channels, acc_t alpha, acc_t gain, acc_t clamp) {
  using P = Pack<scalar_t, VEC>;
  const index_t stride = static_cast<index_t>(blockDim.x) * gridDim.x;
  for (index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < packs; i += stride) {
    acc_t b[VEC];
    load_bias<scalar_t, acc_t, VEC, index_t>(bias, i * VEC, step, channels, b);
    const P xv = load_readonly(reinterpret_cast<const P*>(x) + i);
    P out;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      out.v[j] = static_cast<scalar_t>(forward_value<A, acc_t>(static_cast<acc_t>(xv.v[j]), b[j], alpha, gain, clamp));
    }
    reinterpret_cast<P*>(y)[i] = out;
  }
}

// x (and bias) only for swish, y only where the act reads it (nullptr otherwise).
template <BiasAct A, int Order, typename scalar_t, typename acc_t, int VEC, typename index_t>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const scalar_t* __restrict__ grad, const scalar_t* __restrict__ x,
                    const scalar_t* __restrict__ bias, const scalar_t* __restrict__ y,
                    scalar_t* __restrict__ grad_input, index_t packs, index_t step, index_t channels, acc_t alpha,
                    acc_t gain, acc_t clamp, acc_t clamp_y) {
  using P = Pack<scalar_t, VEC>;
  const index_t stride = static_cast<index_t>(blockDim.x) * gridDim.x;
  for (index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < packs; i += stride) {
    acc_t b[VEC];
    load_bias<scalar_t, acc_t, VEC, index_t>(bias, i * VEC, step, channels, b);
    const P gv = load_readonly(reinterpret_cast<const P*>(grad) + i);
    P xv{};
    P yv{};
    if (x != nullptr) {
      xv = load_readonly(reinterpret_cast<const P*>(x) + i);
    }
    if (y != nullptr) {
      yv = load_readonly(reinterpret_cast<const P*>(y) + i);
    }
    P out;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      out.v[j] = static_cast<scalar_t>(
          backward_value<A, Order, acc_t>(static_cast<acc_t>(gv.v[j]), static_cast<acc_t>(xv.v[j]), b[j],
                                          static_cast<acc_t>(yv.v[j]), alpha, gain, clamp, clamp_y));
    }
    reinterpret_cast<P*>(grad_input)[i] = out;
  }
}

// The bias step and C of a call (without a bias: unused, 1 and 1).
struct BiasLayout {
  int64_t step;
  int64_t channels;
};

BiasLayout bias_layout(const at::Tensor& dense, bool has_bias, int64_t dim) {
  if (!has_bias) {
    return {1, 1};
  }
  return {bias_step(dense, dim), std::max<int64_t>(dense.size(dim), 1)};
}

} // namespace

at::Tensor bias_act_forward_cuda(const at::Tensor& input_, const std::optional<at::Tensor>& bias_,
                                 const BiasActParams& p) {
  const c10::cuda::CUDAGuard guard(input_.device());
  const at::MemoryFormat format = input_.suggest_memory_format();
  const at::Tensor input = input_.contiguous(format);
  const at::Tensor bias = bias_.has_value() ? bias_->contiguous() : at::Tensor();
  at::Tensor output = at::empty(input.sizes(), input.options().memory_format(format));
  if (output.numel() == 0) {
    return output;
  }
  const BiasLayout layout = bias_layout(input, bias.defined(), p.dim);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::bias_act (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* x = input.const_data_ptr<scalar_t>();
    const scalar_t* b = bias.defined() ? bias.const_data_ptr<scalar_t>() : nullptr;
    scalar_t* y = output.mutable_data_ptr<scalar_t>();
    const int64_t numel = output.numel();
    const bool vector_ok = numel % pack_size<scalar_t>() == 0 && aligned16(x) && aligned16(y);
    with_act(p.act, [&](auto act) {
      constexpr BiasAct A = decltype(act)::value;
      with_pack_and_index<scalar_t>(vector_ok, numel, [&](auto vec, auto index) {
        constexpr int VEC = decltype(vec)::value;
        using index_t = decltype(index);
        const int64_t packs = numel / VEC;
        forward_kernel<A, scalar_t, acc_t, VEC, index_t><<<blocks_for(packs), kThreads, 0, stream>>>(
            x, b, y, static_cast<index_t>(packs), static_cast<index_t>(layout.step),
            static_cast<index_t>(layout.channels), static_cast<acc_t>(p.alpha), static_cast<acc_t>(p.gain),
            static_cast<acc_t>(p.clamp));
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
    });
  });
  return output;
}

at::Tensor bias_act_backward_cuda(const at::Tensor& grad_output_, const std::optional<at::Tensor>& input_,
                                  const std::optional<at::Tensor>& bias_, const std::optional<at::Tensor>& output_,
                                  const BiasActParams& p) {
  const c10::cuda::CUDAGuard guard(grad_output_.device());
  const at::MemoryFormat format = backward_memory_format(grad_output_, input_, output_);
  const at::Tensor grad_output = grad_output_.contiguous(format);
  // What the act reads (the validation made sure it is there); the rest stays unread.
  const bool read_x = uses_x(p.act);
  const bool read_y = uses_y(p.act) || (p.act == BiasAct::Linear && p.clamp >= 0);
  const at::Tensor input = read_x ? input_->contiguous(format) : at::Tensor();
  const at::Tensor bias = read_x && bias_.has_value() ? bias_->contiguous() : at::Tensor();
  const at::Tensor output = read_y ? output_->contiguous(format) : at::Tensor();
  at::Tensor grad_input = at::empty(grad_output.sizes(), grad_output.options().memory_format(format));
  if (grad_input.numel() == 0) {
    return grad_input;
  }
  const BiasLayout layout = bias_layout(grad_output, bias.defined(), p.dim);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad_output.scalar_type(), "mmops::bias_act backward (CUDA)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* g = grad_output.const_data_ptr<scalar_t>();
        const scalar_t* x = read_x ? input.const_data_ptr<scalar_t>() : nullptr;
        const scalar_t* b = bias.defined() ? bias.const_data_ptr<scalar_t>() : nullptr;
        const scalar_t* y = read_y ? output.const_data_ptr<scalar_t>() : nullptr;
        scalar_t* gi = grad_input.mutable_data_ptr<scalar_t>();
        const int64_t numel = grad_input.numel();
        const bool vector_ok = numel % pack_size<scalar_t>() == 0 && aligned16(g) && aligned16(gi) &&
                               (x == nullptr || aligned16(x)) && (y == nullptr || aligned16(y));
        const acc_t clamp_y = static_cast<acc_t>(static_cast<scalar_t>(p.clamp)); // as the output stores it
        const auto run = [&](auto act, auto order) {
          constexpr BiasAct A = decltype(act)::value;
          constexpr int O = decltype(order)::value;
          with_pack_and_index<scalar_t>(vector_ok, numel, [&](auto vec, auto index) {
            constexpr int VEC = decltype(vec)::value;
            using index_t = decltype(index);
            const int64_t packs = numel / VEC;
            backward_kernel<A, O, scalar_t, acc_t, VEC, index_t><<<blocks_for(packs), kThreads, 0, stream>>>(
                g, x, b, y, gi, static_cast<index_t>(packs), static_cast<index_t>(layout.step),
                static_cast<index_t>(layout.channels), static_cast<acc_t>(p.alpha), static_cast<acc_t>(p.gain),
                static_cast<acc_t>(p.clamp), clamp_y);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
          });
        };
        with_act(p.act, [&](auto act) {
          p.order == 1 ? run(act, std::integral_constant<int, 1>{}) : run(act, std::integral_constant<int, 2>{});
        });
      });
  return grad_input;
}

} // namespace kernels
} // namespace mmops

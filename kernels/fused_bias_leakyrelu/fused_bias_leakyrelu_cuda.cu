// CUDA kernels of fused_bias_leakyrelu (fused_bias_leakyrelu_math.h). Both are
// elementwise and memory-bound (floor: forward reads input and writes output,
// backward reads grad_output and output and writes grad_input, once each).
// Thread i takes 16-byte packs i, i + stride, ... of the contiguous tensors
// (4 float, 8 half / bfloat16, 2 double: one vector load per tensor) when a
// (image, channel) row of `inner` values holds a whole number of packs and the
// pointers are 16-byte aligned, else one value; a pack never straddles two
// channels, so the forward reads one bias per pack (cached). 32-bit indices
// when every pack index fits, 64-bit otherwise; no atomics, deterministic.

#include "common/cuda_helpers.cuh"
#include "common/packed_launch_cuda.cuh"
#include "fused_bias_leakyrelu/fused_bias_leakyrelu_kernels.h"

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

using namespace fused_bias_leakyrelu_math;
using cuda_helpers::load_readonly;
using cuda_helpers::Pack;

using packed_launch::aligned16;
using packed_launch::blocks_for;
using packed_launch::kThreads;
using packed_launch::pack_size;
using packed_launch::with_pack_and_index;

template <typename scalar_t, typename acc_t, int VEC, typename index_t>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const scalar_t* __restrict__ in, const scalar_t* __restrict__ bias, scalar_t* __restrict__ out,
                   index_t packs, index_t row_packs, index_t channels, acc_t slope, acc_t scale) {
  using P = Pack<scalar_t, VEC>;
  const index_t stride = static_cast<index_t>(blockDim.x) * gridDim.x;
  for (index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < packs; i += stride) {
    const acc_t b = static_cast<acc_t>(bias[(i / row_packs) % channels]); // cached: one per pack
    const P x = load_readonly(reinterpret_cast<const P*>(in) + i);
    P y;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      y.v[j] = static_cast<scalar_t>(activate<acc_t>(static_cast<acc_t>(x.v[j]), b, slope, scale));
    }
    reinterpret_cast<P*>(out)[i] = y;
  }
}

template <typename scalar_t, typename acc_t, int VEC, typename index_t>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const scalar_t* __restrict__ grad, const scalar_t* __restrict__ output,
                    scalar_t* __restrict__ grad_input, index_t packs, acc_t slope, acc_t scale) {
  using P = Pack<scalar_t, VEC>;
  const index_t stride = static_cast<index_t>(blockDim.x) * gridDim.x;
  for (index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < packs; i += stride) {
    const P g = load_readonly(reinterpret_cast<const P*>(grad) + i);
    const P o = load_readonly(reinterpret_cast<const P*>(output) + i);
    P r;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      r.v[j] =
          static_cast<scalar_t>(gradient<acc_t>(static_cast<acc_t>(g.v[j]), static_cast<acc_t>(o.v[j]), slope, scale));
    }
    reinterpret_cast<P*>(grad_input)[i] = r;
  }
}

} // namespace

at::Tensor fused_bias_leakyrelu_forward_cuda(const at::Tensor& input_, const at::Tensor& bias_,
                                             const FusedBiasLeakyReLUParams& p) {
  const c10::cuda::CUDAGuard guard(input_.device());
  const at::Tensor input = input_.contiguous();
  const at::Tensor bias = bias_.contiguous();
  at::Tensor output = at::empty(input.sizes(), input.options());
  if (output.numel() == 0) {
    return output;
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::fused_bias_leakyrelu (CUDA)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* in = input.const_data_ptr<scalar_t>();
        scalar_t* out = output.mutable_data_ptr<scalar_t>();
        const bool vector_ok = p.inner % pack_size<scalar_t>() == 0 && aligned16(in) && aligned16(out);
        with_pack_and_index<scalar_t>(vector_ok, input.numel(), [&](auto vec, auto index) {
          constexpr int VEC = decltype(vec)::value;
          using index_t = decltype(index);
          const int64_t packs = input.numel() / VEC;
          forward_kernel<scalar_t, acc_t, VEC, index_t><<<blocks_for(packs), kThreads, 0, stream>>>(
              in, bias.const_data_ptr<scalar_t>(), out, static_cast<index_t>(packs),
              static_cast<index_t>(p.inner / VEC), static_cast<index_t>(p.channels),
              static_cast<acc_t>(p.negative_slope), static_cast<acc_t>(p.scale));
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        });
      });
  return output;
}

at::Tensor fused_bias_leakyrelu_backward_cuda(const at::Tensor& grad_output_, const at::Tensor& output_,
                                              const FusedBiasLeakyReLUParams& p) {
  const c10::cuda::CUDAGuard guard(grad_output_.device());
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor output = output_.contiguous();
  at::Tensor grad_input = at::empty(grad_output.sizes(), grad_output.options());
  if (grad_input.numel() == 0) {
    return grad_input;
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad_output.scalar_type(), "mmops::fused_bias_leakyrelu backward (CUDA)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* g = grad_output.const_data_ptr<scalar_t>();
        const scalar_t* o = output.const_data_ptr<scalar_t>();
        scalar_t* gi = grad_input.mutable_data_ptr<scalar_t>();
        const int64_t numel = grad_input.numel();
        const bool vector_ok = numel % pack_size<scalar_t>() == 0 && aligned16(g) && aligned16(o) && aligned16(gi);
        with_pack_and_index<scalar_t>(vector_ok, numel, [&](auto vec, auto index) {
          constexpr int VEC = decltype(vec)::value;
          using index_t = decltype(index);
          const int64_t packs = numel / VEC;
          backward_kernel<scalar_t, acc_t, VEC, index_t><<<blocks_for(packs), kThreads, 0, stream>>>(
              g, o, gi, static_cast<index_t>(packs), static_cast<acc_t>(p.negative_slope), static_cast<acc_t>(p.scale));
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        });
      });
  return grad_input;
}

} // namespace kernels
} // namespace mmops

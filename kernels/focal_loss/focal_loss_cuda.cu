// CUDA kernels of the focal losses.
//
// Sigmoid: one fused elementwise kernel per direction over the [N, C] logits
// (grid-stride, 32-bit indices when they fit). For "mean"/"sum" the forward
// reduces in the same kernel: each block sums its elements (float, double for
// double), writes one partial sum, and the last block to finish (an atomic
// ticket after a memory fence) adds the partial sums in block order and writes
// the 0-d result: one launch (plus a 4-byte memset of the ticket), and the
// result is the same run to run (fixed grid for a device, fixed order).
// Softmax: one warp per row computes the row's max and sum of exponentials
// with shuffles, then the loss (forward, reduced as above) or the gradient of
// every class (backward, coalesced along the row).
// Half and bfloat16 load and store 16-bit values and compute in float.
// A row whose class id is out of range contributes 0 and gets a zero gradient
// (strict mode checks the ids on the host before the launch instead).

#include "focal_loss/focal_loss_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

namespace mmops {
namespace kernels {
namespace {

using namespace focal_loss_math;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <typename T>
__device__ inline T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, o);
  }
  return v;
}

// Maximum that propagates NaN (as torch.amax).
template <typename T>
__device__ inline T nan_max(T a, T b) {
  return (b > a || b != b) ? b : a;
}

template <typename T>
__device__ inline T warp_max(T v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, o));
  }
  return v;
}

// Sum over the block, in a fixed order; the result is valid in thread 0.
template <typename T>
__device__ inline T block_sum(T v) {
  __shared__ T warp_sums[kWarps];
  v = warp_sum(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) {
    warp_sums[warp] = v;
  }
  __syncthreads();
  T total = T(0);
  if (threadIdx.x == 0) {
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      total += warp_sums[w];
    }
  }
  __syncthreads();
  return total;
}

// Each block contributes `v` (per thread); the last block to arrive writes
// out[0] = scale * sum over blocks, adding the block sums in block order.
template <typename scalar_t, typename acc_t>
__device__ void finish_reduction(acc_t v, acc_t* partials, unsigned int* ticket, scalar_t* out, acc_t scale) {
  __shared__ bool last;
  const acc_t block = block_sum(v);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = block;
    __threadfence();
    last = atomicAdd(ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) {
    return;
  }
  __threadfence();
  acc_t s = acc_t(0);
  for (unsigned int b = threadIdx.x; b < gridDim.x; b += blockDim.x) {
    s += __ldcg(partials + b); // L2: written by other blocks
  }
  const acc_t total = block_sum(s);
  if (threadIdx.x == 0) {
    out[0] = static_cast<scalar_t>(total * scale);
  }
}

template <typename scalar_t, typename acc_t>
__device__ inline acc_t sigmoid_row_weight(int64_t t, int64_t classes, const scalar_t* weight) {
  if (!valid_sigmoid_target(t, classes)) {
    return acc_t(0);
  }
  return (weight != nullptr && t < classes) ? static_cast<acc_t>(weight[t]) : acc_t(1);
}

template <typename scalar_t, typename index_t, bool kReduce>
__global__ void __launch_bounds__(kThreads)
    sigmoid_forward_kernel(const scalar_t* __restrict__ x, const int64_t* __restrict__ target,
                           const scalar_t* __restrict__ weight, scalar_t* __restrict__ out,
                           at::opmath_type<scalar_t>* partials, unsigned int* ticket, index_t total, index_t classes,
                           at::opmath_type<scalar_t> gamma, at::opmath_type<scalar_t> alpha,
                           at::opmath_type<scalar_t> scale) {
  using acc_t = at::opmath_type<scalar_t>;
  acc_t sum = acc_t(0);
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < total; i += index_t(gridDim.x) * blockDim.x) {
    const index_t n = i / classes, c = i - n * classes;
    const int64_t t = target[n];
    const acc_t w = sigmoid_row_weight<scalar_t, acc_t>(t, classes, weight);
    const acc_t l = w == acc_t(0) ? acc_t(0) : sigmoid_focal_loss(static_cast<acc_t>(x[i]), t == c, gamma, alpha) * w;
    if constexpr (kReduce) {
      sum += l;
    } else {
      out[i] = static_cast<scalar_t>(l);
    }
  }
  if constexpr (kReduce) {
    finish_reduction<scalar_t, acc_t>(sum, partials, ticket, out, scale);
  }
}

template <typename scalar_t, typename index_t>
__global__ void __launch_bounds__(kThreads)
    sigmoid_backward_kernel(const scalar_t* __restrict__ grad_output, bool elementwise, const scalar_t* __restrict__ x,
                            const int64_t* __restrict__ target, const scalar_t* __restrict__ weight,
                            scalar_t* __restrict__ grad, index_t total, index_t classes,
                            at::opmath_type<scalar_t> gamma, at::opmath_type<scalar_t> alpha,
                            at::opmath_type<scalar_t> scale) {
  using acc_t = at::opmath_type<scalar_t>;
  const acc_t go_all = elementwise ? acc_t(0) : static_cast<acc_t>(grad_output[0]) * scale;
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < total; i += index_t(gridDim.x) * blockDim.x) {
    const index_t n = i / classes, c = i - n * classes;
    const int64_t t = target[n];
    const acc_t w = sigmoid_row_weight<scalar_t, acc_t>(t, classes, weight);
    const acc_t go = elementwise ? static_cast<acc_t>(grad_output[i]) * scale : go_all;
    const acc_t d =
        w == acc_t(0) ? acc_t(0) : sigmoid_focal_grad(static_cast<acc_t>(x[i]), t == c, gamma, alpha) * (w * go);
    grad[i] = static_cast<scalar_t>(d);
  }
}

// Row statistics of one row, computed by a warp: max and log(sum(exp(x - max))), in every lane.
template <typename scalar_t, typename acc_t>
__device__ inline void warp_row_stats(const scalar_t* xr, int64_t classes, int lane, acc_t& mx, acc_t& log_sum) {
  acc_t m = -static_cast<acc_t>(INFINITY);
  for (int64_t c = lane; c < classes; c += 32) {
    m = nan_max(m, static_cast<acc_t>(xr[c]));
  }
  m = warp_max(m);
  acc_t s = acc_t(0);
  for (int64_t c = lane; c < classes; c += 32) {
    s += exp(static_cast<acc_t>(xr[c]) - m);
  }
  s = warp_sum(s);
  mx = m;
  log_sum = log(s);
}

template <typename scalar_t, bool kReduce>
__global__ void __launch_bounds__(kThreads)
    softmax_forward_kernel(const scalar_t* __restrict__ x, const int64_t* __restrict__ target,
                           const scalar_t* __restrict__ weight, scalar_t* __restrict__ out,
                           at::opmath_type<scalar_t>* partials, unsigned int* ticket, int64_t rows, int64_t classes,
                           at::opmath_type<scalar_t> gamma, at::opmath_type<scalar_t> alpha,
                           at::opmath_type<scalar_t> scale) {
  using acc_t = at::opmath_type<scalar_t>;
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * kWarps;
  acc_t sum = acc_t(0);
  for (int64_t n = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; n < rows; n += warps) {
    const int64_t t = target[n];
    acc_t l = acc_t(0);
    if (valid_softmax_target(t, classes)) { // uniform across the warp
      const scalar_t* xr = x + n * classes;
      acc_t mx, log_sum;
      warp_row_stats(xr, classes, lane, mx, log_sum);
      const acc_t log_p = static_cast<acc_t>(xr[t]) - mx - log_sum;
      l = softmax_focal_loss(log_p, gamma, alpha) * (weight != nullptr ? static_cast<acc_t>(weight[t]) : acc_t(1));
    }
    if (lane == 0) {
      if constexpr (kReduce) {
        sum += l;
      } else {
        out[n] = static_cast<scalar_t>(l);
      }
    }
  }
  if constexpr (kReduce) {
    finish_reduction<scalar_t, acc_t>(sum, partials, ticket, out, scale);
  }
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    softmax_backward_kernel(const scalar_t* __restrict__ grad_output, bool elementwise, const scalar_t* __restrict__ x,
                            const int64_t* __restrict__ target, const scalar_t* __restrict__ weight,
                            scalar_t* __restrict__ grad, int64_t rows, int64_t classes, at::opmath_type<scalar_t> gamma,
                            at::opmath_type<scalar_t> alpha, at::opmath_type<scalar_t> scale) {
  using acc_t = at::opmath_type<scalar_t>;
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * kWarps;
  for (int64_t n = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; n < rows; n += warps) {
    const int64_t t = target[n];
    scalar_t* gr = grad + n * classes;
    if (!valid_softmax_target(t, classes)) {
      for (int64_t c = lane; c < classes; c += 32) {
        gr[c] = scalar_t(0);
      }
      continue;
    }
    const scalar_t* xr = x + n * classes;
    acc_t mx, log_sum;
    warp_row_stats(xr, classes, lane, mx, log_sum);
    const acc_t log_p = static_cast<acc_t>(xr[t]) - mx - log_sum;
    const acc_t go = static_cast<acc_t>(grad_output[elementwise ? n : 0]) * scale;
    const acc_t factor =
        softmax_focal_factor(log_p, gamma, alpha) * (weight != nullptr ? static_cast<acc_t>(weight[t]) : acc_t(1)) * go;
    const acc_t shift = mx + log_sum;
    for (int64_t c = lane; c < classes; c += 32) {
      const acc_t pc = exp(static_cast<acc_t>(xr[c]) - shift);
      gr[c] = static_cast<scalar_t>(factor * ((c == t ? acc_t(1) : acc_t(0)) - pc));
    }
  }
}

int64_t elementwise_blocks(int64_t total) {
  return std::clamp<int64_t>((total + kThreads - 1) / kThreads, 1, int64_t(1) << 20);
}

// A fixed grid for reductions (the sum's grouping, hence its rounding, depends
// only on the device): a few blocks per SM.
int64_t reduction_blocks(int64_t work_items) {
  int sms = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, c10::cuda::current_device()));
  const int64_t cap = 4 * int64_t(std::max(sms, 1));
  return std::clamp<int64_t>((work_items + kThreads - 1) / kThreads, 1, cap);
}

// Partial sums of `blocks` blocks plus a zeroed ticket, in one allocation.
struct ReductionScratch {
  at::Tensor buffer;
  void* partials;
  unsigned int* ticket;
};

ReductionScratch make_scratch(const at::Tensor& like, int64_t blocks, size_t acc_size, cudaStream_t stream) {
  const int64_t bytes = blocks * static_cast<int64_t>(acc_size) + 16;
  ReductionScratch s;
  s.buffer = at::empty({bytes}, like.options().dtype(at::kByte));
  uint8_t* base = s.buffer.mutable_data_ptr<uint8_t>();
  s.partials = base;
  s.ticket = reinterpret_cast<unsigned int*>(base + blocks * static_cast<int64_t>(acc_size));
  C10_CUDA_CHECK(cudaMemsetAsync(s.ticket, 0, sizeof(unsigned int), stream));
  return s;
}

// A forward kernel launch, reducing or not: calls
// launch(std::bool_constant<reduce>{}, blocks, partials, ticket) with the
// fixed reduction grid and fresh scratch, or with an elementwise grid and no
// scratch, for `work_items` threads' worth of work.
template <typename acc_t, typename Launch>
void launch_forward(bool reduce, int64_t work_items, const at::Tensor& like, cudaStream_t stream, Launch&& launch) {
  if (reduce) {
    const int64_t blocks = reduction_blocks(work_items);
    ReductionScratch s = make_scratch(like, blocks, sizeof(acc_t), stream);
    launch(std::true_type{}, blocks, static_cast<acc_t*>(s.partials), s.ticket);
  } else {
    launch(std::false_type{}, elementwise_blocks(work_items), static_cast<acc_t*>(nullptr),
           static_cast<unsigned int*>(nullptr));
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Calls launch(index_t{}) with 32-bit element indices when no index (plus one
// grid stride, at most 2^28) can overflow, else with 64-bit ones.
template <typename Launch>
void with_index_type(int64_t total, Launch&& launch) {
  if (total + (int64_t(1) << 28) <= std::numeric_limits<int32_t>::max()) {
    launch(int32_t{});
  } else {
    launch(int64_t{});
  }
}

#define MMOPS_FOCAL_DISPATCH(dtype, name, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, name, __VA_ARGS__)

// The launches of each loss and pass, on validated contiguous inputs into an
// allocated, non-empty output.

void sigmoid_forward(const FocalInputs& in, const FocalLossParams& p, at::Tensor& out, cudaStream_t stream) {
  const int64_t rows = in.input.size(0), classes = in.input.size(1), total = in.input.numel();
  const bool reduce = p.reduction != Reduction::None;
  MMOPS_FOCAL_DISPATCH(in.input.scalar_type(), "mmops::sigmoid_focal_loss (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const acc_t gamma = static_cast<acc_t>(p.gamma), alpha = static_cast<acc_t>(p.alpha);
    const acc_t scale = static_cast<acc_t>(reduction_scale(p, rows));
    with_index_type(total, [&](auto index_tag) {
      using index_t = decltype(index_tag);
      launch_forward<acc_t>(
          reduce, total, in.input, stream, [&](auto reduce_tag, int64_t blocks, acc_t* partials, unsigned int* ticket) {
            sigmoid_forward_kernel<scalar_t, index_t, decltype(reduce_tag)::value><<<blocks, kThreads, 0, stream>>>(
                in.input.const_data_ptr<scalar_t>(), in.target.const_data_ptr<int64_t>(), in.weight_data<scalar_t>(),
                out.mutable_data_ptr<scalar_t>(), partials, ticket, total, classes, gamma, alpha, scale);
          });
    });
  });
}

void softmax_forward(const FocalInputs& in, const FocalLossParams& p, at::Tensor& out, cudaStream_t stream) {
  const int64_t rows = in.input.size(0), classes = in.input.size(1);
  const bool reduce = p.reduction != Reduction::None;
  MMOPS_FOCAL_DISPATCH(in.input.scalar_type(), "mmops::softmax_focal_loss (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const acc_t gamma = static_cast<acc_t>(p.gamma), alpha = static_cast<acc_t>(p.alpha);
    const acc_t scale = static_cast<acc_t>(reduction_scale(p, rows));
    launch_forward<acc_t>(
        reduce, rows * 32, in.input, stream,
        [&](auto reduce_tag, int64_t blocks, acc_t* partials, unsigned int* ticket) {
          softmax_forward_kernel<scalar_t, decltype(reduce_tag)::value><<<blocks, kThreads, 0, stream>>>(
              in.input.const_data_ptr<scalar_t>(), in.target.const_data_ptr<int64_t>(), in.weight_data<scalar_t>(),
              out.mutable_data_ptr<scalar_t>(), partials, ticket, rows, classes, gamma, alpha, scale);
        });
  });
}

void sigmoid_backward(const FocalInputs& in, const FocalLossParams& p, at::Tensor& grad, cudaStream_t stream) {
  const int64_t rows = in.input.size(0), classes = in.input.size(1), total = in.input.numel();
  MMOPS_FOCAL_DISPATCH(in.input.scalar_type(), "mmops::sigmoid_focal_loss backward (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    with_index_type(total, [&](auto index_tag) {
      using index_t = decltype(index_tag);
      sigmoid_backward_kernel<scalar_t, index_t><<<elementwise_blocks(total), kThreads, 0, stream>>>(
          in.grad_output.const_data_ptr<scalar_t>(), p.reduction == Reduction::None,
          in.input.const_data_ptr<scalar_t>(), in.target.const_data_ptr<int64_t>(), in.weight_data<scalar_t>(),
          grad.mutable_data_ptr<scalar_t>(), total, classes, static_cast<acc_t>(p.gamma), static_cast<acc_t>(p.alpha),
          static_cast<acc_t>(reduction_scale(p, rows)));
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
}

void softmax_backward(const FocalInputs& in, const FocalLossParams& p, at::Tensor& grad, cudaStream_t stream) {
  const int64_t rows = in.input.size(0), classes = in.input.size(1);
  MMOPS_FOCAL_DISPATCH(in.input.scalar_type(), "mmops::softmax_focal_loss backward (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    softmax_backward_kernel<scalar_t><<<elementwise_blocks(rows * 32), kThreads, 0, stream>>>(
        in.grad_output.const_data_ptr<scalar_t>(), p.reduction == Reduction::None, in.input.const_data_ptr<scalar_t>(),
        in.target.const_data_ptr<int64_t>(), in.weight_data<scalar_t>(), grad.mutable_data_ptr<scalar_t>(), rows,
        classes, static_cast<acc_t>(p.gamma), static_cast<acc_t>(p.alpha),
        static_cast<acc_t>(reduction_scale(p, rows)));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

} // namespace

at::Tensor focal_loss_forward_cuda(const at::Tensor& input, const at::Tensor& target, const at::Tensor& weight,
                                   const FocalLossParams& p) {
  c10::cuda::CUDAGuard device_guard(input.device());
  const FocalInputs in(input, target, weight);
  at::Tensor out = at::empty(loss_shape(in.input, p), in.input.options());
  if (out.numel() > 0) {
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    p.kind == FocalKind::Sigmoid ? sigmoid_forward(in, p, out, stream) : softmax_forward(in, p, out, stream);
  }
  return out;
}

at::Tensor focal_loss_backward_cuda(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& target,
                                    const at::Tensor& weight, const FocalLossParams& p) {
  c10::cuda::CUDAGuard device_guard(input.device());
  const FocalInputs in(input, target, weight, grad_output);
  at::Tensor grad = at::empty(in.input.sizes(), in.input.options());
  if (grad.numel() > 0) {
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    p.kind == FocalKind::Sigmoid ? sigmoid_backward(in, p, grad, stream) : softmax_backward(in, p, grad, stream);
  }
  return grad;
}

} // namespace kernels
} // namespace mmops

// CUDA kernels of diff_iou_rotated_2d / _3d: one thread per pair. A block's
// rows (D scalars per box, not vector-aligned) are staged through shared
// memory so that the global loads and the gradient stores are coalesced; the
// geometry runs in registers (float for half/bfloat16). 64-bit indices.

#include "diff_iou_rotated/diff_iou_rotated_kernels.h"
#include "diff_iou_rotated/diff_iou_rotated_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace mmops {
namespace kernels {
namespace {

constexpr int kThreads = 128;

// Copies the block's `count` pairs (D scalars each) of src into tile, coalesced.
template <int D, typename scalar_t>
__device__ inline void stage_rows(const scalar_t* __restrict__ src, int64_t first, int count, scalar_t* tile) {
  const scalar_t* base = src + first * D;
  for (int k = threadIdx.x; k < count * D; k += kThreads) {
    tile[k] = base[k];
  }
}

template <int D, typename scalar_t>
__device__ inline void unstage_rows(const scalar_t* tile, int64_t first, int count, scalar_t* __restrict__ dst) {
  scalar_t* base = dst + first * D;
  for (int k = threadIdx.x; k < count * D; k += kThreads) {
    base[k] = tile[k];
  }
}

__device__ inline int block_count(int64_t first, int64_t pairs) {
  return pairs - first < kThreads ? static_cast<int>(pairs - first) : kThreads;
}

template <int D, typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const scalar_t* __restrict__ b1, const scalar_t* __restrict__ b2, int64_t pairs,
                   scalar_t* __restrict__ out) {
  using acc_t = at::opmath_type<scalar_t>;
  __shared__ scalar_t s1[kThreads * D];
  __shared__ scalar_t s2[kThreads * D];
  const int64_t first = int64_t(blockIdx.x) * kThreads;
  const int count = block_count(first, pairs);
  stage_rows<D>(b1, first, count, s1);
  stage_rows<D>(b2, first, count, s2);
  __syncthreads();
  if (threadIdx.x < count) {
    const int r = threadIdx.x * D;
    out[first + threadIdx.x] = static_cast<scalar_t>(
        diff_iou_rotated_math::pair_iou<D, scalar_t, acc_t>(s1 + r, s2 + r, acc_t(0), nullptr, nullptr));
  }
}

template <int D, typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const scalar_t* __restrict__ grad, const scalar_t* __restrict__ b1, const scalar_t* __restrict__ b2,
                    int64_t pairs, scalar_t* __restrict__ g1, scalar_t* __restrict__ g2) {
  using acc_t = at::opmath_type<scalar_t>;
  __shared__ scalar_t s1[kThreads * D];
  __shared__ scalar_t s2[kThreads * D];
  const int64_t first = int64_t(blockIdx.x) * kThreads;
  const int count = block_count(first, pairs);
  stage_rows<D>(b1, first, count, s1);
  stage_rows<D>(b2, first, count, s2);
  __syncthreads();
  acc_t ga[D], gb[D];
  if (threadIdx.x < count) {
    const int r = threadIdx.x * D;
    diff_iou_rotated_math::pair_iou<D, scalar_t, acc_t>(s1 + r, s2 + r, static_cast<acc_t>(grad[first + threadIdx.x]),
                                                        ga, gb);
  }
  __syncthreads(); // every thread has read its rows: the tiles now take the gradients
  if (threadIdx.x < count) {
    const int r = threadIdx.x * D;
#pragma unroll
    for (int k = 0; k < D; ++k) {
      s1[r + k] = static_cast<scalar_t>(ga[k]);
      s2[r + k] = static_cast<scalar_t>(gb[k]);
    }
  }
  __syncthreads();
  unstage_rows<D>(s1, first, count, g1);
  unstage_rows<D>(s2, first, count, g2);
}

int64_t blocks_for(int64_t pairs) {
  return (pairs + kThreads - 1) / kThreads;
}

} // namespace

at::Tensor diff_iou_rotated_forward_cuda(const at::Tensor& box1, const at::Tensor& box2,
                                         const DiffIouRotatedParams& p) {
  const c10::cuda::CUDAGuard guard(box1.device());
  const at::Tensor a = box1.contiguous();
  const at::Tensor b = box2.contiguous();
  at::Tensor out = at::empty({box1.size(0), box1.size(1)}, box1.options());
  const int64_t pairs = out.numel();
  if (pairs == 0) {
    return out;
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "mmops::diff_iou_rotated (CUDA)", [&] {
    const scalar_t* pa = a.const_data_ptr<scalar_t>();
    const scalar_t* pb = b.const_data_ptr<scalar_t>();
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    if (p.columns == 7) {
      forward_kernel<7, scalar_t><<<blocks_for(pairs), kThreads, 0, stream>>>(pa, pb, pairs, o);
    } else {
      forward_kernel<5, scalar_t><<<blocks_for(pairs), kThreads, 0, stream>>>(pa, pb, pairs, o);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor> diff_iou_rotated_backward_cuda(const at::Tensor& grad_output, const at::Tensor& box1,
                                                                  const at::Tensor& box2,
                                                                  const DiffIouRotatedParams& p) {
  const c10::cuda::CUDAGuard guard(box1.device());
  const at::Tensor g = grad_output.contiguous();
  const at::Tensor a = box1.contiguous();
  const at::Tensor b = box2.contiguous();
  at::Tensor g1 = at::empty(box1.sizes(), box1.options());
  at::Tensor g2 = at::empty(box2.sizes(), box2.options());
  const int64_t pairs = g.numel();
  if (pairs == 0) {
    return {g1, g2};
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, a.scalar_type(), "mmops::diff_iou_rotated backward (CUDA)", [&] {
        const scalar_t* pg = g.const_data_ptr<scalar_t>();
        const scalar_t* pa = a.const_data_ptr<scalar_t>();
        const scalar_t* pb = b.const_data_ptr<scalar_t>();
        scalar_t* o1 = g1.mutable_data_ptr<scalar_t>();
        scalar_t* o2 = g2.mutable_data_ptr<scalar_t>();
        if (p.columns == 7) {
          backward_kernel<7, scalar_t><<<blocks_for(pairs), kThreads, 0, stream>>>(pg, pa, pb, pairs, o1, o2);
        } else {
          backward_kernel<5, scalar_t><<<blocks_for(pairs), kThreads, 0, stream>>>(pg, pa, pb, pairs, o1, o2);
        }
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return {g1, g2};
}

} // namespace kernels
} // namespace mmops

// CUDA kernels of three_interpolate.
//  - forward: one thread per output (b, c, n), n fastest (coalesced writes).
//  - grad_features, deterministic without atomics: the (b, n, j) entries are
//    grouped by source b * M + indices[b, n, j] (group_by_index: a stable sort,
//    so every group lists its entries in (n, j) order, as the CPU sums them),
//    grad_output is transposed to rows [B, N, C], and segment_rows::launch_sums
//    adds each source's terms in that order.
//  - grad_weight: one thread per target (b, n) sums over the channels.
// half/bfloat16 accumulate in float. 64-bit offsets; no host synchronisation.

#include "common/index_segments.h"
#include "common/segment_rows_cuda.cuh"
#include "three_interpolate/three_interpolate_kernels.h"
#include "three_interpolate/three_interpolate_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <limits>

namespace mmops {
namespace kernels {
namespace {

using three_interpolate_math::valid_index;

constexpr int kThreads = 256;

unsigned blocks_for(int64_t work) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  TORCH_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "mmops::three_interpolate: ", work,
              " outputs are more than one CUDA launch covers");
  return static_cast<unsigned>(blocks);
}

template <typename scalar_t, typename acc_t>
__global__ void forward_kernel(const scalar_t* __restrict__ features, const int32_t* __restrict__ indices,
                               const scalar_t* __restrict__ weight, int64_t c, int64_t m, int64_t n, int64_t total,
                               scalar_t* __restrict__ out) {
  const int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= total) {
    return;
  }
  const int64_t row = i / n, t = i % n, e = ((row / c) * n + t) * 3;
  out[i] = static_cast<scalar_t>(
      three_interpolate_math::interpolate3<acc_t>(features + row * m, m, indices + e, weight + e));
}

// grad_features[b, c, s] = sum over the group of source b * M + s (entries
// e = (b * N + n) * 3 + j in (n, j) order) of grad_output[b, c, n] * weight[e]:
// the term of entry e, whose row in grad_output transposed to [B, N, C] is e / 3.
template <typename scalar_t>
struct WeightedSource {
  const scalar_t* weight;
  __device__ int64_t row(int64_t e) const { return e / 3; }
  template <typename acc_t>
  __device__ acc_t term(acc_t value, int64_t e) const {
    return host_device_math::mul_rn(value, static_cast<acc_t>(weight[e]));
  }
};

template <typename scalar_t, typename acc_t>
__global__ void grad_weight_kernel(const scalar_t* __restrict__ grad_output, const scalar_t* __restrict__ features,
                                   const int32_t* __restrict__ indices, int64_t c, int64_t m, int64_t n, int64_t total,
                                   scalar_t* __restrict__ grad_weight) {
  const int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; // target b * n + t
  if (i >= total) {
    return;
  }
  const int64_t b = i / n, t = i % n;
  int32_t k[3];
  acc_t acc[3];
#pragma unroll
  for (int j = 0; j < 3; ++j) {
    k[j] = indices[i * 3 + j];
    acc[j] = acc_t(0);
  }
  for (int64_t ch = 0; ch < c; ++ch) {
    const int64_t row = b * c + ch;
    const acc_t go = static_cast<acc_t>(grad_output[row * n + t]);
#pragma unroll
    for (int j = 0; j < 3; ++j) {
      if (valid_index(k[j], m)) {
        acc[j] += host_device_math::mul_rn(go, static_cast<acc_t>(features[row * m + k[j]]));
      }
    }
  }
#pragma unroll
  for (int j = 0; j < 3; ++j) {
    grad_weight[i * 3 + j] = static_cast<scalar_t>(acc[j]);
  }
}

} // namespace

at::Tensor three_interpolate_forward_cuda(const at::Tensor& features, const at::Tensor& indices,
                                          const at::Tensor& weight) {
  const c10::cuda::CUDAGuard guard(features.device());
  const at::Tensor f = features.contiguous();
  const at::Tensor idx = indices.contiguous();
  const at::Tensor w = weight.contiguous();
  const int64_t b = f.size(0), c = f.size(1), m = f.size(2), n = idx.size(1);
  at::Tensor out = at::empty({b, c, n}, f.options());
  if (out.numel() == 0) {
    return out;
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, f.scalar_type(), "mmops::three_interpolate (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    forward_kernel<scalar_t, acc_t><<<blocks_for(out.numel()), kThreads, 0, stream>>>(
        f.const_data_ptr<scalar_t>(), idx.const_data_ptr<int32_t>(), w.const_data_ptr<scalar_t>(), c, m, n, out.numel(),
        out.mutable_data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor> three_interpolate_backward_cuda(const at::Tensor& grad_output,
                                                                   const at::Tensor& features,
                                                                   const at::Tensor& indices,
                                                                   const at::Tensor& weight) {
  const c10::cuda::CUDAGuard guard(features.device());
  const at::Tensor g = grad_output.contiguous();
  const at::Tensor f = features.contiguous();
  const at::Tensor idx = indices.contiguous();
  const at::Tensor w = weight.contiguous();
  const int64_t b = f.size(0), c = f.size(1), m = f.size(2), n = idx.size(1);
  // no targets (n == 0): nothing reaches the features
  at::Tensor grad_features = n == 0 ? at::zeros({b, c, m}, f.options()) : at::empty({b, c, m}, f.options());
  at::Tensor grad_weight = at::empty({b, n, 3}, w.options());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, f.scalar_type(), "mmops::three_interpolate (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    if (grad_features.numel() > 0 && n > 0) {
      // entries e = (b, n, j) grouped by source b * M + indices[e], in (n, j) order
      const IndexSegments segments = group_by_index(idx.view({b, n * 3}), m);
      const at::Tensor rows = g.transpose(1, 2).contiguous(); // [B, N, C]
      segment_rows::launch_sums<scalar_t, acc_t>(
          "mmops::three_interpolate backward: ", rows.const_data_ptr<scalar_t>(), segments, b, c, m,
          WeightedSource<scalar_t>{w.const_data_ptr<scalar_t>()}, grad_features.mutable_data_ptr<scalar_t>(), stream);
    }
    if (grad_weight.numel() > 0) {
      grad_weight_kernel<scalar_t, acc_t><<<blocks_for(b * n), kThreads, 0, stream>>>(
          g.const_data_ptr<scalar_t>(), f.const_data_ptr<scalar_t>(), idx.const_data_ptr<int32_t>(), c, m, n, b * n,
          grad_weight.mutable_data_ptr<scalar_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
  return {grad_features, grad_weight};
}

} // namespace kernels
} // namespace mmops

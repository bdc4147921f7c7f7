// CUDA kernels of active_rotated_filter.
//
// One small kernel builds the int32 tables of active_rotated_filter_math.h
// from indices (an index outside [1, E] is guarded: it writes nowhere; the
// largest l wins a target, with atomicMax: the same tables on every run).
// Then a gather, one thread per written value: the forward reads its source
// weight (the weights, E * in_planes * out_planes values, stay in L2) and
// writes coalesced rows of the output; the backward sums the R output values
// each weight went to. Deterministic: every value has one writer.

#include "active_rotated_filter/active_rotated_filter_kernels.h"
#include "active_rotated_filter/active_rotated_filter_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <utility>

namespace mmops {
namespace kernels {
namespace {

using namespace active_rotated_filter_math;

constexpr int kThreads = 256;
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxGridX = (int64_t(1) << 31) - 1;

template <typename index_t>
__global__ void __launch_bounds__(kThreads)
    tables_kernel(const index_t* __restrict__ indices, int32_t* __restrict__ target, int32_t* __restrict__ source,
                  int64_t entries, int64_t rotations) {
  const int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (e >= entries * rotations) {
    return;
  }
  const int64_t l = e / rotations, k = e - l * rotations;
  const int32_t m = target_of(indices[e], entries);
  target[e] = m;
  if (m >= 0) {
    atomicMax(source + k * entries + m, static_cast<int32_t>(l));
  }
}

// Rows are blockIdx.y (grid-stride), columns blockIdx.x * blockDim.x + threadIdx.x.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const scalar_t* __restrict__ input, const int32_t* __restrict__ source,
                   scalar_t* __restrict__ output, int64_t rows, int64_t columns, int64_t rotations, int64_t in_planes,
                   int64_t entries) {
  const int64_t col = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (col >= columns) {
    return;
  }
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    output[row * columns + col] = gathered(input, source, row, col, rotations, in_planes, entries);
  }
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const scalar_t* __restrict__ grad_output, const int32_t* __restrict__ target,
                    const int32_t* __restrict__ source, scalar_t* __restrict__ grad, int64_t rows, int64_t columns,
                    int64_t rotations, int64_t in_planes, int64_t entries) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t col = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (col >= columns) {
    return;
  }
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    grad[row * columns + col] = static_cast<scalar_t>(
        gathered_grad<acc_t>(grad_output, target, source, row, col, rotations, in_planes, entries));
  }
}

// (target, source) tables of indices, on the current stream.
std::pair<at::Tensor, at::Tensor> tables_of(const at::Tensor& indices, const ActiveRotatedFilterParams& p) {
  const at::Tensor idx = indices.contiguous();
  const auto options = idx.options().dtype(at::kInt);
  at::Tensor target = at::empty({p.entries * p.rotations}, options);
  at::Tensor source = at::full({p.rotations * p.entries}, -1, options);
  const int64_t n = p.entries * p.rotations;
  if (n == 0) {
    return {target, source};
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_INTEGRAL_TYPES(idx.scalar_type(), "active_rotated_filter_tables_cuda", [&] {
    tables_kernel<scalar_t><<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        idx.const_data_ptr<scalar_t>(), target.mutable_data_ptr<int32_t>(), source.mutable_data_ptr<int32_t>(),
        p.entries, p.rotations);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {target, source};
}

dim3 grid_of(int64_t rows, int64_t columns) {
  const int64_t blocks = (columns + kThreads - 1) / kThreads;
  TORCH_CHECK(blocks <= kMaxGridX, "mmops::active_rotated_filter: too many columns for one launch");
  return dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(std::min(rows, kMaxGridY)));
}

} // namespace

at::Tensor active_rotated_filter_forward_cuda(const at::Tensor& input, const at::Tensor& indices,
                                              const ActiveRotatedFilterParams& p) {
  const c10::cuda::CUDAGuard guard(input.device());
  const at::Tensor in = input.contiguous();
  at::Tensor out =
      at::empty({p.out_planes * p.rotations, p.in_planes * p.orientations, p.kernel_h, p.kernel_w}, in.options());
  if (out.numel() == 0) {
    return out;
  }
  const at::Tensor source = tables_of(indices, p).second;
  const int64_t rows = out.size(0), columns = p.in_planes * p.entries;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, in.scalar_type(), "active_rotated_filter_forward_cuda", [&] {
        forward_kernel<scalar_t><<<grid_of(rows, columns), kThreads, 0, stream>>>(
            in.const_data_ptr<scalar_t>(), source.const_data_ptr<int32_t>(), out.mutable_data_ptr<scalar_t>(), rows,
            columns, p.rotations, p.in_planes, p.entries);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return out;
}

at::Tensor active_rotated_filter_backward_cuda(const at::Tensor& grad_output, const at::Tensor& indices,
                                               const ActiveRotatedFilterParams& p) {
  const c10::cuda::CUDAGuard guard(grad_output.device());
  const at::Tensor go = grad_output.contiguous();
  at::Tensor grad = at::empty({p.out_planes, p.in_planes, p.orientations, p.kernel_h, p.kernel_w}, go.options());
  if (grad.numel() == 0) {
    return grad;
  }
  const std::pair<at::Tensor, at::Tensor> tables = tables_of(indices, p);
  const at::Tensor& target = tables.first;
  const at::Tensor& source = tables.second;
  const int64_t rows = p.out_planes, columns = p.in_planes * p.entries;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, go.scalar_type(), "active_rotated_filter_backward_cuda", [&] {
        backward_kernel<scalar_t><<<grid_of(rows, columns), kThreads, 0, stream>>>(
            go.const_data_ptr<scalar_t>(), target.const_data_ptr<int32_t>(), source.const_data_ptr<int32_t>(),
            grad.mutable_data_ptr<scalar_t>(), rows, columns, p.rotations, p.in_planes, p.entries);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return grad;
}

} // namespace kernels
} // namespace mmops

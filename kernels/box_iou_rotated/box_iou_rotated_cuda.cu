// CUDA kernels of box_iou_rotated and box_iou_quadri.
//
// [N, M]: a block covers kRows rows of boxes1 and kThreads columns of boxes2.
// The kRows boxes of boxes1 are loaded once into shared memory (with their
// bounding circles); each thread keeps its boxes2 box in registers and walks
// the shared rows, so a row's writes are coalesced along M. Pairs whose
// bounding circles are apart (most pairs of a large scene) cost a few flops;
// the others run polygon.h's clip (4 edges x up to 8 vertices).
// Aligned: one thread per pair.

#include "box_iou_rotated/box_iou_rotated_kernels.h"
#include "common/rotated_iou.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>

namespace mmops {
namespace kernels {
namespace {

using rotated_iou::Shape;

constexpr int kThreads = 256;
constexpr int kRows = 32;
constexpr int64_t kMaxGridY = 65535;

template <typename scalar_t, typename T, int D>
__global__ void __launch_bounds__(kThreads)
    rotated_overlaps_kernel(const scalar_t* __restrict__ b1, const scalar_t* __restrict__ b2, int64_t n, int64_t m,
                            bool iof, bool clockwise, scalar_t* __restrict__ out) {
  __shared__ Shape<T, D> s_rows[kRows];
  const int64_t j = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  Shape<T, D> mine{};
  if (j < m) {
    mine = rotated_iou::load_shape<scalar_t, T, D>(b2 + j * D, clockwise);
  }
  for (int64_t i0 = blockIdx.y * int64_t(kRows); i0 < n; i0 += int64_t(gridDim.y) * kRows) {
    const int rows = static_cast<int>(n - i0 < kRows ? n - i0 : kRows);
    __syncthreads(); // the previous rows are no longer read
    if (static_cast<int>(threadIdx.x) < rows) {
      s_rows[threadIdx.x] = rotated_iou::load_shape<scalar_t, T, D>(b1 + (i0 + threadIdx.x) * D, clockwise);
    }
    __syncthreads();
    if (j < m) {
      for (int r = 0; r < rows; ++r) {
        out[(i0 + r) * m + j] = static_cast<scalar_t>(rotated_iou::overlap(s_rows[r], mine, iof));
      }
    }
  }
}

template <typename scalar_t, typename T, int D>
__global__ void __launch_bounds__(kThreads)
    aligned_overlaps_kernel(const scalar_t* __restrict__ b1, const scalar_t* __restrict__ b2, int64_t n, bool iof,
                            bool clockwise, scalar_t* __restrict__ out) {
  const int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  if (i < n) {
    const auto a = rotated_iou::load_shape<scalar_t, T, D>(b1 + i * D, clockwise);
    const auto b = rotated_iou::load_shape<scalar_t, T, D>(b2 + i * D, clockwise);
    out[i] = static_cast<scalar_t>(rotated_iou::overlap(a, b, iof));
  }
}

template <typename scalar_t, int D>
void launch(const at::Tensor& b1, const at::Tensor& b2, const BoxIouRotatedParams& p, at::Tensor& out,
            cudaStream_t stream) {
  using T = at::opmath_type<scalar_t>;
  const int64_t n = b1.size(0);
  const int64_t m = b2.size(0);
  const scalar_t* p1 = b1.const_data_ptr<scalar_t>();
  const scalar_t* p2 = b2.const_data_ptr<scalar_t>();
  scalar_t* o = out.mutable_data_ptr<scalar_t>();
  if (p.aligned) {
    const int64_t blocks = (n + kThreads - 1) / kThreads;
    aligned_overlaps_kernel<scalar_t, T, D><<<blocks, kThreads, 0, stream>>>(p1, p2, n, p.iof, p.clockwise, o);
  } else {
    const int64_t gx = (m + kThreads - 1) / kThreads;
    const int64_t gy = std::min<int64_t>((n + kRows - 1) / kRows, kMaxGridY);
    const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
    rotated_overlaps_kernel<scalar_t, T, D><<<grid, kThreads, 0, stream>>>(p1, p2, n, m, p.iof, p.clockwise, o);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

} // namespace

at::Tensor box_iou_rotated_cuda(const at::Tensor& boxes1, const at::Tensor& boxes2, const BoxIouRotatedParams& p) {
  const c10::cuda::CUDAGuard guard(boxes1.device());
  at::Tensor out = at::empty_symint(rotated_overlaps_shape(boxes1, boxes2, p.aligned), boxes1.options());
  if (out.numel() == 0) {
    return out;
  }
  const at::Tensor b1 = boxes1.contiguous();
  const at::Tensor b2 = boxes2.contiguous();
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, b1.scalar_type(), "mmops::box_iou_rotated (CUDA)", [&] {
    if (p.quadri) {
      launch<scalar_t, 8>(b1, b2, p, out, stream);
    } else {
      launch<scalar_t, 5>(b1, b2, p, out, stream);
    }
  });
  return out;
}

} // namespace kernels
} // namespace mmops

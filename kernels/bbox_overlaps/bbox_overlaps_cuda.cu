// CUDA kernels of bbox_overlaps.
//   all pairs: a block computes a 32 x 32 tile of the [M, N] output; both tiles
//     of boxes (and their areas) are staged in shared memory once, and each
//     warp writes whole 32-column rows (coalesced);
//   aligned: one thread per pair.
// half/bfloat16 compute in float. 64-bit output offsets.

#include "bbox_overlaps/bbox_overlaps_kernels.h"
#include "bbox_overlaps/bbox_overlaps_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <limits>

namespace mmops {
namespace kernels {
namespace {

using bbox_overlaps_math::Box;
using bbox_overlaps_math::load_box;
using bbox_overlaps_math::store_box;

constexpr int kTileSide = 32;
constexpr int kRowsPerThread = 4; // blockDim = (32, 8)

template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kTileSide* kTileSide / kRowsPerThread)
    all_pairs_kernel(const scalar_t* __restrict__ b1, const scalar_t* __restrict__ b2, int64_t m, int64_t n,
                     acc_t offset, bool iof, scalar_t* __restrict__ out) {
  __shared__ Box<acc_t> s_rows[kTileSide];
  __shared__ Box<acc_t> s_cols[kTileSide];
  __shared__ acc_t s_row_area[kTileSide];
  __shared__ acc_t s_col_area[kTileSide];
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  // One flat grid over the tiles (any M and N up to 2^31 - 1 tiles in all).
  const int64_t col_tiles = (n + kTileSide - 1) / kTileSide;
  const int64_t row0 = (int64_t(blockIdx.x) / col_tiles) * kTileSide;
  const int64_t col0 = (int64_t(blockIdx.x) % col_tiles) * kTileSide;
  if (ty == 0 && col0 + tx < n) {
    s_cols[tx] = load_box<scalar_t, acc_t>(b2, col0 + tx);
    s_col_area[tx] = box_iou::box_area(s_cols[tx], offset);
  }
  if (ty == 1 && row0 + tx < m) {
    s_rows[tx] = load_box<scalar_t, acc_t>(b1, row0 + tx);
    s_row_area[tx] = box_iou::box_area(s_rows[tx], offset);
  }
  __syncthreads();
  const int64_t col = col0 + tx;
  if (col >= n) {
    return;
  }
#pragma unroll
  for (int q = 0; q < kRowsPerThread; ++q) {
    const int r = ty + q * (kTileSide / kRowsPerThread);
    const int64_t row = row0 + r;
    if (row < m) {
      out[row * n + col] =
          static_cast<scalar_t>(box_iou::overlap(s_rows[r], s_cols[tx], s_row_area[r], s_col_area[tx], offset, iof));
    }
  }
}

template <typename scalar_t, typename acc_t>
__global__ void aligned_kernel(const scalar_t* __restrict__ b1, const scalar_t* __restrict__ b2, int64_t m,
                               acc_t offset, bool iof, scalar_t* __restrict__ out) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= m) {
    return;
  }
  out[i] = bbox_overlaps_math::aligned_overlap(b1, b2, i, offset, iof);
}

template <typename scalar_t, typename acc_t>
__global__ void aligned_backward_kernel(const scalar_t* __restrict__ grad, const scalar_t* __restrict__ b1,
                                        const scalar_t* __restrict__ b2, int64_t m, acc_t offset, bool iof,
                                        scalar_t* __restrict__ g1, scalar_t* __restrict__ g2) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= m) {
    return;
  }
  bbox_overlaps_math::aligned_overlap_backward(grad, b1, b2, i, offset, iof, g1, g2);
}

// One warp per box of `mine` (bboxes1 when kFirst, else bboxes2): lanes stride
// over the other set, then a fixed shuffle tree sums the four coordinates.
template <typename scalar_t, typename acc_t, bool kFirst>
__global__ void all_pairs_backward_kernel(const scalar_t* __restrict__ grad, const scalar_t* __restrict__ b1,
                                          const scalar_t* __restrict__ b2, int64_t m, int64_t n, acc_t offset, bool iof,
                                          scalar_t* __restrict__ out) {
  const int64_t box = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  const int64_t count = kFirst ? m : n;
  if (box >= count) {
    return; // whole warps leave together
  }
  Box<acc_t> acc = bbox_overlaps_math::pair_gradient_sum<kFirst>(grad, b1, b2, m, n, box, lane, 32, offset, iof);
  for (int s = 16; s > 0; s >>= 1) {
    acc.x1 += __shfl_xor_sync(0xffffffffu, acc.x1, s);
    acc.y1 += __shfl_xor_sync(0xffffffffu, acc.y1, s);
    acc.x2 += __shfl_xor_sync(0xffffffffu, acc.x2, s);
    acc.y2 += __shfl_xor_sync(0xffffffffu, acc.y2, s);
  }
  if (lane == 0) {
    store_box(out, box, acc);
  }
}

} // namespace

at::Tensor bbox_overlaps_cuda(const at::Tensor& bboxes1, const at::Tensor& bboxes2, const BBoxOverlapsParams& p) {
  const c10::cuda::CUDAGuard guard(bboxes1.device());
  const ForwardArgs a = forward_args(bboxes1, bboxes2, p);
  if (a.out.numel() == 0) {
    return a.out;
  }
  const int64_t m = a.bboxes1.size(0);
  const int64_t n = a.bboxes2.size(0);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, a.bboxes1.scalar_type(), "mmops::bbox_overlaps (CUDA)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const acc_t offset = static_cast<acc_t>(p.offset);
        if (p.aligned) {
          const int threads = 256;
          const int64_t blocks = (m + threads - 1) / threads;
          aligned_kernel<scalar_t, acc_t><<<blocks, threads, 0, stream>>>(
              a.bboxes1.const_data_ptr<scalar_t>(), a.bboxes2.const_data_ptr<scalar_t>(), m, offset, p.iof,
              a.out.mutable_data_ptr<scalar_t>());
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        } else {
          const int64_t tiles = ((m + kTileSide - 1) / kTileSide) * ((n + kTileSide - 1) / kTileSide);
          TORCH_CHECK(tiles <= std::numeric_limits<int32_t>::max(), "mmops::bbox_overlaps: ", m, " x ", n,
                      " pairs are more than one CUDA launch covers");
          const dim3 grid(static_cast<unsigned>(tiles));
          const dim3 block(kTileSide, kTileSide / kRowsPerThread);
          all_pairs_kernel<scalar_t, acc_t>
              <<<grid, block, 0, stream>>>(a.bboxes1.const_data_ptr<scalar_t>(), a.bboxes2.const_data_ptr<scalar_t>(),
                                           m, n, offset, p.iof, a.out.mutable_data_ptr<scalar_t>());
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
      });
  return a.out;
}

std::tuple<at::Tensor, at::Tensor> bbox_overlaps_backward_cuda(const at::Tensor& grad_output, const at::Tensor& bboxes1,
                                                               const at::Tensor& bboxes2, const BBoxOverlapsParams& p) {
  const c10::cuda::CUDAGuard guard(bboxes1.device());
  const BackwardArgs a = backward_args(grad_output, bboxes1, bboxes2);
  const int64_t m = a.bboxes1.size(0);
  const int64_t n = a.bboxes2.size(0);
  if (m == 0 && n == 0) {
    return {a.grad1, a.grad2};
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, a.bboxes1.scalar_type(), "mmops::bbox_overlaps backward (CUDA)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const acc_t offset = static_cast<acc_t>(p.offset);
        const int threads = 256;
        if (p.aligned) {
          aligned_backward_kernel<scalar_t, acc_t><<<(m + threads - 1) / threads, threads, 0, stream>>>(
              a.grad_output.const_data_ptr<scalar_t>(), a.bboxes1.const_data_ptr<scalar_t>(),
              a.bboxes2.const_data_ptr<scalar_t>(), m, offset, p.iof, a.grad1.mutable_data_ptr<scalar_t>(),
              a.grad2.mutable_data_ptr<scalar_t>());
          C10_CUDA_KERNEL_LAUNCH_CHECK();
          return;
        }
        const int warps = threads / 32;
        if (m > 0) {
          all_pairs_backward_kernel<scalar_t, acc_t, true><<<(m + warps - 1) / warps, threads, 0, stream>>>(
              a.grad_output.const_data_ptr<scalar_t>(), a.bboxes1.const_data_ptr<scalar_t>(),
              a.bboxes2.const_data_ptr<scalar_t>(), m, n, offset, p.iof, a.grad1.mutable_data_ptr<scalar_t>());
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
        if (n > 0) {
          all_pairs_backward_kernel<scalar_t, acc_t, false><<<(n + warps - 1) / warps, threads, 0, stream>>>(
              a.grad_output.const_data_ptr<scalar_t>(), a.bboxes1.const_data_ptr<scalar_t>(),
              a.bboxes2.const_data_ptr<scalar_t>(), m, n, offset, p.iof, a.grad2.mutable_data_ptr<scalar_t>());
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
      });
  return {a.grad1, a.grad2};
}

} // namespace kernels
} // namespace mmops

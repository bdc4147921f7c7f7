// CUDA kernels of bbox_overlaps.
//   all pairs: a block computes a 32 x 32 tile of the [M, N] output; both tiles
//     of boxes (and their areas) are staged in shared memory once, and each
//     warp writes whole 32-column rows (coalesced);
//   aligned: one thread per pair.
// half/bfloat16 compute in float. 64-bit output offsets.

#include "bbox_overlaps/bbox_overlaps_kernels.h"
#include "common/box_iou.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <limits>

namespace mmops {
namespace kernels {
namespace {

using box_iou::Box;
using box_iou::load_box;
using box_iou::store_box;

constexpr int kTileSide = 32;
constexpr int kRowsPerThread = 4;  // blockDim = (32, 8)

template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kTileSide * kTileSide / kRowsPerThread) all_pairs_kernel(
    const scalar_t* __restrict__ b1, const scalar_t* __restrict__ b2, int64_t m, int64_t n, acc_t offset,
    bool iof, scalar_t* __restrict__ out) {
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
      out[row * n + col] = static_cast<scalar_t>(
          box_iou::overlap(s_rows[r], s_cols[tx], s_row_area[r], s_col_area[tx], offset, iof));
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
  const Box<acc_t> a = load_box<scalar_t, acc_t>(b1, i);
  const Box<acc_t> b = load_box<scalar_t, acc_t>(b2, i);
  out[i] = static_cast<scalar_t>(
      box_iou::overlap(a, b, box_iou::box_area(a, offset), box_iou::box_area(b, offset), offset, iof));
}

template <typename scalar_t, typename acc_t>
__global__ void aligned_backward_kernel(const scalar_t* __restrict__ grad, const scalar_t* __restrict__ b1,
                                        const scalar_t* __restrict__ b2, int64_t m, acc_t offset, bool iof,
                                        scalar_t* __restrict__ g1, scalar_t* __restrict__ g2) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= m) {
    return;
  }
  Box<acc_t> ga{0, 0, 0, 0};
  Box<acc_t> gb{0, 0, 0, 0};
  box_iou::overlap_backward(load_box<scalar_t, acc_t>(b1, i), load_box<scalar_t, acc_t>(b2, i), offset, iof,
                            static_cast<acc_t>(grad[i]), ga, gb);
  store_box(g1, i, ga);
  store_box(g2, i, gb);
}

// One warp per box of `mine` (bboxes1 when kFirst, else bboxes2): lanes stride
// over the other set, then a fixed shuffle tree sums the four coordinates.
template <typename scalar_t, typename acc_t, bool kFirst>
__global__ void all_pairs_backward_kernel(const scalar_t* __restrict__ grad, const scalar_t* __restrict__ b1,
                                          const scalar_t* __restrict__ b2, int64_t m, int64_t n, acc_t offset,
                                          bool iof, scalar_t* __restrict__ out) {
  const int64_t box = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  const int64_t count = kFirst ? m : n;
  if (box >= count) {
    return;  // whole warps leave together
  }
  const int64_t others = kFirst ? n : m;
  const Box<acc_t> fixed = load_box<scalar_t, acc_t>(kFirst ? b1 : b2, box);
  Box<acc_t> acc{0, 0, 0, 0};
  for (int64_t o = lane; o < others; o += 32) {
    Box<acc_t> unused{0, 0, 0, 0};
    const Box<acc_t> other = load_box<scalar_t, acc_t>(kFirst ? b2 : b1, o);
    if (kFirst) {
      box_iou::overlap_backward(fixed, other, offset, iof, static_cast<acc_t>(grad[box * n + o]), acc, unused);
    } else {
      box_iou::overlap_backward(other, fixed, offset, iof, static_cast<acc_t>(grad[o * n + box]), unused, acc);
    }
  }
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

at::Tensor bbox_overlaps_cuda(const at::Tensor& bboxes1_in, const at::Tensor& bboxes2_in,
                              const BBoxOverlapsParams& p) {
  const c10::cuda::CUDAGuard guard(bboxes1_in.device());
  const int64_t m = bboxes1_in.size(0);
  const int64_t n = bboxes2_in.size(0);
  at::Tensor out = p.aligned ? at::empty({m}, bboxes1_in.options()) : at::empty({m, n}, bboxes1_in.options());
  if (out.numel() == 0) {
    return out;
  }
  const at::Tensor bboxes1 = bboxes1_in.contiguous();
  const at::Tensor bboxes2 = bboxes2_in.contiguous();
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, bboxes1.scalar_type(), "mmops::bbox_overlaps (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const acc_t offset = static_cast<acc_t>(p.offset);
    if (p.aligned) {
      const int threads = 256;
      const int64_t blocks = (m + threads - 1) / threads;
      aligned_kernel<scalar_t, acc_t><<<blocks, threads, 0, stream>>>(
          bboxes1.const_data_ptr<scalar_t>(), bboxes2.const_data_ptr<scalar_t>(), m, offset, p.iof,
          out.mutable_data_ptr<scalar_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    } else {
      const int64_t tiles = ((m + kTileSide - 1) / kTileSide) * ((n + kTileSide - 1) / kTileSide);
      TORCH_CHECK(tiles <= std::numeric_limits<int32_t>::max(), "mmops::bbox_overlaps: ", m, " x ", n,
                  " pairs are more than one CUDA launch covers");
      const dim3 grid(static_cast<unsigned>(tiles));
      const dim3 block(kTileSide, kTileSide / kRowsPerThread);
      all_pairs_kernel<scalar_t, acc_t><<<grid, block, 0, stream>>>(
          bboxes1.const_data_ptr<scalar_t>(), bboxes2.const_data_ptr<scalar_t>(), m, n, offset, p.iof,
          out.mutable_data_ptr<scalar_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor> bbox_overlaps_backward_cuda(const at::Tensor& grad_output,
                                                               const at::Tensor& bboxes1_in,
                                                               const at::Tensor& bboxes2_in,
                                                               const BBoxOverlapsParams& p) {
  const c10::cuda::CUDAGuard guard(bboxes1_in.device());
  const int64_t m = bboxes1_in.size(0);
  const int64_t n = bboxes2_in.size(0);
  at::Tensor grad1 = at::empty({m, 4}, bboxes1_in.options());
  at::Tensor grad2 = at::empty({n, 4}, bboxes2_in.options());
  if (m == 0 && n == 0) {
    return {grad1, grad2};
  }
  const at::Tensor bboxes1 = bboxes1_in.contiguous();
  const at::Tensor bboxes2 = bboxes2_in.contiguous();
  const at::Tensor grad = grad_output.contiguous();
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, bboxes1.scalar_type(),
                                  "mmops::bbox_overlaps backward (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const acc_t offset = static_cast<acc_t>(p.offset);
    const int threads = 256;
    if (p.aligned) {
      aligned_backward_kernel<scalar_t, acc_t><<<(m + threads - 1) / threads, threads, 0, stream>>>(
          grad.const_data_ptr<scalar_t>(), bboxes1.const_data_ptr<scalar_t>(), bboxes2.const_data_ptr<scalar_t>(),
          m, offset, p.iof, grad1.mutable_data_ptr<scalar_t>(), grad2.mutable_data_ptr<scalar_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
    const int warps = threads / 32;
    if (m > 0) {
      all_pairs_backward_kernel<scalar_t, acc_t, true><<<(m + warps - 1) / warps, threads, 0, stream>>>(
          grad.const_data_ptr<scalar_t>(), bboxes1.const_data_ptr<scalar_t>(), bboxes2.const_data_ptr<scalar_t>(),
          m, n, offset, p.iof, grad1.mutable_data_ptr<scalar_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    if (n > 0) {
      all_pairs_backward_kernel<scalar_t, acc_t, false><<<(n + warps - 1) / warps, threads, 0, stream>>>(
          grad.const_data_ptr<scalar_t>(), bboxes1.const_data_ptr<scalar_t>(), bboxes2.const_data_ptr<scalar_t>(),
          m, n, offset, p.iof, grad2.mutable_data_ptr<scalar_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
  return {grad1, grad2};
}

} // namespace kernels
} // namespace mmops

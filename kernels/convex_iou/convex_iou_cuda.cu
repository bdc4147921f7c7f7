// CUDA kernels of convex_iou and convex_giou.
//   convex_iou: a block computes a 32 x 32 tile of the [N, K] output; the 32
//     hulls (one thread each) and 32 quadrilaterals of the tile are built once
//     in shared memory and reused by the 32 pairs each takes part in; each
//     warp writes 32 consecutive columns of a row (coalesced);
//   convex_giou: one thread per row (hull, intersection, enclosing hull and
//     the closed-form gradient in registers).
// half/bfloat16 compute in float. 64-bit offsets.

#include "convex_iou/convex_iou_kernels.h"
#include "convex_iou/convex_iou_load.h"
#include "convex_iou/convex_iou_math.h"

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

using convex_iou_math::kPoints;
using convex_iou_math::load_points;
using polygon::Point;

constexpr int kTile = 32;
constexpr int kRowsPerThread = 4; // blockDim = (32, 8)

template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kTile* kTile / kRowsPerThread)
    convex_iou_kernel(const scalar_t* __restrict__ sets, const scalar_t* __restrict__ polys, int64_t n, int64_t k,
                      int64_t col_tiles, scalar_t* __restrict__ out) {
  using Hull = convex_iou_math::Hull<acc_t>;
  using Quad = convex_iou_math::Quad<acc_t>;
  // Raw storage: the structs' default member initialisers are not allowed on
  // __shared__ variables.
  __shared__ alignas(Hull) unsigned char hull_bytes[kTile * sizeof(Hull)];
  __shared__ alignas(Quad) unsigned char quad_bytes[kTile * sizeof(Quad)];
  Hull* s_hulls = reinterpret_cast<Hull*>(hull_bytes);
  Quad* s_quads = reinterpret_cast<Quad*>(quad_bytes);
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int64_t row0 = (int64_t(blockIdx.x) / col_tiles) * kTile;
  const int64_t col0 = (int64_t(blockIdx.x) % col_tiles) * kTile;
  if (ty == 0 && col0 + tx < k) {
    Point<acc_t> c[4];
    load_points<4>(polys, col0 + tx, c);
    s_quads[tx] = convex_iou_math::make_quad(c);
  }
  if (ty == 1 && row0 + tx < n) {
    Point<acc_t> pts[kPoints];
    load_points<kPoints>(sets, row0 + tx, pts);
    s_hulls[tx] = convex_iou_math::make_hull(pts);
  }
  __syncthreads();
  const int64_t col = col0 + tx;
  if (col >= k) {
    return;
  }
  const Quad quad = s_quads[tx];
#pragma unroll 1
  for (int r = ty; r < kTile; r += kTile / kRowsPerThread) {
    const int64_t row = row0 + r;
    if (row >= n) {
      return;
    }
    out[row * k + col] = static_cast<scalar_t>(convex_iou_math::hull_quad_iou(s_hulls[r], quad));
  }
}

template <typename scalar_t, typename acc_t>
__global__ void convex_giou_kernel(const scalar_t* __restrict__ sets, const scalar_t* __restrict__ polys, int64_t n,
                                   scalar_t* __restrict__ giou, scalar_t* __restrict__ grad) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) {
    return;
  }
  Point<acc_t> pts[kPoints];
  Point<acc_t> c[4];
  load_points<kPoints>(sets, i, pts);
  load_points<4>(polys, i, c);
  acc_t g[2 * kPoints];
  giou[i] = static_cast<scalar_t>(convex_iou_math::convex_giou(pts, c, g));
#pragma unroll
  for (int t = 0; t < 2 * kPoints; ++t) {
    grad[i * 2 * kPoints + t] = static_cast<scalar_t>(g[t]);
  }
}

} // namespace

at::Tensor convex_iou_cuda(const at::Tensor& pointsets, const at::Tensor& polygons) {
  const c10::cuda::CUDAGuard guard(pointsets.device());
  const at::Tensor p = pointsets.contiguous();
  const at::Tensor q = polygons.contiguous();
  const int64_t n = p.size(0);
  const int64_t k = q.size(0);
  at::Tensor out = at::empty({n, k}, p.options());
  if (out.numel() == 0) {
    return out;
  }
  const int64_t col_tiles = (k + kTile - 1) / kTile;
  const int64_t tiles = col_tiles * ((n + kTile - 1) / kTile);
  TORCH_CHECK(tiles <= std::numeric_limits<int32_t>::max(), "mmops::convex_iou: ", n, " x ", k,
              " pairs are more than one CUDA launch covers");
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.scalar_type(), "mmops::convex_iou (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    convex_iou_kernel<scalar_t, acc_t>
        <<<static_cast<unsigned>(tiles), dim3(kTile, kTile / kRowsPerThread), 0, stream>>>(
            p.const_data_ptr<scalar_t>(), q.const_data_ptr<scalar_t>(), n, k, col_tiles,
            out.mutable_data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor> convex_giou_cuda(const at::Tensor& pointsets, const at::Tensor& polygons) {
  const c10::cuda::CUDAGuard guard(pointsets.device());
  const at::Tensor p = pointsets.contiguous();
  const at::Tensor q = polygons.contiguous();
  const int64_t n = p.size(0);
  at::Tensor giou = at::empty({n}, p.options());
  at::Tensor grad = at::empty({n, 2 * kPoints}, p.options());
  if (n == 0) {
    return {giou, grad};
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.scalar_type(), "mmops::convex_giou (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const int threads = 128;
    TORCH_CHECK((n + threads - 1) / threads <= std::numeric_limits<int32_t>::max(), "mmops::convex_giou: ", n,
                " rows are more than one CUDA launch covers");
    convex_giou_kernel<scalar_t, acc_t><<<(n + threads - 1) / threads, threads, 0, stream>>>(
        p.const_data_ptr<scalar_t>(), q.const_data_ptr<scalar_t>(), n, giou.mutable_data_ptr<scalar_t>(),
        grad.mutable_data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {giou, grad};
}

} // namespace kernels
} // namespace mmops

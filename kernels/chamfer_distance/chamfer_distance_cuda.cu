// CUDA kernels of chamfer_distance.
//
// Forward: one thread per query point; the block stages the other set in
// shared memory, kTile points at a time (as float / double pairs), and every
// thread scans the tile in ascending index (chamfer_distance_math.h: the
// lowest index wins ties, as on the CPU; products never fused, so the two
// devices pick the same neighbour). One launch per direction; batch and query
// tiles share blockIdx.x. Backward: one thread per point summing its own pair
// and the pairs that chose it (segments from common/index_segments.h): one
// writer per value, no atomics, the CPU's order; an index outside the other
// set contributes nothing.

#include "chamfer_distance/chamfer_distance_kernels.h"
#include "chamfer_distance/chamfer_distance_math.h"
#include "common/index_segments.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>
#include <limits>

namespace mmops {
namespace kernels {
namespace {

using namespace chamfer_distance_math;

constexpr int kThreads = 256;
constexpr int kTile = 512; // points of the other set staged per step

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    nearest_kernel(const scalar_t* __restrict__ a_pts, const scalar_t* __restrict__ b_pts, int32_t na, int32_t nb,
                   int32_t tiles, scalar_t* __restrict__ dist, int32_t* __restrict__ idx) {
  using acc_t = at::opmath_type<scalar_t>;
  __shared__ acc_t sx[kTile], sy[kTile];
  const int64_t b = blockIdx.x / tiles;
  const int32_t i = (blockIdx.x - b * tiles) * kThreads + threadIdx.x;
  const bool active = i < na;
  const int64_t q = b * na + i;
  const acc_t x = active ? static_cast<acc_t>(a_pts[2 * q]) : acc_t(0);
  const acc_t y = active ? static_cast<acc_t>(a_pts[2 * q + 1]) : acc_t(0);
  const scalar_t* others = b_pts + b * nb * 2;
  Nearest<acc_t> best{acc_t(0), -1};
  for (int32_t j0 = 0; j0 < nb; j0 += kTile) {
    const int32_t count = min(kTile, nb - j0);
    __syncthreads(); // the previous tile is read by every thread
    for (int32_t t = threadIdx.x; t < count; t += kThreads) {
      sx[t] = others[2 * (int64_t(j0) + t)];
      sy[t] = others[2 * (int64_t(j0) + t) + 1];
    }
    __syncthreads();
    if (active) {
#pragma unroll 8
      for (int32_t t = 0; t < count; ++t) {
        best.offer(squared_distance<acc_t>(x, y, sx[t], sy[t]), j0 + t);
      }
    }
  }
  if (active) {
    dist[q] = static_cast<scalar_t>(best.dist);
    idx[q] = best.index;
  }
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    grad_kernel(const scalar_t* __restrict__ a_pts, const scalar_t* __restrict__ b_pts,
                const int32_t* __restrict__ idx_a, const scalar_t* __restrict__ g_a, const scalar_t* __restrict__ g_b,
                const int64_t* __restrict__ order, const int64_t* __restrict__ offsets, int64_t points, int64_t na,
                int64_t nb, scalar_t* __restrict__ grad_a) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t q = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  if (q < points) {
    point_grad<acc_t>(q, a_pts, b_pts, idx_a, g_a, g_b, order, offsets, na, nb, grad_a);
  }
}

template <typename scalar_t>
void launch_nearest(const scalar_t* a_pts, const scalar_t* b_pts, int64_t batch, int64_t na, int64_t nb, scalar_t* dist,
                    int32_t* idx, cudaStream_t stream) {
  if (batch * na == 0) {
    return;
  }
  const int64_t tiles = (na + kThreads - 1) / kThreads;
  TORCH_CHECK(batch * tiles <= std::numeric_limits<int32_t>::max(), "mmops::chamfer_distance: ", batch * tiles,
              " blocks exceed the grid");
  nearest_kernel<scalar_t><<<static_cast<unsigned>(batch * tiles), kThreads, 0, stream>>>(
      a_pts, b_pts, static_cast<int32_t>(na), static_cast<int32_t>(nb), static_cast<int32_t>(tiles), dist, idx);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename scalar_t>
void launch_grad(const scalar_t* a_pts, const scalar_t* b_pts, const int32_t* idx_a, const scalar_t* g_a,
                 const scalar_t* g_b, const IndexSegments& chose_a, int64_t batch, int64_t na, int64_t nb,
                 scalar_t* grad_a, cudaStream_t stream) {
  const int64_t points = batch * na;
  if (points == 0) {
    return;
  }
  const int64_t blocks = (points + kThreads - 1) / kThreads;
  grad_kernel<scalar_t><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      a_pts, b_pts, idx_a, g_a, g_b, chose_a.order.const_data_ptr<int64_t>(), chose_a.offsets.const_data_ptr<int64_t>(),
      points, na, nb, grad_a);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

} // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> chamfer_distance_forward_cuda(
    const at::Tensor& xyz1, const at::Tensor& xyz2, const ChamferDistanceParams& p) {
  const c10::cuda::CUDAGuard guard(xyz1.device());
  const at::Tensor a = xyz1.contiguous(), b = xyz2.contiguous();
  at::Tensor dist1 = at::empty({p.batch, p.n}, a.options()), dist2 = at::empty({p.batch, p.m}, a.options());
  at::Tensor idx1 = at::empty({p.batch, p.n}, a.options().dtype(at::kInt));
  at::Tensor idx2 = at::empty({p.batch, p.m}, a.options().dtype(at::kInt));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "chamfer_distance_forward_cuda", [&] {
    const scalar_t* pa = a.const_data_ptr<scalar_t>();
    const scalar_t* pb = b.const_data_ptr<scalar_t>();
    launch_nearest(pa, pb, p.batch, p.n, p.m, dist1.mutable_data_ptr<scalar_t>(), idx1.mutable_data_ptr<int32_t>(),
                   stream);
    launch_nearest(pb, pa, p.batch, p.m, p.n, dist2.mutable_data_ptr<scalar_t>(), idx2.mutable_data_ptr<int32_t>(),
                   stream);
  });
  return {dist1, dist2, idx1, idx2};
}

std::tuple<at::Tensor, at::Tensor> chamfer_distance_backward_cuda(const at::Tensor& xyz1, const at::Tensor& xyz2,
                                                                  const at::Tensor& idx1, const at::Tensor& idx2,
                                                                  const at::Tensor& grad_dist1,
                                                                  const at::Tensor& grad_dist2,
                                                                  const ChamferDistanceParams& p) {
  const c10::cuda::CUDAGuard guard(xyz1.device());
  const at::Tensor a = xyz1.contiguous(), b = xyz2.contiguous();
  const at::Tensor i1 = idx1.contiguous(), i2 = idx2.contiguous();
  const at::Tensor g1 = grad_dist1.contiguous(), g2 = grad_dist2.contiguous();
  at::Tensor grad1 = at::empty_like(a), grad2 = at::empty_like(b);
  const IndexSegments chose1 = group_by_index(i2, p.n), chose2 = group_by_index(i1, p.m);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "chamfer_distance_backward_cuda", [&] {
    const scalar_t* pa = a.const_data_ptr<scalar_t>();
    const scalar_t* pb = b.const_data_ptr<scalar_t>();
    const scalar_t* pg1 = g1.const_data_ptr<scalar_t>();
    const scalar_t* pg2 = g2.const_data_ptr<scalar_t>();
    launch_grad(pa, pb, i1.const_data_ptr<int32_t>(), pg1, pg2, chose1, p.batch, p.n, p.m,
                grad1.mutable_data_ptr<scalar_t>(), stream);
    launch_grad(pb, pa, i2.const_data_ptr<int32_t>(), pg2, pg1, chose2, p.batch, p.m, p.n,
                grad2.mutable_data_ptr<scalar_t>(), stream);
  });
  return {grad1, grad2};
}

} // namespace kernels
} // namespace mmops

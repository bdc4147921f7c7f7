// CUDA kernels of the neighbour queries.
//  - ball_query / stack_ball_query: one thread per centre scans the points of
//    its batch in index order (a batch's points stay in L2)
//    and stops at sample_num hits, as the CPU kernel does.
//  - knn / three_nn: a block of 256 centres of one batch stages the batch's
//    points, 256 at a time, in shared memory (converted to the compute type
//    once); every thread keeps its k nearest in registers (NearestList).
// half/bfloat16 compute in float. 64-bit offsets; no host synchronisation.

#include "neighbors/neighbors_kernels.h"
#include "neighbors/neighbors_math.h"

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

using neighbors_math::squared_distance;

constexpr int kThreads = 256;

unsigned blocks_for(int64_t work, const char* op) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  TORCH_CHECK(blocks <= std::numeric_limits<int32_t>::max(), op, work, " centres are more than one CUDA launch covers");
  return static_cast<unsigned>(blocks);
}

// The ball of one centre (points pts[0, n)) into out[0, S), mmcv's fill;
// returns how many points were found.
template <typename acc_t, typename scalar_t, typename InBall>
__device__ int64_t fill_ball(const scalar_t* __restrict__ pts, int64_t n, const scalar_t* __restrict__ c,
                             int64_t samples, int32_t* __restrict__ out, InBall in_ball) {
  const acc_t cx = static_cast<acc_t>(c[0]), cy = static_cast<acc_t>(c[1]), cz = static_cast<acc_t>(c[2]);
  int64_t cnt = 0;
  for (int64_t k = 0; k < n && cnt < samples; ++k) {
    const acc_t d2 = squared_distance<acc_t>(cx, cy, cz, static_cast<acc_t>(pts[3 * k]),
                                             static_cast<acc_t>(pts[3 * k + 1]), static_cast<acc_t>(pts[3 * k + 2]));
    if (in_ball(d2)) {
      out[cnt++] = static_cast<int32_t>(k);
    }
  }
  const int32_t fill = cnt > 0 ? out[0] : 0;
  for (int64_t s = cnt; s < samples; ++s) {
    out[s] = fill;
  }
  return cnt;
}

template <typename scalar_t, typename acc_t>
__global__ void ball_query_kernel(const scalar_t* __restrict__ xyz, const scalar_t* __restrict__ centers, int64_t b,
                                  int64_t n, int64_t m, int64_t samples, acc_t min2, acc_t max2,
                                  int32_t* __restrict__ out) {
  const int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= b * m) {
    return;
  }
  fill_ball<acc_t>(xyz + (i / m) * n * 3, n, centers + 3 * i, samples, out + i * samples,
                   [&](acc_t d2) { return neighbors_math::in_ball(d2, min2, max2); });
}

template <typename scalar_t, typename acc_t>
__global__ void stack_ball_query_kernel(const scalar_t* __restrict__ xyz, const scalar_t* __restrict__ centers,
                                        const int64_t* __restrict__ xyz_ends, const int64_t* __restrict__ center_ends,
                                        int64_t batches, int64_t total, int64_t m, int64_t samples, acc_t max2,
                                        int32_t* __restrict__ out) {
  const int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= m) {
    return;
  }
  const auto seg =
      neighbors_math::segment_of(neighbors_math::batch_of(i, center_ends, batches), xyz_ends, batches, total);
  if (fill_ball<acc_t>(xyz + 3 * seg.start, seg.count, centers + 3 * i, samples, out + i * samples,
                       [&](acc_t d2) { return d2 < max2; }) == 0) {
    out[i * samples] = -1;
  }
}

// The k nearest points of every centre: centre i of batch i / m writes slot j
// at out_idx[(i / m) * k * m + j * slot_stride + (i % m) * point_stride] (and
// the distance at the same offset of out_dist, when given).
template <int KMAX, typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kThreads)
    nearest_kernel(const scalar_t* __restrict__ xyz, const scalar_t* __restrict__ centers, int64_t n, int64_t m, int k,
                   int64_t slot_stride, int64_t point_stride, int32_t* __restrict__ out_idx,
                   scalar_t* __restrict__ out_dist) {
  __shared__ acc_t tile[3][kThreads];
  const int64_t batch = blockIdx.y;
  const int64_t c = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const bool active = c < m;
  const scalar_t* ctr = centers + (batch * m + (active ? c : 0)) * 3;
  const acc_t cx = static_cast<acc_t>(ctr[0]), cy = static_cast<acc_t>(ctr[1]), cz = static_cast<acc_t>(ctr[2]);
  const scalar_t* pts = xyz + batch * n * 3;
  neighbors_math::NearestList<KMAX, acc_t> list(k);
  for (int64_t base = 0; base < n; base += kThreads) {
    const int64_t tile_n = n - base < kThreads ? n - base : kThreads;
    __syncthreads();
    for (int t = threadIdx.x; t < 3 * tile_n; t += kThreads) { // coalesced: 3 * tile_n consecutive values
      tile[t % 3][t / 3] = static_cast<acc_t>(pts[base * 3 + t]);
    }
    __syncthreads();
    if (active) {
      for (int t = 0; t < tile_n; ++t) {
        list.offer(squared_distance<acc_t>(cx, cy, cz, tile[0][t], tile[1][t], tile[2][t]), static_cast<int>(base + t));
      }
    }
  }
  if (!active) {
    return;
  }
  const int64_t o = batch * k * m + c * point_stride;
#pragma unroll
  for (int j = 0; j < KMAX; ++j) {
    if (j < k) {
      const bool found = j < list.count;
      out_idx[o + j * slot_stride] = found ? list.idx[j] : 0;
      if (out_dist != nullptr) {
        out_dist[o + j * slot_stride] = static_cast<scalar_t>(found ? host_device_math::sqrt_of(list.dist[j])
                                                                    : std::numeric_limits<acc_t>::infinity());
      }
    }
  }
}

// Launches nearest_kernel for pts [B, N, 3], ctr [B, M, 3] (contiguous).
template <typename scalar_t>
void launch_nearest(const at::Tensor& pts, const at::Tensor& ctr, int64_t k, int64_t slot_stride, int64_t point_stride,
                    int32_t* out_idx, scalar_t* out_dist, const char* op) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t b = ctr.size(0), n = pts.size(1), m = ctr.size(1);
  TORCH_CHECK(b <= 65535, op, "at most 65535 batches run in one CUDA launch, but got ", b);
  const dim3 grid(blocks_for(m, op), static_cast<unsigned>(b));
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  neighbors_math::with_capacity(k, [&](auto capacity) {
    constexpr int KMAX = decltype(capacity)::value;
    nearest_kernel<KMAX, scalar_t, acc_t>
        <<<grid, kThreads, 0, stream>>>(pts.const_data_ptr<scalar_t>(), ctr.const_data_ptr<scalar_t>(), n, m,
                                        static_cast<int>(k), slot_stride, point_stride, out_idx, out_dist);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

} // namespace

at::Tensor ball_query_cuda(const at::Tensor& xyz, const at::Tensor& center_xyz, const BallQueryParams& p) {
  const c10::cuda::CUDAGuard guard(xyz.device());
  const at::Tensor pts = xyz.contiguous();
  const at::Tensor ctr = center_xyz.contiguous();
  const int64_t b = pts.size(0), n = pts.size(1), m = ctr.size(1), s = p.sample_num;
  at::Tensor out = at::empty({b, m, s}, pts.options().dtype(at::kInt));
  if (out.numel() == 0) {
    return out;
  }
  const unsigned blocks = blocks_for(b * m, "mmops::ball_query: ");
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, pts.scalar_type(), "mmops::ball_query (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const acc_t rmin = static_cast<acc_t>(p.min_radius), rmax = static_cast<acc_t>(p.max_radius);
    ball_query_kernel<scalar_t, acc_t>
        <<<blocks, kThreads, 0, stream>>>(pts.const_data_ptr<scalar_t>(), ctr.const_data_ptr<scalar_t>(), b, n, m, s,
                                          rmin * rmin, rmax * rmax, out.mutable_data_ptr<int32_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

at::Tensor stack_ball_query_cuda(const at::Tensor& xyz, const at::Tensor& center_xyz, const at::Tensor& xyz_batch_cnt,
                                 const at::Tensor& center_xyz_batch_cnt, const BallQueryParams& p) {
  const c10::cuda::CUDAGuard guard(xyz.device());
  const at::Tensor pts = xyz.contiguous();
  const at::Tensor ctr = center_xyz.contiguous();
  const int64_t m = ctr.size(0), s = p.sample_num, batches = xyz_batch_cnt.size(0);
  at::Tensor out = at::empty({m, s}, pts.options().dtype(at::kInt));
  if (out.numel() == 0) {
    return out;
  }
  const at::Tensor xyz_ends = xyz_batch_cnt.to(at::kLong).cumsum(0);
  const at::Tensor center_ends = center_xyz_batch_cnt.to(at::kLong).cumsum(0);
  const unsigned blocks = blocks_for(m, "mmops::stack_ball_query: ");
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, pts.scalar_type(), "mmops::stack_ball_query (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const acc_t rmax = static_cast<acc_t>(p.max_radius);
    stack_ball_query_kernel<scalar_t, acc_t>
        <<<blocks, kThreads, 0, stream>>>(pts.const_data_ptr<scalar_t>(), ctr.const_data_ptr<scalar_t>(),
                                          xyz_ends.const_data_ptr<int64_t>(), center_ends.const_data_ptr<int64_t>(),
                                          batches, pts.size(0), m, s, rmax * rmax, out.mutable_data_ptr<int32_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

at::Tensor knn_cuda(const at::Tensor& xyz, const at::Tensor& center_xyz, int64_t k) {
  const c10::cuda::CUDAGuard guard(xyz.device());
  const at::Tensor pts = xyz.contiguous();
  const at::Tensor ctr = center_xyz.contiguous();
  const int64_t b = ctr.size(0), m = ctr.size(1);
  at::Tensor out = at::empty({b, k, m}, pts.options().dtype(at::kInt));
  if (out.numel() == 0) {
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, pts.scalar_type(), "mmops::knn (CUDA)", [&] {
    launch_nearest<scalar_t>(pts, ctr, k, /*slot_stride=*/m, /*point_stride=*/1, out.mutable_data_ptr<int32_t>(),
                             nullptr, "mmops::knn: ");
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor> three_nn_cuda(const at::Tensor& target, const at::Tensor& source) {
  const c10::cuda::CUDAGuard guard(target.device());
  const at::Tensor tgt = target.contiguous();
  const at::Tensor src = source.contiguous();
  const int64_t b = tgt.size(0), n = tgt.size(1);
  at::Tensor dist = at::empty({b, n, 3}, tgt.options());
  at::Tensor idx = at::empty({b, n, 3}, tgt.options().dtype(at::kInt));
  if (idx.numel() == 0) {
    return {dist, idx};
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, tgt.scalar_type(), "mmops::three_nn (CUDA)", [&] {
    launch_nearest<scalar_t>(src, tgt, 3, /*slot_stride=*/1, /*point_stride=*/3, idx.mutable_data_ptr<int32_t>(),
                             dist.mutable_data_ptr<scalar_t>(), "mmops::three_nn: ");
  });
  return {dist, idx};
}

} // namespace kernels
} // namespace mmops

// CUDA kernels of assign_score_withk (assign_score_withk_math.h).
//
// Forward: a block computes a tile of 32 pairs x 32 channels: lanes take
// consecutive channels o (coalesced loads of the feature rows [M, O]), the
// tile goes through shared memory and is stored with lanes on consecutive
// pairs (coalesced stores into the [B, O, npoint, K] output). Backward: one
// thread per gradient value. The score gradient sums over o; the feature
// gradients are gathers over the pairs that chose each row (segments from
// common/index_segments.h, pairs ascending), with the output gradient
// transposed to [B, npoint, K, O] first so that lanes (consecutive o) read
// consecutive values. No atomics, the CPU's order: deterministic. A pair whose
// neighbour or center index lies outside [0, N) adds nothing (the guard).

#include "assign_score_withk/assign_score_withk_backward.h"
#include "assign_score_withk/assign_score_withk_kernels.h"
#include "assign_score_withk/assign_score_withk_math.h"
#include "common/index_segments.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>
#include <limits>

namespace mmops {
namespace kernels {
namespace {

using namespace assign_score_withk_math;

constexpr int kThreads = 256;
constexpr int kTile = 32; // pairs and channels of a forward tile
constexpr int kWarps = kThreads / 32;

template <typename scalar_t, typename index_t>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const scalar_t* __restrict__ scores, const scalar_t* __restrict__ points,
                   const scalar_t* __restrict__ centers, const index_t* __restrict__ knn, scalar_t* __restrict__ out,
                   Sizes s) {
  using acc_t = at::opmath_type<scalar_t>;
  __shared__ acc_t tile[kTile][kTile + 1];
  const int64_t q0 = int64_t(blockIdx.x) * kTile, o0 = int64_t(blockIdx.y) * kTile, b = blockIdx.z;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int row = warp; row < kTile; row += kWarps) {
    const int64_t q = q0 + row, o = o0 + lane;
    acc_t value = 0;
    if (q < s.q && o < s.o) {
      const Pair pair{b * s.q + q, b, q % s.k}; // one division per row (uniform over the warp)
      value = pair_output<acc_t>(scores, points, centers, knn, pair, o, s);
    }
    tile[row][lane] = value;
  }
  __syncthreads();
  for (int col = warp; col < kTile; col += kWarps) {
    const int64_t q = q0 + lane, o = o0 + col;
    if (q < s.q && o < s.o) {
      out[(b * s.o + o) * s.q + q] = static_cast<scalar_t>(tile[lane][col]);
    }
  }
}

template <typename scalar_t, typename index_t>
__global__ void __launch_bounds__(kThreads)
    score_grad_kernel(const scalar_t* __restrict__ grad_t, const scalar_t* __restrict__ points,
                      const scalar_t* __restrict__ centers, const index_t* __restrict__ knn,
                      scalar_t* __restrict__ grad_scores, Sizes s, int64_t total) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  if (i < total) {
    const int64_t r = i / s.m;
    grad_scores[i] =
        static_cast<scalar_t>(score_grad<acc_t>(grad_t, points, centers, knn, pair_of(r, s), i - r * s.m, s));
  }
}

// The [M, O] values of feature-gradient row blockIdx.x (b * N + v): every
// thread of a block walks the same segment; lanes on consecutive (m, o).
template <typename scalar_t, typename index_t, bool kCenter>
__global__ void __launch_bounds__(kThreads)
    feature_grad_kernel(const scalar_t* __restrict__ grad_t, const scalar_t* __restrict__ scores,
                        const index_t* __restrict__ knn, const int64_t* __restrict__ order,
                        const int64_t* __restrict__ offsets, scalar_t* __restrict__ out, Sizes s) {
  using acc_t = at::opmath_type<scalar_t>;
  const int32_t mo = blockIdx.y * blockDim.x + threadIdx.x, width = static_cast<int32_t>(s.m * s.o);
  if (mo >= width) {
    return;
  }
  const int64_t row = blockIdx.x;
  const int32_t m = mo / static_cast<int32_t>(s.o), o = mo - m * static_cast<int32_t>(s.o);
  const acc_t v = kCenter ? center_grad<acc_t>(grad_t, scores, knn, order, offsets, row, m, o, s)
                          : point_grad<acc_t>(grad_t, scores, order, offsets, row, m, o, s);
  out[row * width + mo] = static_cast<scalar_t>(v);
}

// One block per feature row, up to kThreads values of the row per block.
template <typename scalar_t, typename index_t, bool kCenter>
void launch_feature_grad(const scalar_t* grad_t, const scalar_t* scores, const index_t* knn, const IndexSegments& seg,
                         scalar_t* out, const Sizes& s, int64_t rows, cudaStream_t stream) {
  const int64_t width = s.m * s.o;
  const int threads = static_cast<int>(std::min<int64_t>(kThreads, (width + 31) / 32 * 32));
  const int64_t parts = (width + threads - 1) / threads;
  TORCH_CHECK(rows <= std::numeric_limits<int32_t>::max() && parts <= 65535, "mmops::assign_score_withk: ", rows,
              " feature rows of ", width, " values exceed the CUDA grid");
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(parts));
  feature_grad_kernel<scalar_t, index_t, kCenter><<<grid, threads, 0, stream>>>(
      grad_t, scores, knn, seg.order.const_data_ptr<int64_t>(), seg.offsets.const_data_ptr<int64_t>(), out, s);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

unsigned blocks_for(int64_t total) {
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  TORCH_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "mmops::assign_score_withk: ", blocks,
              " blocks exceed the grid");
  return static_cast<unsigned>(blocks);
}

} // namespace

at::Tensor assign_score_withk_forward_cuda(const at::Tensor& scores, const at::Tensor& point_features,
                                           const at::Tensor& center_features, const at::Tensor& knn_idx,
                                           const AssignScoreWithKParams& p) {
  const c10::cuda::CUDAGuard guard(scores.device());
  const at::Tensor sc = scores.contiguous(), pts = point_features.contiguous(), ctr = center_features.contiguous();
  const at::Tensor knn = knn_idx.contiguous();
  at::Tensor out = at::empty({p.batch, p.out_dim, p.centers, p.k}, sc.options());
  if (out.numel() == 0) {
    return out;
  }
  const Sizes s = sizes_of(p);
  const int64_t pair_tiles = (s.q + kTile - 1) / kTile, channel_tiles = (s.o + kTile - 1) / kTile;
  TORCH_CHECK(pair_tiles <= std::numeric_limits<int32_t>::max() && channel_tiles <= 65535 && p.batch <= 65535,
              "mmops::assign_score_withk: the CUDA grid holds at most 65535 batches and 2^21 - 32 channels, but got ",
              p.batch, " and ", p.out_dim);
  const dim3 grid(static_cast<unsigned>(pair_tiles), static_cast<unsigned>(channel_tiles),
                  static_cast<unsigned>(p.batch));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, sc.scalar_type(), "assign_score_withk_forward_cuda", [&] {
    AT_DISPATCH_INDEX_TYPES(knn.scalar_type(), "assign_score_withk_forward_cuda", [&] {
      forward_kernel<scalar_t, index_t><<<grid, kThreads, 0, stream>>>(
          sc.const_data_ptr<scalar_t>(), pts.const_data_ptr<scalar_t>(), ctr.const_data_ptr<scalar_t>(),
          knn.const_data_ptr<index_t>(), out.mutable_data_ptr<scalar_t>(), s);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> assign_score_withk_backward_cuda(
    const at::Tensor& grad_output, const at::Tensor& scores, const at::Tensor& point_features,
    const at::Tensor& center_features, const at::Tensor& knn_idx, const AssignScoreWithKParams& p) {
  const c10::cuda::CUDAGuard guard(scores.device());
  const AssignScoreWithKBackward b = prepare_backward(grad_output, scores, point_features, center_features, knn_idx, p);
  const Sizes s = sizes_of(p);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, b.scores.scalar_type(), "assign_score_withk_backward_cuda", [&] {
        AT_DISPATCH_INDEX_TYPES(b.knn.scalar_type(), "assign_score_withk_backward_cuda", [&] {
          const scalar_t* pg = b.grad_t.const_data_ptr<scalar_t>();
          const scalar_t* psc = b.scores.const_data_ptr<scalar_t>();
          const index_t* pk = b.knn.const_data_ptr<index_t>();
          if (b.grad_scores.numel() > 0) {
            score_grad_kernel<scalar_t, index_t><<<blocks_for(b.grad_scores.numel()), kThreads, 0, stream>>>(
                pg, b.points.const_data_ptr<scalar_t>(), b.centers.const_data_ptr<scalar_t>(), pk,
                b.grad_scores.mutable_data_ptr<scalar_t>(), s, b.grad_scores.numel());
            C10_CUDA_KERNEL_LAUNCH_CHECK();
          }
          if (b.grad_points.numel() > 0) {
            const int64_t rows = p.batch * p.points;
            scalar_t* gp = b.grad_points.mutable_data_ptr<scalar_t>();
            scalar_t* gc = b.grad_centers.mutable_data_ptr<scalar_t>();
            launch_feature_grad<scalar_t, index_t, false>(pg, psc, pk, b.by_point, gp, s, rows, stream);
            launch_feature_grad<scalar_t, index_t, true>(pg, psc, pk, b.by_center, gc, s, rows, stream);
          }
        });
      });
  return {b.grad_scores, b.grad_points, b.grad_centers};
}

} // namespace kernels
} // namespace mmops

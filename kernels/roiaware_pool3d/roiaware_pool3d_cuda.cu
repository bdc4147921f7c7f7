// CUDA kernels of roiaware_pool3d.
// Forward, four steps on the current stream (no host synchronisation):
//  1. assign: one warp per roi walks the points in index order, 32 at a time;
//     lanes with the same voxel find each other (__match_any_sync), so each
//     kept point gets its rank in its voxel (mmcv's "first max_kept points in
//     index order", deterministic) and the roi's voxel counts grow.
//  2. offsets: the exclusive cumulative sum of the counts (ATen).
//  3. group: each kept point stores itself at offset + rank (point order).
//  4. pool: one thread per (roi, voxel, channel), channels fastest.
// Backward: one thread per (point, channel), summing over the rois in index
// order (a gather: deterministic, no atomics).
// The geometry is kernels/common/box3d.h in float (double for double).

#include "roiaware_pool3d/roiaware_pool3d_kernels.h"
#include "roiaware_pool3d/roiaware_pool3d_math.h"

#include "common/box3d.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <limits>
#include <tuple>

namespace mmops {
namespace kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t(1) << 20;

int64_t blocks_for(int64_t work) {
  return std::min<int64_t>((work + kThreads - 1) / kThreads, kMaxBlocks);
}

template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(32)
    assign_kernel(const scalar_t* __restrict__ rois, const scalar_t* __restrict__ pts, int64_t num_points,
                  RoIAwarePool3dParams p, int32_t* __restrict__ point_voxels, int32_t* __restrict__ point_ranks,
                  int32_t* __restrict__ counts) {
  const int64_t r = blockIdx.x;
  const int lane = threadIdx.x;
  const auto box = box3d::Box3d<acc_t>::load(rois + 7 * r);
  int32_t* roi_counts = counts + r * p.out_x * p.out_y * p.out_z;
  for (int64_t base = 0; base < num_points; base += 32) {
    const int64_t i = base + lane;
    int64_t v = -1;
    if (i < num_points) {
      const acc_t px = static_cast<acc_t>(pts[3 * i]), py = static_cast<acc_t>(pts[3 * i + 1]);
      const acc_t pz = static_cast<acc_t>(pts[3 * i + 2]);
      acc_t lx = 0, ly = 0;
      if (box.contains(px, py, pz, lx, ly)) {
        v = roiaware_pool3d_math::voxel_of(box, lx, ly, pz, p);
      }
    }
    const unsigned peers = __match_any_sync(0xffffffffu, v);
    const int before = __popc(peers & ((1u << lane) - 1u));
    const int32_t held = v >= 0 ? roi_counts[v] : 0;
    __syncwarp();
    const bool kept = v >= 0 && held + before < p.max_kept;
    if (v >= 0 && before == 0) { // the lowest lane of the group updates the count
      const int64_t grown = held + __popc(peers);
      roi_counts[v] = static_cast<int32_t>(grown < p.max_kept ? grown : p.max_kept);
    }
    __syncwarp();
    if (i < num_points) {
      point_voxels[r * num_points + i] = kept ? static_cast<int32_t>(v) : -1;
      point_ranks[r * num_points + i] = held + before;
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    group_kernel(const int32_t* __restrict__ point_voxels, const int32_t* __restrict__ point_ranks,
                 const int64_t* __restrict__ ends, const int32_t* __restrict__ counts, int64_t num_points,
                 int64_t voxels, int64_t total, int32_t* __restrict__ grouped) {
  for (int64_t e = int64_t(blockIdx.x) * kThreads + threadIdx.x; e < total; e += int64_t(gridDim.x) * kThreads) {
    const int32_t v = point_voxels[e];
    if (v >= 0) {
      const int64_t cell = (e / num_points) * voxels + v;
      grouped[ends[cell] - counts[cell] + point_ranks[e]] = static_cast<int32_t>(e % num_points);
    }
  }
}

template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kThreads)
    pool_kernel(const scalar_t* __restrict__ feats, const int32_t* __restrict__ grouped,
                const int64_t* __restrict__ ends, const int32_t* __restrict__ counts, int64_t channels, int64_t total,
                bool is_max, scalar_t* __restrict__ out, int32_t* __restrict__ argmax) {
  for (int64_t e = int64_t(blockIdx.x) * kThreads + threadIdx.x; e < total; e += int64_t(gridDim.x) * kThreads) {
    const int64_t cell = e / channels;
    const int64_t c = e - cell * channels;
    const int64_t last = ends[cell];
    roiaware_pool3d_math::pool_voxel<scalar_t, acc_t>(feats, grouped, last - counts[cell], last, c, channels, is_max, e,
                                                      out, argmax);
  }
}

template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const scalar_t* __restrict__ grad_out, const int32_t* __restrict__ argmax,
                    const int32_t* __restrict__ point_voxels, const int32_t* __restrict__ counts, int64_t num_rois,
                    int64_t num_points, int64_t voxels, int64_t channels, RoIAwarePoolMode mode,
                    scalar_t* __restrict__ grad_in) {
  const int64_t total = num_points * channels;
  for (int64_t e = int64_t(blockIdx.x) * kThreads + threadIdx.x; e < total; e += int64_t(gridDim.x) * kThreads) {
    const int64_t i = e / channels;
    grad_in[e] = static_cast<scalar_t>(roiaware_pool3d_math::point_gradient<scalar_t, acc_t>(
        i, e - i * channels, num_rois, num_points, voxels, channels, grad_out, argmax, point_voxels, counts, mode));
  }
}

} // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> roiaware_pool3d_forward_cuda(const at::Tensor& rois,
                                                                                        const at::Tensor& pts,
                                                                                        const at::Tensor& pts_feature,
                                                                                        const RoIAwarePool3dParams& p) {
  const c10::cuda::CUDAGuard guard(pts_feature.device());
  const at::Tensor boxes = rois.contiguous();
  const at::Tensor points = pts.contiguous();
  const at::Tensor feats = pts_feature.contiguous();
  const int64_t n = boxes.size(0), num_points = points.size(0), c = feats.size(1);
  const int64_t voxels = p.out_x * p.out_y * p.out_z;
  const bool is_max = p.mode == RoIAwarePoolMode::kMax;
  at::Tensor pooled, argmax, point_voxels, counts; // captured by the dispatch lambda below
  std::tie(pooled, argmax, point_voxels, counts) = roiaware_pool3d_outputs(n, feats, p);
  if (n == 0) {
    return {pooled, argmax, point_voxels, counts};
  }
  TORCH_CHECK(n <= std::numeric_limits<int32_t>::max(), "mmops::roiaware_pool3d: ", n,
              " rois are more than one CUDA launch covers");
  const auto ints = point_voxels.options();
  at::Tensor ranks = at::empty({n, num_points}, ints);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, feats.scalar_type(), "mmops::roiaware_pool3d (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    if (num_points > 0) {
      assign_kernel<scalar_t, acc_t><<<static_cast<unsigned>(n), 32, 0, stream>>>(
          boxes.const_data_ptr<scalar_t>(), points.const_data_ptr<scalar_t>(), num_points, p,
          point_voxels.mutable_data_ptr<int32_t>(), ranks.mutable_data_ptr<int32_t>(),
          counts.mutable_data_ptr<int32_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    const at::Tensor ends = at::cumsum(counts.view({-1}), 0, at::kLong); // inclusive: a voxel's group ends here
    at::Tensor grouped = at::empty({std::max<int64_t>(n * num_points, 1)}, ints);
    if (num_points > 0) {
      group_kernel<<<static_cast<unsigned>(blocks_for(n * num_points)), kThreads, 0, stream>>>(
          point_voxels.const_data_ptr<int32_t>(), ranks.const_data_ptr<int32_t>(), ends.const_data_ptr<int64_t>(),
          counts.const_data_ptr<int32_t>(), num_points, voxels, n * num_points, grouped.mutable_data_ptr<int32_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    if (pooled.numel() > 0) {
      pool_kernel<scalar_t, acc_t><<<static_cast<unsigned>(blocks_for(pooled.numel())), kThreads, 0, stream>>>(
          feats.const_data_ptr<scalar_t>(), grouped.const_data_ptr<int32_t>(), ends.const_data_ptr<int64_t>(),
          counts.const_data_ptr<int32_t>(), c, pooled.numel(), is_max, pooled.mutable_data_ptr<scalar_t>(),
          is_max ? argmax.mutable_data_ptr<int32_t>() : nullptr);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
  return {pooled, argmax, point_voxels, counts};
}

at::Tensor roiaware_pool3d_backward_cuda(const at::Tensor& grad_out, const at::Tensor& argmax,
                                         const at::Tensor& point_voxels, const at::Tensor& voxel_counts,
                                         const RoIAwarePool3dParams& p) {
  const c10::cuda::CUDAGuard guard(grad_out.device());
  const at::Tensor grad = grad_out.contiguous();
  const at::Tensor am = argmax.contiguous();
  const at::Tensor pv = point_voxels.contiguous();
  const at::Tensor counts = voxel_counts.contiguous();
  const int64_t n = pv.size(0), num_points = pv.size(1), c = grad.size(4);
  at::Tensor grad_in = at::empty({num_points, c}, grad.options());
  if (grad_in.numel() == 0) {
    return grad_in;
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad.scalar_type(), "mmops::roiaware_pool3d backward (CUDA)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        backward_kernel<scalar_t, acc_t><<<static_cast<unsigned>(blocks_for(grad_in.numel())), kThreads, 0, stream>>>(
            grad.const_data_ptr<scalar_t>(), p.mode == RoIAwarePoolMode::kMax ? am.const_data_ptr<int32_t>() : nullptr,
            pv.const_data_ptr<int32_t>(), counts.const_data_ptr<int32_t>(), n, num_points, p.out_x * p.out_y * p.out_z,
            c, p.mode, grad_in.mutable_data_ptr<scalar_t>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return grad_in;
}

} // namespace kernels
} // namespace mmops

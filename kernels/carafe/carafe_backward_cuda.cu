// CUDA backward of carafe: two gathers (no atomics, deterministic), one
// thread per gradient value.
//
// grad_features: a feature pixel sums grad_output * mask over the s x s output
// blocks of the k x k source pixels around it (carafe_math::grad_feature_at);
// lanes are consecutive w, whose output blocks are adjacent: the reads of a
// warp cover a few contiguous rows (the group's masks stay in L2). grad_masks:
// a mask value sums grad_output * feature over the channels of its group;
// lanes are consecutive output pixels, so both reads are coalesced in every
// channel.

#include "carafe/carafe_cuda.cuh"
#include "carafe/carafe_kernels.h"
#include "carafe/carafe_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace mmops {
namespace kernels {
namespace {

using carafe_math::Geometry;

constexpr int kThreads = 256;

struct BackwardShape {
  int64_t channels, per_group, mask_channels;
};

template <typename scalar_t, typename acc_t>
__global__ void grad_features_kernel(const scalar_t* __restrict__ grad_out, const scalar_t* __restrict__ mask,
                                     scalar_t* __restrict__ grad_feat, Geometry g, BackwardShape s, int64_t total) {
  const int64_t in_plane = g.height * g.width, plane = g.out_plane();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t nc = i / in_plane, hw = i % in_plane;
    const int64_t n = nc / s.channels, group = nc % s.channels / s.per_group;
    const scalar_t* m = mask + (n * s.mask_channels + group * g.taps()) * plane;
    grad_feat[i] = static_cast<scalar_t>(
        carafe_math::grad_feature_at<acc_t>(grad_out + nc * plane, m, g, hw / g.width, hw % g.width));
  }
}

// A block: 32 output pixels (lanes) x 8 taps (warps) of one group; blocks run
// tap-chunk fastest, so the blocks in flight share their grad_output reads in
// L1 / L2 and grad_output is streamed from memory about once.
constexpr int kMaskPixels = 32;
constexpr int kMaskTaps = 8;

struct MaskGrid {
  int64_t tap_chunks, tiles, blocks;
};

template <typename scalar_t, typename acc_t>
__global__ void grad_masks_kernel(const scalar_t* __restrict__ grad_out, const scalar_t* __restrict__ feat,
                                  scalar_t* __restrict__ grad_mask, Geometry g, BackwardShape s, MaskGrid grid) {
  const int64_t in_plane = g.height * g.width, plane = g.out_plane();
  for (int64_t b = blockIdx.x; b < grid.blocks; b += gridDim.x) {
    const int64_t chunk = b % grid.tap_chunks, tile = b / grid.tap_chunks % grid.tiles;
    const int64_t ng = b / grid.tap_chunks / grid.tiles; // n * G + group
    const int64_t q = tile * kMaskPixels + threadIdx.x, tap = chunk * kMaskTaps + threadIdx.y;
    if (q >= plane || tap >= g.taps()) {
      continue;
    }
    const int64_t groups = s.mask_channels / g.taps();
    const int64_t c0 = (ng / groups) * s.channels + (ng % groups) * s.per_group;
    grad_mask[(ng * g.taps() + tap) * plane + q] = static_cast<scalar_t>(carafe_math::grad_mask_at<acc_t>(
        grad_out + c0 * plane, feat + c0 * in_plane, s.per_group, g, tap, q / g.out_width, q % g.out_width));
  }
}

} // namespace

std::tuple<at::Tensor, at::Tensor> carafe_backward_cuda(const at::Tensor& grad_output_, const at::Tensor& features_,
                                                        const at::Tensor& masks_, const CarafeParams& params) {
  c10::cuda::CUDAGuard device_guard(features_.device());
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor features = features_.contiguous();
  const at::Tensor masks = masks_.contiguous();
  at::Tensor grad_features = at::empty(features.sizes(), features.options());
  at::Tensor grad_masks = at::empty(masks.sizes(), masks.options());
  if (grad_features.numel() == 0 || grad_masks.numel() == 0) {
    return {grad_features.zero_(), grad_masks.zero_()}; // no channels or no pixels: zero gradients
  }
  const Geometry g =
      carafe_math::make_geometry(features.size(2), features.size(3), params.kernel_size, params.scale_factor);
  const BackwardShape s{features.size(1), features.size(1) / params.group_size, masks.size(1)};
  MaskGrid mask_grid{};
  mask_grid.tap_chunks = (g.taps() + kMaskTaps - 1) / kMaskTaps;
  mask_grid.tiles = (g.out_plane() + kMaskPixels - 1) / kMaskPixels;
  mask_grid.blocks = masks.size(0) * params.group_size * mask_grid.tiles * mask_grid.tap_chunks; // < 2 * numel
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, features.scalar_type(), "mmops::carafe backward (CUDA)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const int64_t nf = grad_features.numel();
        grad_features_kernel<scalar_t, acc_t>
            <<<carafe_cuda::grid_of((nf + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
                grad_output.const_data_ptr<scalar_t>(), masks.const_data_ptr<scalar_t>(),
                grad_features.mutable_data_ptr<scalar_t>(), g, s, nf);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        grad_masks_kernel<scalar_t, acc_t>
            <<<carafe_cuda::grid_of(mask_grid.blocks), dim3(kMaskPixels, kMaskTaps), 0, stream>>>(
                grad_output.const_data_ptr<scalar_t>(), features.const_data_ptr<scalar_t>(),
                grad_masks.mutable_data_ptr<scalar_t>(), g, s, mask_grid);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return {grad_features, grad_masks};
}

} // namespace kernels
} // namespace mmops

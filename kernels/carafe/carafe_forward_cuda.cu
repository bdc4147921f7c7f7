// CUDA forward of carafe, on NCHW tensors (no transposes).
//
// A block owns a tile of 32 consecutive output pixels (the flattened Ho * Wo
// plane of one image) and a chunk of 32 channels. For each channel group the
// chunk touches it stages the group's k * k mask values of its pixels in
// shared memory (one coalesced read per tap, as float for half/bfloat16), then
// each of its 8 warps computes whole channels: a warp's 32 lanes are 32
// consecutive pixels, so mask, feature (source pixels ho / s, wo / s are
// consecutive too) and output accesses are coalesced, and the masks are read
// from global memory once per chunk instead of once per channel. Blocks run
// chunk-fastest, so the chunks of one tile reuse its masks from L2.

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

constexpr int kTilePixels = 32; // output pixels of a block: the lanes of a warp
constexpr int kWarps = 8;       // warps of a block, each on its own channels
constexpr int64_t kChunk = 32;  // channels of a block

__device__ inline int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

__device__ inline int64_t max64(int64_t a, int64_t b) {
  return a > b ? a : b;
}

struct ForwardShape {
  int64_t channels, per_group, mask_channels;
  int64_t tiles, chunks, blocks;
};

// Stages the k * k mask values of one group for the block's pixels: tile[tap][lane].
template <typename scalar_t, typename acc_t>
__device__ void stage_masks(acc_t* tile, const scalar_t* __restrict__ mask_group, const Geometry& g, int64_t q,
                            bool active) {
  const int64_t plane = g.out_plane();
  for (int64_t tap = threadIdx.y; tap < g.taps(); tap += blockDim.y) {
    tile[tap * kTilePixels + threadIdx.x] = active ? static_cast<acc_t>(mask_group[tap * plane + q]) : acc_t(0);
  }
}

template <typename scalar_t, typename acc_t>
__global__ void forward_kernel(const scalar_t* __restrict__ feat, const scalar_t* __restrict__ mask,
                               scalar_t* __restrict__ out, Geometry g, ForwardShape s) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  acc_t* tile = reinterpret_cast<acc_t*>(shared_bytes);
  const int64_t plane = g.out_plane(), in_plane = g.height * g.width;
  for (int64_t b = blockIdx.x; b < s.blocks; b += gridDim.x) {
    const int64_t chunk = b % s.chunks, t = b / s.chunks % s.tiles, n = b / s.chunks / s.tiles;
    const int64_t q = t * kTilePixels + threadIdx.x;
    const bool active = q < plane;
    const int64_t ho = active ? q / g.out_width : 0, wo = active ? q % g.out_width : 0;
    const int64_t c_begin = chunk * kChunk, c_end = min64(c_begin + kChunk, s.channels);
    for (int64_t group = c_begin / s.per_group; group * s.per_group < c_end; ++group) {
      stage_masks<scalar_t, acc_t>(tile, mask + (n * s.mask_channels + group * g.taps()) * plane, g, q, active);
      __syncthreads();
      const int64_t lo = max64(c_begin, group * s.per_group);
      const int64_t hi = min64(c_end, (group + 1) * s.per_group);
      for (int64_t c = lo + threadIdx.y; active && c < hi; c += blockDim.y) {
        const int64_t nc = n * s.channels + c;
        out[nc * plane + q] = static_cast<scalar_t>(
            carafe_math::output_at<acc_t>(feat + nc * in_plane, tile + threadIdx.x, kTilePixels, g, ho, wo));
      }
      __syncthreads(); // the tile is restaged for the next group
    }
  }
}

} // namespace

at::Tensor carafe_forward_cuda(const at::Tensor& features_, const at::Tensor& masks_, const CarafeParams& params) {
  c10::cuda::CUDAGuard device_guard(features_.device());
  const at::Tensor features = features_.contiguous();
  const at::Tensor masks = masks_.contiguous();
  at::Tensor output = at::empty({features.size(0), features.size(1), masks.size(2), masks.size(3)}, features.options());
  if (output.numel() == 0) {
    return output;
  }
  const Geometry g =
      carafe_math::make_geometry(features.size(2), features.size(3), params.kernel_size, params.scale_factor);
  ForwardShape s{};
  s.channels = features.size(1);
  s.per_group = s.channels / params.group_size;
  s.mask_channels = masks.size(1);
  s.tiles = (g.out_plane() + kTilePixels - 1) / kTilePixels;
  s.chunks = (s.channels + kChunk - 1) / kChunk;
  s.blocks = features.size(0) * s.tiles * s.chunks; // <= numel(output): no overflow
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, features.scalar_type(), "mmops::carafe (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const size_t shared = static_cast<size_t>(g.taps()) * kTilePixels * sizeof(acc_t); // <= 31 KB (k <= 11)
    forward_kernel<scalar_t, acc_t><<<carafe_cuda::grid_of(s.blocks), dim3(kTilePixels, kWarps), shared, stream>>>(
        features.const_data_ptr<scalar_t>(), masks.const_data_ptr<scalar_t>(), output.mutable_data_ptr<scalar_t>(), g,
        s);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return output;
}

} // namespace kernels
} // namespace mmops

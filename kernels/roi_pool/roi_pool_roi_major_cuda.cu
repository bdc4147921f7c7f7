// CUDA forward of roi_pool for double: the roi-major kernel on a channels-last
// copy of the input (one block per roi and 32 channels; a lane holds 2
// channels). float, half and bfloat16 use the tiled kernels
// (roi_pool_tiled_cuda.cu), whose shared tile and keys hold floats. A roi whose batch
// index is out of range, or whose box is not finite, pools zeros (argmax -1).

#include "common/cuda_helpers.cuh"
#include "common/layout.h"
#include "roi_pool/roi_pool_cuda.cuh"
#include "roi_pool/roi_pool_kernels.h"
#include "roi_pool/roi_pool_math.h"

#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>

#include <cstdint>
#include <type_traits>

namespace mmops {
namespace kernels {
namespace {

using namespace roi_pool_math;
using cuda_helpers::channel_vector;
using cuda_helpers::load_readonly;
using cuda_helpers::Pack;

// The maximum of bin (hr, wr) over the columns of the lane's column group g
// (wr.begin + g, wr.begin + g + G, ... with G = VEC) for the lane's VEC
// channels; empty (index -1) when the lane is not active.
template <int VEC, typename acc_t, typename PackT>
__device__ __forceinline__ void scan_bin(SeededMax<acc_t> (&m)[VEC], const PackT* pixels, bool active, Range hr,
                                         Range wr, int group, int64_t width, int64_t stride, int32_t w32) {
  constexpr int G = VEC; // pixel columns per warp load
  const int32_t h0 = static_cast<int32_t>(hr.begin), h1 = static_cast<int32_t>(hr.end);
  const int32_t w0 = static_cast<int32_t>(wr.begin) + group, w1 = static_cast<int32_t>(wr.end);
#pragma unroll
  for (int i = 0; i < VEC; ++i) {
    m[i].best = acc_t(0);
    m[i].index = -1;
  }
  if (active && h0 < h1 && w0 < w1) {
    const int32_t first = h0 * w32 + w0;
    const PackT* row = pixels + static_cast<int64_t>(first) * stride;
    const PackT v0 = load_readonly(row);
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      m[i].best = static_cast<acc_t>(v0.v[i]);
      m[i].index = first;
    }
    const int64_t row_step = width * stride, column_step = G * stride;
    int32_t row_pixel = first;
    for (int32_t h = h0; h < h1; ++h, row += row_step, row_pixel += w32) {
      const PackT* q = row;
      int32_t pixel = row_pixel;
#pragma unroll 4
      for (int32_t w = w0; w < w1; w += G, q += column_step, pixel += G) {
        const PackT v = load_readonly(q);
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          m[i].update(static_cast<acc_t>(v.v[i]), pixel);
        }
      }
    }
  }
}

// Merges the column groups' maxima: lanes kLanes, 2 kLanes, ... apart hold
// the same channels. Every lane ends with the bin's maximum of its channels.
template <int VEC, typename acc_t>
__device__ __forceinline__ void merge_column_groups(SeededMax<acc_t> (&m)[VEC]) {
  constexpr int kLanes = 32 / VEC;
#pragma unroll
  for (int offset = kLanes; offset < 32; offset *= 2) {
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      const acc_t ob = __shfl_xor_sync(0xffffffffu, m[i].best, offset);
      const int32_t oi = __shfl_xor_sync(0xffffffffu, m[i].index, offset);
      if (earlier_max(ob, oi, m[i].best, m[i].index)) {
        m[i].best = ob;
        m[i].index = oi;
      }
    }
  }
}

// A block handles one roi and kChunk (32) channels. Each lane holds VEC
// consecutive channels (one 16- or 8-byte load per pixel); the G = VEC groups
// of 32 / VEC lanes of a warp take the columns of a bin round-robin (group g:
// columns begin + g, begin + g + G, ...), so that one warp load covers G
// pixels x 32 channels, and the groups' maxima are merged with shuffles at the
// end of the bin. The block's channel chunk stays at 32 channels so that the
// input slice that all rois of a chunk read at the same time stays small
// enough for L2.
template <typename scalar_t, int VEC, bool kArgmax>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const scalar_t* __restrict__ input,                               // [N, H, W, C]
                   const scalar_t* __restrict__ rois, scalar_t* __restrict__ output, // [K, C, PH, PW]
                   int32_t* __restrict__ argmax, int64_t batch, int64_t channels, int64_t height, int64_t width,
                   RoIPoolParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  using PackT = Pack<scalar_t, VEC>;
  constexpr int kLanes = 32 / VEC; // lanes per pixel
  static_assert(kLanes * VEC == kChunk, "a warp load covers the block's channels");
  __shared__ Tile<acc_t> tile;

  const int64_t k = blockIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kChunk;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int group = lane / kLanes, cl0 = (lane % kLanes) * VEC; // column group, first channel
  const int64_t bins = p.pooled_height * p.pooled_width;
  const int64_t chunk_channels = smaller(kChunk, channels - c0);
  const scalar_t* roi = rois + k * 5;
  const PoolBox<acc_t> box = make_pool_box<acc_t>(static_cast<acc_t>(roi[1]), static_cast<acc_t>(roi[2]),
                                                  static_cast<acc_t>(roi[3]), static_cast<acc_t>(roi[4]),
                                                  static_cast<acc_t>(p.spatial_scale), p.pooled_height, p.pooled_width);
  const int64_t b = box.valid ? batch_index(static_cast<acc_t>(roi[0]), batch) : -1;
  const int64_t c = c0 + cl0;
  const bool active = b >= 0 && c < channels; // channels % VEC == 0: all VEC or none
  const int64_t stride = channels / VEC;      // packs per pixel
  const PackT* pixels =
      reinterpret_cast<const PackT*>(input + (b > 0 ? b : 0) * height * width * channels + (active ? c : 0));
  const int32_t w32 = static_cast<int32_t>(width); // H * W < 2^31 (checked)

  for (int64_t bin0 = 0; bin0 < bins; bin0 += kBinChunk) {
    const int64_t chunk_bins = smaller(kBinChunk, bins - bin0);
    for (int bl = warp; bl < chunk_bins; bl += kWarps) {
      const int64_t ph = (bin0 + bl) / p.pooled_width, pw = (bin0 + bl) % p.pooled_width;
      const Range hr = bin_range(box.start_h, box.bin_h, ph, height);
      const Range wr = bin_range(box.start_w, box.bin_w, pw, width);
      SeededMax<acc_t> m[VEC];
      scan_bin(m, pixels, active, hr, wr, group, width, stride, w32);
      merge_column_groups(m);
      if (group == 0) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          tile.value[tile.at(bl, cl0 + i)] = m[i].index < 0 ? acc_t(0) : m[i].best;
          if (kArgmax) {
            tile.argmax[tile.at(bl, cl0 + i)] = m[i].index;
          }
        }
      }
    }
    __syncthreads();
    write_chunk<kArgmax>(tile, output, argmax, k, c0, channels, bins, bin0, chunk_channels, chunk_bins);
    __syncthreads();
  }
}

} // namespace

void roi_pool_roi_major_forward(const at::Tensor& input_, const at::Tensor& rois, const RoIPoolParams& params,
                                at::Tensor& output, at::Tensor* argmax, cudaStream_t stream) {
  TORCH_INTERNAL_ASSERT(input_.scalar_type() == at::kDouble, "roi_pool_roi_major_forward is for double");
  using scalar_t = double;
  const at::Tensor input = channels_last_cuda(input_);
  const int64_t num_rois = rois.size(0), channels = input.size(1);
  constexpr int kVec = channel_vector<scalar_t>();
  const bool aligned = reinterpret_cast<uintptr_t>(input.const_data_ptr()) % (sizeof(scalar_t) * kVec) == 0;
  const bool vectorized = kVec > 1 && channels % kVec == 0 && aligned;
  auto launch = [&](auto vec_tag, auto arg_tag) {
    constexpr int VEC = decltype(vec_tag)::value;
    constexpr bool kArg = decltype(arg_tag)::value;
    const dim3 grid(num_rois, (channels + kChunk - 1) / kChunk);
    TORCH_CHECK(grid.y <= 65535, "mmops::roi_pool: too many channels (", channels, ")");
    forward_kernel<scalar_t, VEC, kArg><<<grid, kThreads, 0, stream>>>(
        input.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(), output.mutable_data_ptr<scalar_t>(),
        kArg ? argmax->mutable_data_ptr<int32_t>() : nullptr, input.size(0), channels, input.size(2), input.size(3),
        params);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  using Yes = std::true_type;
  using No = std::false_type;
  const bool with_argmax = argmax != nullptr;
  if (vectorized) {
    with_argmax ? launch(std::integral_constant<int, kVec>{}, Yes{})
                : launch(std::integral_constant<int, kVec>{}, No{});
  } else {
    with_argmax ? launch(std::integral_constant<int, 1>{}, Yes{}) : launch(std::integral_constant<int, 1>{}, No{});
  }
}

} // namespace kernels
} // namespace mmops

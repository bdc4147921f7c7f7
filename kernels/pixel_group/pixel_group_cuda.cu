// pixel_group on CUDA, equal to the CPU's sequential flood:
//   1. the labels read as 0 where outside [0, R) (guarded, no error);
//   2. every label's mean kernel embedding, summed in raster order like the CPU:
//      the pixels grouped by label (common/index_segments.h), then one thread per
//      (label, channel) adds them in order (a float sum is only reproducible in
//      one order; the loads of 8 pixels at a time overlap);
//   3. the flood, one block layer by layer (common/grid_flood_cuda.cuh);
//   4. each label's mean score and count, as step 2 on the grown labels.

#include "common/grid_flood_cuda.cuh"
#include "common/index_segments.h"
#include "pixel_group/pixel_group_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>

namespace mmops {
namespace kernels {
namespace {

using grid_flood::kThreads;
constexpr int kMeanThreads = 128;
constexpr int kBatch = 8; // loads in flight per thread

// out[l * C + c] = mean over the pixels of label l (order[offsets[l], offsets[l + 1]),
// raster order) of values[pixel * C + c], summed in that order; 0 for no pixel.
template <typename scalar_t, typename acc_t, typename out_t>
__global__ void label_means_kernel(const scalar_t* __restrict__ values, int64_t channels,
                                   const int64_t* __restrict__ order, const int64_t* __restrict__ offsets,
                                   int64_t total, out_t* __restrict__ out) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= total) {
    return;
  }
  const int64_t l = idx / channels, c = idx % channels;
  const int64_t begin = offsets[l], end = offsets[l + 1];
  acc_t sum = 0;
  for (int64_t j = begin; j < end; j += kBatch) {
    acc_t v[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      v[k] = j + k < end ? static_cast<acc_t>(values[order[j + k] * channels + c]) : acc_t(0);
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      if (j + k < end) {
        sum += v[k];
      }
    }
  }
  const int64_t n = end - begin;
  out[idx] = static_cast<out_t>(n > 0 ? sum / pixel_group_math::counted<acc_t>(n) : acc_t(0));
}

template <typename scalar_t, typename acc_t, typename out_t>
void label_means(const at::Tensor& values, int64_t channels, const IndexSegments& segments, int64_t regions,
                 out_t* out) {
  const int64_t total = regions * channels;
  if (total == 0) {
    return;
  }
  const int64_t blocks = (total + kMeanThreads - 1) / kMeanThreads;
  label_means_kernel<scalar_t, acc_t, out_t><<<blocks, kMeanThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      values.const_data_ptr<scalar_t>(), channels, segments.order.const_data_ptr<int64_t>(),
      segments.offsets.const_data_ptr<int64_t>(), total, out);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kThreads)
    pixel_group_flood_kernel(grid_flood::Grid grid, grid_flood::Buffers buffers, const uint8_t* __restrict__ mask,
                             const scalar_t* __restrict__ embedding, int64_t channels, const acc_t* __restrict__ kv,
                             acc_t threshold_square, int32_t* seeds, int32_t* spare,
                             const int32_t* __restrict__ seed_count) {
  const int32_t* labels = buffers.labels;
  const auto near = [&](int32_t p, int32_t q) {
    return mask[q] != 0 && pixel_group_math::within_distance(kv + labels[p] * channels, embedding + q * channels,
                                                             channels, threshold_square);
  };
  grid_flood::flood_round(grid, buffers, seeds, spare, *seed_count, nullptr, near);
}

// keys [1, pixels]: the label where > 0, else -1 (no segment: label 0 is not summed).
at::Tensor segment_keys(const at::Tensor& labels) {
  return at::where(labels.gt(0), labels, -1).view({1, labels.numel()});
}

// Grows labels in place, writes scores; returns the grown labels' segments.
template <typename scalar_t>
IndexSegments pixel_group_kernel(const at::Tensor& score, const at::Tensor& mask, const at::Tensor& embedding,
                                 const at::Tensor& contour, const PixelGroupParams& params, at::Tensor& labels,
                                 at::Tensor& scores) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t height = labels.size(0), width = labels.size(1), pixels = height * width;
  const int64_t channels = embedding.size(2), regions = params.kernel_region_num;
  if (channels > 0) { // mmcv queues nothing when C == 0
    const IndexSegments kernels = group_by_index(segment_keys(labels), regions);
    at::Tensor kv = at::empty({regions * channels}, embedding.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
    label_means<scalar_t, acc_t, acc_t>(embedding, channels, kernels, regions, kv.mutable_data_ptr<acc_t>());
    grid_flood::Lists lists = grid_flood::make_lists(contour.ne(0).logical_and_(labels.gt(0)).view({pixels}));
    const grid_flood::Grid grid{
        static_cast<int32_t>(height), static_cast<int32_t>(width), {0, 0, -1, 1}, {-1, 1, 0, 0}};
    const grid_flood::Buffers buffers{labels.mutable_data_ptr<int32_t>(), lists.claims()};
    const acc_t threshold = static_cast<acc_t>(params.distance_threshold);
    pixel_group_flood_kernel<scalar_t, acc_t><<<1, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        grid, buffers, mask.const_data_ptr<uint8_t>(), embedding.const_data_ptr<scalar_t>(), channels,
        kv.const_data_ptr<acc_t>(), threshold * threshold, lists.list(0), lists.list(1), lists.count());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  IndexSegments grown = group_by_index(segment_keys(labels), regions);
  label_means<scalar_t, acc_t, scalar_t>(score, 1, grown, regions, scores.mutable_data_ptr<scalar_t>());
  return grown;
}

} // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> pixel_group_cuda(const at::Tensor& score, const at::Tensor& mask,
                                                                const at::Tensor& embedding,
                                                                const at::Tensor& kernel_label,
                                                                const at::Tensor& kernel_contour,
                                                                const PixelGroupParams& params) {
  const c10::cuda::CUDAGuard guard(score.device());
  const int64_t regions = params.kernel_region_num;
  const at::Tensor in = kernel_label.contiguous();
  at::Tensor labels = at::where(in.ge(0).logical_and_(in.lt(regions)), in, 0).contiguous();
  at::Tensor scores = at::zeros({regions}, score.options());
  if (labels.numel() == 0) {
    return {labels, scores, at::zeros({regions}, score.options().dtype(at::kLong))};
  }
  const at::Tensor s = score.contiguous(), e = embedding.contiguous();
  const at::Tensor m = mask.contiguous().view(at::kByte), c = kernel_contour.contiguous().view(at::kByte);
  IndexSegments grown;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, score.scalar_type(), "pixel_group_cuda",
                                  [&] { grown = pixel_group_kernel<scalar_t>(s, m, e, c, params, labels, scores); });
  // the pixel counts: the segment lengths of the grown labels (label 0: none)
  const at::Tensor counts = grown.offsets.slice(0, 1).sub(grown.offsets.slice(0, 0, regions));
  return {labels, scores, counts};
}

} // namespace kernels
} // namespace mmops

// pixel_group on the CPU: the sequential FIFO flood (pixel_group_kernels.h), the
// definition the CUDA kernel reproduces. One map, one queue: no threads.

#include "pixel_group/pixel_group_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <cstdint>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

// Neighbour order of mmcv's pixel_group: col - 1, col + 1, row - 1, row + 1.
constexpr int64_t kDy[4] = {0, 0, -1, 1};
constexpr int64_t kDx[4] = {-1, 1, 0, 0};

template <typename scalar_t>
void pixel_group_kernel(const at::Tensor& score, const at::Tensor& mask, const at::Tensor& embedding,
                        const at::Tensor& contour, const PixelGroupParams& params, at::Tensor& labels,
                        at::Tensor& scores, at::Tensor& counts) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t height = labels.size(0), width = labels.size(1), pixels = height * width;
  const int64_t channels = embedding.size(2), regions = params.kernel_region_num;
  const scalar_t* s = score.const_data_ptr<scalar_t>();
  const scalar_t* e = embedding.const_data_ptr<scalar_t>();
  const uint8_t* m = mask.const_data_ptr<uint8_t>();
  const uint8_t* ct = contour.const_data_ptr<uint8_t>();
  int32_t* lab = labels.mutable_data_ptr<int32_t>();

  // mean kernel embedding of every label, summed in raster order (as mmcv);
  // mmcv queues nothing when C == 0 (its scan loop does not run)
  std::vector<acc_t> kv(static_cast<size_t>(regions * channels), acc_t(0));
  std::vector<int64_t> area(static_cast<size_t>(regions), 0);
  std::vector<int64_t> queue;
  for (int64_t p = 0; p < pixels && channels > 0; ++p) {
    const int32_t l = lab[p];
    if (l <= 0) {
      continue;
    }
    for (int64_t c = 0; c < channels; ++c) {
      kv[l * channels + c] += static_cast<acc_t>(e[p * channels + c]);
    }
    ++area[l];
    if (ct[p] != 0) {
      queue.push_back(p);
    }
  }
  for (int64_t l = 0; l < regions; ++l) {
    for (int64_t c = 0; c < channels; ++c) {
      kv[l * channels + c] /= pixel_group_math::counted<acc_t>(area[l]);
    }
  }
  const acc_t threshold = static_cast<acc_t>(params.distance_threshold);
  const acc_t threshold_square = threshold * threshold;
  for (size_t head = 0; head < queue.size(); ++head) {
    const int64_t p = queue[head];
    const int32_t l = lab[p];
    const int64_t y = p / width, x = p % width;
    for (int d = 0; d < 4; ++d) {
      const int64_t ny = y + kDy[d], nx = x + kDx[d];
      if (ny < 0 || ny >= height || nx < 0 || nx >= width) {
        continue;
      }
      const int64_t q = ny * width + nx;
      if (m[q] == 0 || lab[q] > 0 ||
          !pixel_group_math::within_distance(&kv[l * channels], e + q * channels, channels, threshold_square)) {
        continue;
      }
      lab[q] = l;
      queue.push_back(q);
    }
  }
  // mean score and pixel count of every label > 0, in raster order
  std::vector<acc_t> sum(static_cast<size_t>(regions), acc_t(0));
  int64_t* n = counts.mutable_data_ptr<int64_t>();
  for (int64_t p = 0; p < pixels; ++p) {
    const int32_t l = lab[p];
    if (l > 0) {
      sum[l] += static_cast<acc_t>(s[p]);
      ++n[l];
    }
  }
  scalar_t* mean = scores.mutable_data_ptr<scalar_t>();
  for (int64_t l = 0; l < regions; ++l) {
    mean[l] = static_cast<scalar_t>(n[l] > 0 ? sum[l] / pixel_group_math::counted<acc_t>(n[l]) : acc_t(0));
  }
}

} // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> pixel_group_cpu(const at::Tensor& score, const at::Tensor& mask,
                                                               const at::Tensor& embedding,
                                                               const at::Tensor& kernel_label,
                                                               const at::Tensor& kernel_contour,
                                                               const PixelGroupParams& params) {
  at::Tensor labels = kernel_label.contiguous().clone();
  at::Tensor scores = at::empty({params.kernel_region_num}, score.options());
  at::Tensor counts = at::zeros({params.kernel_region_num}, score.options().dtype(at::kLong));
  if (labels.numel() == 0) {
    scores.zero_();
    return {labels, scores, counts};
  }
  const at::Tensor s = score.contiguous(), e = embedding.contiguous();
  const at::Tensor m = mask.contiguous().view(at::kByte), c = kernel_contour.contiguous().view(at::kByte);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, score.scalar_type(), "pixel_group_cpu",
                                  [&] { pixel_group_kernel<scalar_t>(s, m, e, c, params, labels, scores, counts); });
  return {labels, scores, counts};
}

} // namespace kernels
} // namespace mmops

// contour_expand on the CPU: the sequential FIFO flood (contour_expand_kernels.h),
// the definition the CUDA kernel reproduces. One map, one queue: no threads.

#include "contour_expand/contour_expand_kernels.h"

#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

// Neighbour order of mmcv's contour_expand: row - 1, row + 1, col - 1, col + 1.
constexpr int64_t kDy[4] = {-1, 1, 0, 0};
constexpr int64_t kDx[4] = {0, 0, -1, 1};

} // namespace

at::Tensor contour_expand_cpu(const at::Tensor& kernel_mask, const at::Tensor& internal_kernel_label,
                              const ContourExpandParams& params) {
  const int64_t kernels = kernel_mask.size(0), height = kernel_mask.size(1), width = kernel_mask.size(2);
  const int64_t pixels = height * width;
  at::Tensor out = at::zeros({height, width}, internal_kernel_label.options().dtype(at::kInt));
  if (pixels == 0) {
    return out;
  }
  // bool and uint8 masks: one byte per pixel, nonzero = inside
  const at::Tensor mask = kernel_mask.contiguous().view(at::kByte);
  const at::Tensor input = internal_kernel_label.contiguous();
  const uint8_t* m = mask.const_data_ptr<uint8_t>();
  const int32_t* in = input.const_data_ptr<int32_t>();
  int32_t* lab = out.mutable_data_ptr<int32_t>();

  const int32_t max_label = *std::max_element(in, in + pixels);
  std::vector<int64_t> area(static_cast<size_t>(std::max(max_label, 0)) + 1, 0);
  for (int64_t p = 0; p < pixels; ++p) {
    area[in[p]] += in[p] > 0 ? 1 : 0;
  }
  std::vector<int64_t> queue;
  for (int64_t p = 0; p < pixels; ++p) {
    if (in[p] > 0 && area[in[p]] >= params.min_kernel_area) {
      lab[p] = in[p];
      queue.push_back(p);
    }
  }
  // mmcv reads kernel_mask[0] in every round; after the first, nothing is left to claim
  std::vector<int64_t> planes;
  if (params.progressive) {
    for (int64_t k = kernels - 2; k >= 0; --k) {
      planes.push_back(k);
    }
  } else if (kernels >= 2) {
    planes.push_back(0);
  }
  std::vector<int64_t> edges;
  for (const int64_t k : planes) {
    const uint8_t* plane = m + k * pixels;
    edges.clear();
    for (size_t head = 0; head < queue.size(); ++head) {
      const int64_t p = queue[head];
      const int64_t y = p / width, x = p % width;
      bool claimed = false;
      for (int d = 0; d < 4; ++d) {
        const int64_t ny = y + kDy[d], nx = x + kDx[d];
        if (ny < 0 || ny >= height || nx < 0 || nx >= width) {
          continue;
        }
        const int64_t q = ny * width + nx;
        if (plane[q] == 0 || lab[q] > 0) {
          continue;
        }
        lab[q] = lab[p];
        queue.push_back(q);
        claimed = true;
      }
      if (!claimed) {
        edges.push_back(p);
      }
    }
    queue.swap(edges);
  }
  return out;
}

} // namespace kernels
} // namespace mmops

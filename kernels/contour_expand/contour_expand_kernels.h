#pragma once
// Device kernels of contour_expand (PSENet's progressive scale expansion, mmcv's
// contour_expand). Callers (src/contour_expand) validate the arguments first;
// these functions only compute.

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mmops {

struct ContourExpandParams {
  int64_t min_kernel_area; // labels covering fewer pixels are dropped
  int64_t kernel_num;      // labels lie in [0, kernel_num]
  bool progressive;        // PSENet's rounds (else mmcv's single flood into kernel_mask[0])
};

namespace kernels {

// kernel_mask [K, H, W] uint8 or bool, internal_kernel_label [H, W] int32 with
// values in [0, kernel_num] (the CPU kernel relies on it; the CUDA kernel reads
// a value outside as 0). Returns the int32 [H, W] label map:
//   seeds: the pixels of every label > 0 covering >= min_kernel_area pixels;
//   mmcv (progressive = false): when K >= 2, one FIFO flood from the seeds (raster
//     order) into the unlabelled pixels with kernel_mask[0] != 0;
//   progressive: rounds k = K - 2, ..., 0, each a FIFO flood into kernel_mask[k]
//     from the previous round's edge pixels (popped pixels that claimed nothing),
//     the first round from the seeds.
// Neighbours are visited in the order (row - 1), (row + 1), (col - 1), (col + 1).
at::Tensor contour_expand_cpu(const at::Tensor& kernel_mask, const at::Tensor& internal_kernel_label,
                              const ContourExpandParams& params);

#ifdef MMOPS_WITH_CUDA
at::Tensor contour_expand_cuda(const at::Tensor& kernel_mask, const at::Tensor& internal_kernel_label,
                               const ContourExpandParams& params);
#endif

} // namespace kernels
} // namespace mmops

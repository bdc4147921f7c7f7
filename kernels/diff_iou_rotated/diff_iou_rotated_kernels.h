#pragma once
// Device kernels of diff_iou_rotated_2d / _3d. Callers (src/diff_iou_rotated)
// validate the arguments first; these functions only compute.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>

namespace mmops {

struct DiffIouRotatedParams {
  int64_t columns; // 5: (x, y, w, h, alpha); 7: (x, y, z, w, h, l, alpha)
};

namespace kernels {

// [B, N] IoU of the aligned pairs box1[b, n], box2[b, n] ([B, N, columns]
// each), in the boxes' dtype; computed in float (double for double).
at::Tensor diff_iou_rotated_forward_cpu(const at::Tensor& box1, const at::Tensor& box2, const DiffIouRotatedParams& p);

// (grad_box1, grad_box2), [B, N, columns] each, for grad_output [B, N].
std::tuple<at::Tensor, at::Tensor> diff_iou_rotated_backward_cpu(const at::Tensor& grad_output, const at::Tensor& box1,
                                                                 const at::Tensor& box2, const DiffIouRotatedParams& p);

#ifdef MMOPS_WITH_CUDA
at::Tensor diff_iou_rotated_forward_cuda(const at::Tensor& box1, const at::Tensor& box2, const DiffIouRotatedParams& p);

std::tuple<at::Tensor, at::Tensor> diff_iou_rotated_backward_cuda(const at::Tensor& grad_output, const at::Tensor& box1,
                                                                  const at::Tensor& box2,
                                                                  const DiffIouRotatedParams& p);
#endif

} // namespace kernels
} // namespace mmops

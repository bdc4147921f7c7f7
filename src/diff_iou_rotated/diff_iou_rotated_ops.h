#pragma once
// Internal pieces of diff_iou_rotated_2d / _3d shared by the registration,
// meta and autograd files: the checks and the dispatcher signatures.

#include "diff_iou_rotated/diff_iou_rotated_kernels.h"

#include <ATen/core/Tensor.h>

#include <tuple>

namespace mmops {

// Signatures of the schemas, for detail::op_handle (autograd and the C++ API).
using DiffIouRotatedFn = at::Tensor(const at::Tensor&, const at::Tensor&);
using DiffIouRotatedBackwardFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                    const at::Tensor&);

namespace detail {

// box1, box2: [B, N, columns] (columns 5 for 2D, 7 for 3D), one floating
// dtype and device, the same shape. Works on fake tensors (no data access).
DiffIouRotatedParams check_diff_iou_rotated(int64_t columns, const at::Tensor& box1, const at::Tensor& box2);

// The above plus grad_output: [B, N], the boxes' dtype and device.
DiffIouRotatedParams check_diff_iou_rotated_backward(int64_t columns, const at::Tensor& grad_output,
                                                     const at::Tensor& box1, const at::Tensor& box2);

} // namespace detail
} // namespace mmops

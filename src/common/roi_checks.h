#pragma once
// Validation shared by the roi pooling families (roi_align, roi_pool, and the
// rotated / 3D ones to come): the rois tensor, the backward's grad_output and
// the batch index held in rois[:, 0].

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mmops {
namespace detail {

// rois: a [K, 5] (batch_index, x1, y1, x2, y2) floating point tensor.
void check_rois_tensor(const char* op, const at::Tensor& rois);

// grad_output of a roi pooling backward: [K, C, out_h, out_w] with the dtype,
// device and row count of rois.
void check_roi_grad_output(const char* op, const at::Tensor& grad_output, const at::Tensor& rois);

// rois[:, 0] in [0, batch), when the index policy (common/index_policy.h) says so.
void check_roi_batch_indices(const char* op, const at::Tensor& rois, int64_t batch);

} // namespace detail
} // namespace mmops

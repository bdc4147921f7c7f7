#pragma once
// The order in which greedy NMS visits boxes, shared by the NMS families that
// sort on the device with plain ATen ops (nms_rotated, nms_quadri, nms_bev).

#include <ATen/core/Tensor.h>

namespace mmops {
namespace kernels {

// Indices [N] int64 sorting scores ([N], any floating dtype, any device) by
// decreasing value, NaN last, ties (-0 and +0 included) to the lower index.
at::Tensor descending_score_order(const at::Tensor& scores);

} // namespace kernels
} // namespace mmops

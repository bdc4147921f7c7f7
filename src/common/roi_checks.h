#pragma once
// Validation shared by the roi pooling families (roi_align, roi_pool, and the
// rotated / 3D ones to come): the rois tensor, the backward's grad_output and
// the batch index held in rois[:, 0].

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>
#include <c10/core/SymIntArrayRef.h>

#include <cstdint>
#include <string>

namespace mmops {
namespace detail {

// The largest out_h / out_w of a roi pooling op (output_size, and the pooled
// sides of a backward's grad_output): far above any model's (7, 14, 28), small
// enough that a roi's per-axis sample tables stay small (docs/ops/roi_*.md).
constexpr int64_t kMaxRoiOutputSide = 4096;

// The largest H or W of a feature map: the kernels index a map's rows and
// columns with int32.
constexpr int64_t kMaxRoiMapSide = (int64_t(1) << 31) - 1;

// output_size: 2 values (out_h, out_w) in [1, kMaxRoiOutputSide].
void check_roi_output_size(const char* op, c10::SymIntArrayRef output_size, const char* name = "output_size");

// The output [K, C, out_h, out_w] has fewer than 2^63 elements (checked once
// every size is concrete).
void check_roi_output_numel(const char* op, const c10::SymInt& rois, const c10::SymInt& channels,
                            c10::SymIntArrayRef output_size);

// A feature map's shape [N, C, H, W] given as a size argument (`what`, e.g.
// "input_shape"): sizes >= 0, H and W <= kMaxRoiMapSide, N * C * H * W
// representable (checked once concrete). For a tensor's sizes, only the H / W bound can fail.
void check_roi_map_shape(const char* op, const std::string& what, const c10::SymInt& n, const c10::SymInt& c,
                         const c10::SymInt& h, const c10::SymInt& w);

// rois: a [K, 5] (batch_index, x1, y1, x2, y2) floating point tensor.
void check_rois_tensor(const char* op, const at::Tensor& rois);

// rotated rois: a [K, 6] (batch_index, cx, cy, w, h, theta) floating point tensor.
void check_rotated_rois_tensor(const char* op, const at::Tensor& rois);

// grad_output of a roi pooling backward: [K, C, out_h, out_w] with the dtype,
// device and row count of rois, out_h and out_w <= kMaxRoiOutputSide.
void check_roi_grad_output(const char* op, const at::Tensor& grad_output, const at::Tensor& rois);

// rois[:, 0] in [0, batch), when the index policy (common/index_policy.h) says so.
void check_roi_batch_indices(const char* op, const at::Tensor& rois, int64_t batch);

} // namespace detail
} // namespace mmops

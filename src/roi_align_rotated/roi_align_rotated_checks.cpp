// Argument validation of roi_align_rotated, on every backend (the meta kernels
// run it too, so fake tensors raise the same errors).

#include "roi_align_rotated/roi_align_rotated_ops.h"

#include "common/check_utils.h"
#include "common/roi_checks.h"

#include <c10/core/SymInt.h>

#include <cmath>
#include <cstdint>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kOp = kRoIAlignRotatedOp;

// rois, scale, sampling ratio: what forward and backward share. The pooled
// size is -1 while it is symbolic (meta only).
RotatedRoiParams check_common(const at::Tensor& rois, double spatial_scale, int64_t sampling_ratio, bool aligned,
                              bool clockwise, const c10::SymInt& pooled_h, const c10::SymInt& pooled_w) {
  check_rotated_rois_tensor(kOp, rois);
  TORCH_CHECK(std::isfinite(spatial_scale) && spatial_scale > 0, kOp,
              "spatial_scale must be a positive finite number, but got ", spatial_scale);
  TORCH_CHECK(sampling_ratio >= 0, kOp, "sampling_ratio must be >= 0 (0 means adaptive), but got ", sampling_ratio);
  TORCH_CHECK(sampling_ratio <= roi_bilinear::kMaxGridSide, kOp, "sampling_ratio must be at most ",
              roi_bilinear::kMaxGridSide, " (samples per bin side, the cap of the adaptive grid), but got ",
              sampling_ratio);
  RotatedRoiParams p{};
  p.pooled_height = pooled_h.maybe_as_int().value_or(-1);
  p.pooled_width = pooled_w.maybe_as_int().value_or(-1);
  p.spatial_scale = spatial_scale;
  p.sampling_ratio = sampling_ratio;
  p.aligned = aligned;
  p.clamp_size = !aligned; // mmcv: legacy (unaligned) rois are at least 1 x 1
  p.clockwise = clockwise;
  p.num_orientations = 1;
  p.rotate_channels = false;
  return p;
}

} // namespace

RotatedRoiParams check_roi_align_rotated_forward(const at::Tensor& input, const at::Tensor& rois,
                                                 c10::SymIntArrayRef output_size, double spatial_scale,
                                                 int64_t sampling_ratio, bool aligned, bool clockwise) {
  TORCH_CHECK(input.dim() == 4, kOp, "expected input to be a 4-D tensor [N, C, H, W], but got a ", input.dim(),
              "-D tensor of shape ", shape_of(input));
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), kOp, "expected input to have a floating point dtype, but got ",
              input.scalar_type());
  check_roi_map_shape(kOp, "input", input.sym_size(0), input.sym_size(1), input.sym_size(2), input.sym_size(3));
  check_rotated_rois_tensor(kOp, rois);
  TORCH_CHECK(rois.scalar_type() == input.scalar_type(), kOp, "expected rois to have the dtype of input (",
              input.scalar_type(), "), but got ", rois.scalar_type());
  TORCH_CHECK(rois.device() == input.device(), kOp, "expected rois on the device of input (", input.device(),
              "), but got ", rois.device());
  check_roi_output_size(kOp, output_size);
  check_roi_output_numel(kOp, rois.sym_size(0), input.sym_size(1), output_size);
  return check_common(rois, spatial_scale, sampling_ratio, aligned, clockwise, output_size[0], output_size[1]);
}

RotatedRoiParams check_roi_align_rotated_backward(const at::Tensor& grad_output, const at::Tensor& rois,
                                                  c10::SymIntArrayRef input_shape, double spatial_scale,
                                                  int64_t sampling_ratio, bool aligned, bool clockwise) {
  check_rotated_rois_tensor(kOp, rois);
  TORCH_CHECK(input_shape.size() == 4, kOp, "expected input_shape to hold 4 values, but got ", input_shape.size());
  check_roi_map_shape(kOp, "input_shape", input_shape[0], input_shape[1], input_shape[2], input_shape[3]);
  check_roi_grad_output(kOp, grad_output, rois);
  TORCH_SYM_CHECK(grad_output.sym_size(1).sym_eq(input_shape[1]), kOp, "grad_output has ", grad_output.sym_size(1),
                  " channels but the input has ", input_shape[1]);
  TORCH_SYM_CHECK(grad_output.sym_size(2).sym_gt(0).sym_and(grad_output.sym_size(3).sym_gt(0)), kOp,
                  "expected out_h and out_w of grad_output to be positive, but got shape ", shape_of(grad_output));
  return check_common(rois, spatial_scale, sampling_ratio, aligned, clockwise, grad_output.sym_size(2),
                      grad_output.sym_size(3));
}

} // namespace detail
} // namespace mmops

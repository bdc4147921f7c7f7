// Argument validation of riroi_align_rotated, on every backend (the meta
// kernels run it too, so fake tensors raise the same errors).

#include "riroi_align_rotated/riroi_align_rotated_ops.h"

#include "common/check_utils.h"
#include "common/roi_checks.h"

#include <c10/core/SymInt.h>

#include <cmath>
#include <cstdint>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kOp = kRiRoIAlignRotatedOp;

// The largest num_orientations: far above ReDet's 8, small enough that the
// orientation arithmetic stays exact in float.
constexpr int64_t kMaxOrientations = 1024;

// rois, scale, samples, orientations: what forward and backward share. The
// pooled size is -1 while it is symbolic (meta only).
RotatedRoiParams check_common(const at::Tensor& rois, double spatial_scale, int64_t num_samples,
                              int64_t num_orientations, bool clockwise, const c10::SymInt& channels,
                              const char* channels_of, const c10::SymInt& pooled_h, const c10::SymInt& pooled_w) {
  check_rotated_rois_tensor(kOp, rois);
  TORCH_CHECK(std::isfinite(spatial_scale) && spatial_scale > 0, kOp,
              "spatial_scale must be a positive finite number, but got ", spatial_scale);
  TORCH_CHECK(num_samples >= 0, kOp, "num_samples must be >= 0 (0 means adaptive), but got ", num_samples);
  TORCH_CHECK(num_samples <= roi_bilinear::kMaxGridSide, kOp, "num_samples must be at most ",
              roi_bilinear::kMaxGridSide, " (samples per bin side, the cap of the adaptive grid), but got ",
              num_samples);
  TORCH_CHECK(num_orientations >= 1 && num_orientations <= kMaxOrientations, kOp, "num_orientations must lie in [1, ",
              kMaxOrientations, "], but got ", num_orientations);
  TORCH_SYM_CHECK((channels % num_orientations).sym_eq(0), kOp, "expected the channels of ", channels_of, " (",
                  channels, ") to be a multiple of num_orientations (", num_orientations, ")");
  RotatedRoiParams p{};
  p.pooled_height = pooled_h.maybe_as_int().value_or(-1);
  p.pooled_width = pooled_w.maybe_as_int().value_or(-1);
  p.spatial_scale = spatial_scale;
  p.sampling_ratio = num_samples;
  p.aligned = false;   // mmcv: no half-pixel shift
  p.clamp_size = true; // mmcv: rois are at least 1 x 1
  p.clockwise = clockwise;
  p.num_orientations = num_orientations;
  p.rotate_channels = true;
  return p;
}

} // namespace

RotatedRoiParams check_riroi_align_rotated_forward(const at::Tensor& features, const at::Tensor& rois,
                                                   c10::SymIntArrayRef out_size, double spatial_scale,
                                                   int64_t num_samples, int64_t num_orientations, bool clockwise) {
  TORCH_CHECK(features.dim() == 4, kOp, "expected features to be a 4-D tensor [N, C, H, W], but got a ", features.dim(),
              "-D tensor of shape ", shape_of(features));
  TORCH_CHECK(at::isFloatingType(features.scalar_type()), kOp,
              "expected features to have a floating point dtype, but got ", features.scalar_type());
  check_roi_map_shape(kOp, "features", features.sym_size(0), features.sym_size(1), features.sym_size(2),
                      features.sym_size(3));
  check_rotated_rois_tensor(kOp, rois);
  TORCH_CHECK(rois.scalar_type() == features.scalar_type(), kOp, "expected rois to have the dtype of features (",
              features.scalar_type(), "), but got ", rois.scalar_type());
  TORCH_CHECK(rois.device() == features.device(), kOp, "expected rois on the device of features (", features.device(),
              "), but got ", rois.device());
  TORCH_CHECK(out_size.size() == 2, kOp, "expected out_size to hold 2 values (out_h, out_w), but got ",
              out_size.size());
  check_roi_output_size(kOp, out_size, "out_size");
  check_roi_output_numel(kOp, rois.sym_size(0), features.sym_size(1), out_size);
  return check_common(rois, spatial_scale, num_samples, num_orientations, clockwise, features.sym_size(1), "features",
                      out_size[0], out_size[1]);
}

RotatedRoiParams check_riroi_align_rotated_backward(const at::Tensor& grad_output, const at::Tensor& rois,
                                                    c10::SymIntArrayRef input_shape, double spatial_scale,
                                                    int64_t num_samples, int64_t num_orientations, bool clockwise) {
  check_rotated_rois_tensor(kOp, rois);
  TORCH_CHECK(input_shape.size() == 4, kOp, "expected input_shape to hold 4 values, but got ", input_shape.size());
  check_roi_map_shape(kOp, "input_shape", input_shape[0], input_shape[1], input_shape[2], input_shape[3]);
  check_roi_grad_output(kOp, grad_output, rois);
  TORCH_SYM_CHECK(grad_output.sym_size(1).sym_eq(input_shape[1]), kOp, "grad_output has ", grad_output.sym_size(1),
                  " channels but the features have ", input_shape[1]);
  TORCH_SYM_CHECK(grad_output.sym_size(2).sym_gt(0).sym_and(grad_output.sym_size(3).sym_gt(0)), kOp,
                  "expected out_h and out_w of grad_output to be positive, but got shape ", shape_of(grad_output));
  return check_common(rois, spatial_scale, num_samples, num_orientations, clockwise, input_shape[1], "input_shape",
                      grad_output.sym_size(2), grad_output.sym_size(3));
}

} // namespace detail
} // namespace mmops

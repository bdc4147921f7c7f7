// Argument validation of bezier_align, on every backend (the meta kernels run
// it too, so fake tensors raise the same errors).

#include "bezier_align/bezier_align_ops.h"

#include "common/check_utils.h"
#include "common/roi_checks.h"

#include <c10/core/SymInt.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kOp = kBezierAlignOp;
using bezier_align_math::kRoiColumns;

// The largest sampling_ratio: the cap of the adaptive grid, so that a fixed
// grid bounds the work per output value as the adaptive one does (and
// grid_h * grid_w fits in int).
constexpr int64_t kMaxSamplingRatio = bezier_align_math::kMaxGridSide;
static_assert(int64_t(kMaxSamplingRatio) * kMaxSamplingRatio <= std::numeric_limits<int32_t>::max(),
              "a bin's sample count must fit in int32");

// rois: [K, 17] floating, in the dtype and on the device of `like`.
void check_rois(const at::Tensor& rois, const at::Tensor& like, const char* like_name) {
  TORCH_CHECK(rois.dim() == 2, kOp,
              "expected rois to be a 2-D tensor [K, 17] (batch_index, then the 8 control points x, y of the top "
              "and bottom Bezier curves), but got a ",
              rois.dim(), "-D tensor of shape ", shape_of(rois));
  TORCH_SYM_CHECK(rois.sym_size(1).sym_eq(kRoiColumns), kOp,
                  "expected rois of shape [K, 17] (batch_index, then 8 control points x, y), but got shape ",
                  shape_of(rois));
  TORCH_CHECK(rois.scalar_type() == like.scalar_type(), kOp, "expected rois to have the dtype of ", like_name, " (",
              like.scalar_type(), "), but got ", rois.scalar_type());
  TORCH_CHECK(rois.device() == like.device(), kOp, "expected rois on the device of ", like_name, " (", like.device(),
              "), but got ", rois.device());
}

BezierAlignParams check_options(double spatial_scale, int64_t sampling_ratio, bool aligned) {
  TORCH_CHECK(std::isfinite(spatial_scale) && spatial_scale > 0, kOp,
              "spatial_scale must be a positive finite number, but got ", spatial_scale);
  TORCH_CHECK(sampling_ratio <= kMaxSamplingRatio, kOp, "sampling_ratio must be at most ", kMaxSamplingRatio,
              " (samples per bin side, the cap of the adaptive grid; <= 0 means adaptive), but got ", sampling_ratio);
  BezierAlignParams p{};
  p.spatial_scale = spatial_scale;
  p.sampling_ratio = sampling_ratio;
  p.aligned = aligned;
  return p;
}

} // namespace

BezierAlignParams check_bezier_align_forward(const at::Tensor& input, const at::Tensor& rois,
                                             c10::SymIntArrayRef output_size, double spatial_scale,
                                             int64_t sampling_ratio, bool aligned) {
  TORCH_CHECK(input.dim() == 4, kOp, "expected input to be a 4-D tensor [N, C, H, W], but got a ", input.dim(),
              "-D tensor of shape ", shape_of(input));
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), kOp, "expected input to have a floating point dtype, but got ",
              input.scalar_type());
  check_roi_map_shape(kOp, "input", input.sym_size(0), input.sym_size(1), input.sym_size(2), input.sym_size(3));
  check_rois(rois, input, "input");
  check_roi_output_size(kOp, output_size);
  check_roi_output_numel(kOp, rois.sym_size(0), input.sym_size(1), output_size);
  BezierAlignParams p = check_options(spatial_scale, sampling_ratio, aligned);
  p.pooled_height = int_or_unknown(output_size[0]);
  p.pooled_width = int_or_unknown(output_size[1]);
  return p;
}

BezierAlignParams check_bezier_align_backward(const at::Tensor& grad_output, const at::Tensor& rois,
                                              c10::SymIntArrayRef input_shape, double spatial_scale,
                                              int64_t sampling_ratio, bool aligned) {
  TORCH_CHECK(input_shape.size() == 4, kOp, "expected input_shape to hold 4 values [N, C, H, W], but got ",
              input_shape.size());
  check_roi_map_shape(kOp, "input_shape", input_shape[0], input_shape[1], input_shape[2], input_shape[3]);
  TORCH_CHECK(at::isFloatingType(grad_output.scalar_type()), kOp,
              "expected grad_output to have a floating point dtype, but got ", grad_output.scalar_type());
  check_rois(rois, grad_output, "grad_output");
  check_roi_grad_output(kOp, grad_output, rois);
  TORCH_SYM_CHECK(grad_output.sym_size(1).sym_eq(input_shape[1]), kOp,
                  "expected grad_output to have C = ", input_shape[1], " channels (input_shape ", input_shape,
                  "), but got shape ", shape_of(grad_output));
  TORCH_SYM_CHECK(grad_output.sym_size(2).sym_gt(0).sym_and(grad_output.sym_size(3).sym_gt(0)), kOp,
                  "expected grad_output's out_h and out_w to be positive, but got shape ", shape_of(grad_output));
  BezierAlignParams p = check_options(spatial_scale, sampling_ratio, aligned);
  p.pooled_height = int_or_unknown(grad_output.sym_size(2));
  p.pooled_width = int_or_unknown(grad_output.sym_size(3));
  return p;
}

} // namespace detail
} // namespace mmops

// Argument validation of deform_roi_pool, on every backend (the meta kernels
// run it too, so fake tensors raise the same errors).

#include "deform_roi_pool/deform_roi_pool_ops.h"

#include "common/check_utils.h"
#include "common/roi_bilinear.h"
#include "common/roi_checks.h"

#include <c10/core/SymInt.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace mmops {
namespace detail {
namespace {

// A roi's samples along one axis, out * grid side, stay in int32.
static_assert(kMaxRoiOutputSide * roi_bilinear::kMaxGridSide <= std::numeric_limits<int32_t>::max(),
              "a roi's per-axis samples must fit in int32");

// What forward and backward share: rois, scalars, and the input map.
void check_common(const at::Tensor& input, const at::Tensor& rois, double spatial_scale, int64_t sampling_ratio,
                  double gamma) {
  const char* op = kDeformRoIPoolOp;
  TORCH_CHECK(input.dim() == 4, op, "expected input to be a 4-D tensor [N, C, H, W], but got a ", input.dim(),
              "-D tensor of shape ", shape_of(input));
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), op, "expected input to have a floating point dtype, but got ",
              input.scalar_type());
  check_rois_tensor(op, rois);
  TORCH_CHECK(rois.scalar_type() == input.scalar_type(), op, "expected rois to have the dtype of input (",
              input.scalar_type(), "), but got ", rois.scalar_type());
  TORCH_CHECK(rois.device() == input.device(), op, "expected rois on the device of input (", input.device(),
              "), but got ", rois.device());
  check_roi_map_shape(op, "input", input.sym_size(0), input.sym_size(1), input.sym_size(2), input.sym_size(3));
  TORCH_CHECK(std::isfinite(spatial_scale) && spatial_scale > 0, op,
              "spatial_scale must be a positive finite number, but got ", spatial_scale);
  TORCH_CHECK(sampling_ratio >= 0, op, "sampling_ratio must be >= 0 (0 means adaptive), but got ", sampling_ratio);
  TORCH_CHECK(sampling_ratio <= roi_bilinear::kMaxGridSide, op, "sampling_ratio must be at most ",
              roi_bilinear::kMaxGridSide, " (samples per bin side, the cap of the adaptive grid), but got ",
              sampling_ratio);
  TORCH_CHECK(std::isfinite(gamma), op, "gamma must be a finite number, but got ", gamma);
}

// offset: [K, 2, out_h, out_w] with the dtype and device of input.
void check_offset(const std::optional<at::Tensor>& offset, const at::Tensor& input, const at::Tensor& rois,
                  const c10::SymInt& out_h, const c10::SymInt& out_w) {
  if (!offset.has_value()) {
    return;
  }
  const at::Tensor& o = *offset;
  const char* op = kDeformRoIPoolOp;
  TORCH_CHECK(o.scalar_type() == input.scalar_type(), op, "expected offset to have the dtype of input (",
              input.scalar_type(), "), but got ", o.scalar_type());
  TORCH_CHECK(o.device() == input.device(), op, "expected offset on the device of input (", input.device(),
              "), but got ", o.device());
  TORCH_CHECK(o.dim() == 4, op, "expected offset to be a 4-D tensor [K, 2, out_h, out_w], but got shape ", shape_of(o));
  TORCH_SYM_CHECK(o.sym_size(0)
                      .sym_eq(rois.sym_size(0))
                      .sym_and(o.sym_size(1).sym_eq(2))
                      .sym_and(o.sym_size(2).sym_eq(out_h))
                      .sym_and(o.sym_size(3).sym_eq(out_w)),
                  op, "expected offset of shape [K, 2, out_h, out_w] = [", rois.sym_size(0), ", 2, ", out_h, ", ",
                  out_w, "], but got ", shape_of(o));
}

DeformRoIPoolParams params_of(const c10::SymInt& out_h, const c10::SymInt& out_w, double spatial_scale,
                              int64_t sampling_ratio, double gamma) {
  DeformRoIPoolParams p{};
  p.pooled_height = out_h.maybe_as_int().value_or(-1); // -1 while symbolic (meta only)
  p.pooled_width = out_w.maybe_as_int().value_or(-1);
  p.spatial_scale = spatial_scale;
  p.sampling_ratio = sampling_ratio;
  p.gamma = gamma;
  return p;
}

} // namespace

DeformRoIPoolParams check_deform_roi_pool_forward(const at::Tensor& input, const at::Tensor& rois,
                                                  const std::optional<at::Tensor>& offset,
                                                  c10::SymIntArrayRef output_size, double spatial_scale,
                                                  int64_t sampling_ratio, double gamma) {
  check_common(input, rois, spatial_scale, sampling_ratio, gamma);
  check_roi_output_size(kDeformRoIPoolOp, output_size);
  check_roi_output_numel(kDeformRoIPoolOp, rois.sym_size(0), input.sym_size(1), output_size);
  check_offset(offset, input, rois, output_size[0], output_size[1]);
  return params_of(output_size[0], output_size[1], spatial_scale, sampling_ratio, gamma);
}

DeformRoIPoolParams check_deform_roi_pool_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                                   const at::Tensor& rois, const std::optional<at::Tensor>& offset,
                                                   double spatial_scale, int64_t sampling_ratio, double gamma) {
  check_common(input, rois, spatial_scale, sampling_ratio, gamma);
  check_roi_grad_output(kDeformRoIPoolOp, grad_output, rois);
  TORCH_SYM_CHECK(grad_output.sym_size(1).sym_eq(input.sym_size(1)), kDeformRoIPoolOp, "grad_output has ",
                  grad_output.sym_size(1), " channels but input has ", input.sym_size(1));
  check_offset(offset, input, rois, grad_output.sym_size(2), grad_output.sym_size(3));
  return params_of(grad_output.sym_size(2), grad_output.sym_size(3), spatial_scale, sampling_ratio, gamma);
}

} // namespace detail
} // namespace mmops

// Argument validation of roi_pool, on every backend (the meta kernels run it
// too, so fake tensors raise the same errors).

#include "roi_pool/roi_pool_ops.h"

#include "common/check_utils.h"
#include "common/roi_checks.h"

#include <c10/core/SymInt.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace mmops {
namespace detail {
namespace {

void check_rois(const at::Tensor& rois, double spatial_scale) {
  check_rois_tensor(kRoIPoolOp, rois);
  TORCH_CHECK(std::isfinite(spatial_scale) && spatial_scale > 0, kRoIPoolOp,
              "spatial_scale must be a positive finite number, but got ", spatial_scale);
}

// Pixel indices (argmax) are int32.
void check_plane(const c10::SymInt& h, const c10::SymInt& w) {
  TORCH_SYM_CHECK((h * w).sym_le(std::numeric_limits<int32_t>::max()), kRoIPoolOp,
                  "expected H * W < 2^31 (argmax is int32), but got H = ", h, ", W = ", w);
}

// The kernels' parameters; the pooled size is -1 while it is symbolic (meta only).
RoIPoolParams params_of(const c10::SymInt& pooled_height, const c10::SymInt& pooled_width, double spatial_scale) {
  RoIPoolParams p{};
  p.pooled_height = pooled_height.maybe_as_int().value_or(-1);
  p.pooled_width = pooled_width.maybe_as_int().value_or(-1);
  p.spatial_scale = spatial_scale;
  return p;
}

} // namespace

RoIPoolParams check_roi_pool_forward(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                                     double spatial_scale) {
  TORCH_CHECK(input.dim() == 4, kRoIPoolOp, "expected input to be a 4-D tensor [N, C, H, W], but got a ", input.dim(),
              "-D tensor of shape ", shape_of(input));
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), kRoIPoolOp,
              "expected input to have a floating point dtype, but got ", input.scalar_type());
  check_rois(rois, spatial_scale);
  TORCH_CHECK(rois.scalar_type() == input.scalar_type(), kRoIPoolOp, "expected rois to have the dtype of input (",
              input.scalar_type(), "), but got ", rois.scalar_type());
  TORCH_CHECK(rois.device() == input.device(), kRoIPoolOp, "expected rois on the device of input (", input.device(),
              "), but got ", rois.device());
  check_roi_output_size(kRoIPoolOp, output_size);
  check_roi_output_numel(kRoIPoolOp, rois.sym_size(0), input.sym_size(1), output_size);
  check_plane(input.sym_size(2), input.sym_size(3));
  return params_of(output_size[0], output_size[1], spatial_scale);
}

RoIPoolParams check_roi_pool_backward(const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
                                      c10::SymIntArrayRef input_shape, double spatial_scale) {
  check_rois(rois, spatial_scale);
  TORCH_CHECK(input_shape.size() == 4, kRoIPoolOp, "expected input_shape to hold 4 values, but got ",
              input_shape.size());
  check_roi_map_shape(kRoIPoolOp, "input_shape", input_shape[0], input_shape[1], input_shape[2], input_shape[3]);
  check_roi_grad_output(kRoIPoolOp, grad_output, rois);
  TORCH_SYM_CHECK(grad_output.sym_size(1).sym_eq(input_shape[1]), kRoIPoolOp, "grad_output has ",
                  grad_output.sym_size(1), " channels but the input has ", input_shape[1]);
  TORCH_CHECK(argmax.scalar_type() == at::kInt && argmax.device() == grad_output.device(), kRoIPoolOp,
              "expected argmax to be an int32 tensor on ", grad_output.device(), ", but got ", argmax.scalar_type(),
              " on ", argmax.device());
  TORCH_CHECK(argmax.sym_sizes() == grad_output.sym_sizes(), kRoIPoolOp, "expected argmax of shape ",
              shape_of(grad_output), ", but got ", shape_of(argmax));
  check_plane(input_shape[2], input_shape[3]);
  return params_of(grad_output.sym_size(2), grad_output.sym_size(3), spatial_scale);
}

} // namespace detail
} // namespace mmops

// Argument validation of prroi_pool, on every backend (the meta kernels run
// it too, so fake tensors raise the same errors).

#include "prroi_pool/prroi_pool_ops.h"

#include "common/check_utils.h"
#include "common/roi_checks.h"

#include <c10/core/SymInt.h>

#include <cmath>

namespace mmops {
namespace detail {
namespace {

void check_input_and_rois(const at::Tensor& input, const at::Tensor& rois, double spatial_scale) {
  TORCH_CHECK(input.dim() == 4, kPrRoIPoolOp, "expected input to be a 4-D tensor [N, C, H, W], but got a ", input.dim(),
              "-D tensor of shape ", shape_of(input));
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), kPrRoIPoolOp,
              "expected input to have a floating point dtype, but got ", input.scalar_type());
  check_rois_tensor(kPrRoIPoolOp, rois);
  TORCH_CHECK(rois.scalar_type() == input.scalar_type(), kPrRoIPoolOp, "expected rois to have the dtype of input (",
              input.scalar_type(), "), but got ", rois.scalar_type());
  TORCH_CHECK(rois.device() == input.device(), kPrRoIPoolOp, "expected rois on the device of input (", input.device(),
              "), but got ", rois.device());
  TORCH_CHECK(std::isfinite(spatial_scale) && spatial_scale > 0, kPrRoIPoolOp,
              "spatial_scale must be a positive finite number, but got ", spatial_scale);
  check_roi_map_shape(kPrRoIPoolOp, "input", input.sym_size(0), input.sym_size(1), input.sym_size(2),
                      input.sym_size(3));
}

// The kernels' parameters; the pooled size is -1 while it is symbolic (meta only).
PrRoIPoolParams params_of(const c10::SymInt& pooled_height, const c10::SymInt& pooled_width, double spatial_scale) {
  PrRoIPoolParams p{};
  p.pooled_height = pooled_height.maybe_as_int().value_or(-1);
  p.pooled_width = pooled_width.maybe_as_int().value_or(-1);
  p.spatial_scale = spatial_scale;
  return p;
}

} // namespace

PrRoIPoolParams check_prroi_pool_forward(const at::Tensor& input, const at::Tensor& rois,
                                         c10::SymIntArrayRef output_size, double spatial_scale) {
  check_input_and_rois(input, rois, spatial_scale);
  check_roi_output_size(kPrRoIPoolOp, output_size);
  check_roi_output_numel(kPrRoIPoolOp, rois.sym_size(0), input.sym_size(1), output_size);
  return params_of(output_size[0], output_size[1], spatial_scale);
}

PrRoIPoolParams check_prroi_pool_input_backward(const at::Tensor& grad_output, const at::Tensor& rois,
                                                c10::SymIntArrayRef input_shape, double spatial_scale) {
  check_rois_tensor(kPrRoIPoolOp, rois);
  TORCH_CHECK(std::isfinite(spatial_scale) && spatial_scale > 0, kPrRoIPoolOp,
              "spatial_scale must be a positive finite number, but got ", spatial_scale);
  TORCH_CHECK(input_shape.size() == 4, kPrRoIPoolOp, "expected input_shape to hold 4 values, but got ",
              input_shape.size());
  check_roi_map_shape(kPrRoIPoolOp, "input_shape", input_shape[0], input_shape[1], input_shape[2], input_shape[3]);
  check_roi_grad_output(kPrRoIPoolOp, grad_output, rois);
  TORCH_SYM_CHECK(grad_output.sym_size(1).sym_eq(input_shape[1]), kPrRoIPoolOp, "grad_output has ",
                  grad_output.sym_size(1), " channels but the input has ", input_shape[1]);
  return params_of(grad_output.sym_size(2), grad_output.sym_size(3), spatial_scale);
}

PrRoIPoolParams check_prroi_pool_rois_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                               const at::Tensor& rois, double spatial_scale) {
  check_input_and_rois(input, rois, spatial_scale);
  check_roi_grad_output(kPrRoIPoolOp, grad_output, rois);
  TORCH_SYM_CHECK(grad_output.sym_size(1).sym_eq(input.sym_size(1)), kPrRoIPoolOp, "grad_output has ",
                  grad_output.sym_size(1), " channels but the input has ", input.sym_size(1));
  return params_of(grad_output.sym_size(2), grad_output.sym_size(3), spatial_scale);
}

} // namespace detail
} // namespace mmops

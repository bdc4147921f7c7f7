// Argument validation of roi_pool, on every backend (the meta kernels run it
// too, so fake tensors raise the same errors).

#include "roi_pool/roi_pool_ops.h"
#include "common/check_utils.h"
#include "common/roi_checks.h"

#include <c10/core/SymInt.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

namespace mmops {
namespace detail {
namespace {

void check_rois(const char* op, const at::Tensor& rois, double spatial_scale) {
  check_rois_tensor(op, rois);
  TORCH_CHECK(std::isfinite(spatial_scale) && spatial_scale > 0, op,
              "spatial_scale must be a positive finite number, but got ", spatial_scale);
}

// Pixel indices (argmax) are int32.
void check_plane(const char* op, const c10::SymInt& h, const c10::SymInt& w) {
  TORCH_SYM_CHECK((h * w).sym_le(std::numeric_limits<int32_t>::max()), op,
                  "expected H * W < 2^31 (argmax is int32), but got H = ", h, ", W = ", w);
}

} // namespace

RoIPoolParams check_roi_pool_forward(const char* op, const at::Tensor& input, const at::Tensor& rois,
                                     c10::SymIntArrayRef output_size, double spatial_scale) {
  TORCH_CHECK(input.dim() == 4, op, "expected input to be a 4-D tensor [N, C, H, W], but got a ",
              input.dim(), "-D tensor of shape ", shape_of(input));
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), op,
              "expected input to have a floating point dtype, but got ", input.scalar_type());
  check_rois(op, rois, spatial_scale);
  TORCH_CHECK(rois.scalar_type() == input.scalar_type(), op,
              "expected rois to have the dtype of input (", input.scalar_type(), "), but got ",
              rois.scalar_type());
  TORCH_CHECK(rois.device() == input.device(), op, "expected rois on the device of input (",
              input.device(), "), but got ", rois.device());
  TORCH_CHECK(output_size.size() == 2, op,
              "expected output_size to hold 2 values (out_h, out_w), but got ", output_size.size());
  for (size_t i = 0; i < 2; ++i) {
    TORCH_SYM_CHECK(output_size[i].sym_gt(0), op, "output_size values must be positive, but got ",
                    output_size);
  }
  check_plane(op, input.sym_size(2), input.sym_size(3));
  RoIPoolParams p{};
  p.pooled_height = output_size[0].maybe_as_int().value_or(-1);
  p.pooled_width = output_size[1].maybe_as_int().value_or(-1);
  p.spatial_scale = spatial_scale;
  return p;
}

RoIPoolParams check_roi_pool_backward(const char* op, const at::Tensor& grad_output,
                                      const at::Tensor& rois, const at::Tensor& argmax,
                                      c10::SymIntArrayRef input_shape, double spatial_scale) {
  check_rois(op, rois, spatial_scale);
  TORCH_CHECK(input_shape.size() == 4, op, "expected input_shape to hold 4 values, but got ",
              input_shape.size());
  check_roi_grad_output(op, grad_output, rois);
  TORCH_SYM_CHECK(grad_output.sym_size(1).sym_eq(input_shape[1]), op, "grad_output has ",
                  grad_output.sym_size(1), " channels but the input has ", input_shape[1]);
  TORCH_CHECK(argmax.scalar_type() == at::kInt && argmax.device() == grad_output.device(), op,
              "expected argmax to be an int32 tensor on ", grad_output.device(), ", but got ",
              argmax.scalar_type(), " on ", argmax.device());
  TORCH_CHECK(argmax.sym_sizes() == grad_output.sym_sizes(), op, "expected argmax of shape ",
              shape_of(grad_output), ", but got ", shape_of(argmax));
  check_plane(op, input_shape[2], input_shape[3]);
  RoIPoolParams p{};
  p.pooled_height = grad_output.sym_size(2).maybe_as_int().value_or(-1);
  p.pooled_width = grad_output.sym_size(3).maybe_as_int().value_or(-1);
  p.spatial_scale = spatial_scale;
  return p;
}

} // namespace detail
} // namespace mmops

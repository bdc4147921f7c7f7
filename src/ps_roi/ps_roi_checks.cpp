// Argument validation of ps_roi_align and ps_roi_pool, on every backend (the
// meta kernels run it too, so fake tensors raise the same errors).

#include "ps_roi/ps_roi_ops.h"

#include "common/check_utils.h"
#include "common/roi_bilinear.h"
#include "common/roi_checks.h"

#include <c10/core/SymInt.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace mmops {
namespace detail {
namespace {

// The largest sampling_ratio: the cap of the adaptive grid, so that a fixed
// grid bounds the work per output value as the adaptive one does.
constexpr int64_t kMaxPSSamplingRatio = roi_bilinear::kMaxGridSide;

void check_ps_scalars(const char* op, const at::Tensor& rois, double spatial_scale, int64_t sampling_ratio) {
  check_rois_tensor(op, rois);
  TORCH_CHECK(std::isfinite(spatial_scale) && spatial_scale > 0, op,
              "spatial_scale must be a positive finite number, but got ", spatial_scale);
  TORCH_CHECK(sampling_ratio <= kMaxPSSamplingRatio, op, "sampling_ratio must be at most ", kMaxPSSamplingRatio,
              " (samples per bin side; <= 0 means adaptive), but got ", sampling_ratio);
}

PSRoIParams ps_params_of(const c10::SymInt& pooled_h, const c10::SymInt& pooled_w, const c10::SymInt& channels_out,
                         double spatial_scale, int64_t sampling_ratio) {
  PSRoIParams p{};
  p.pooled_height = int_or_unknown(pooled_h);
  p.pooled_width = int_or_unknown(pooled_w);
  p.channels_out = int_or_unknown(channels_out);
  p.spatial_scale = spatial_scale;
  p.sampling_ratio = sampling_ratio;
  return p;
}

} // namespace

c10::SymInt ps_roi_channels_out(const at::Tensor& input, c10::SymIntArrayRef output_size) {
  return input.sym_size(1) / (output_size[0] * output_size[1]);
}

PSRoIParams check_ps_roi_forward(const char* op, const at::Tensor& input, const at::Tensor& rois,
                                 c10::SymIntArrayRef output_size, double spatial_scale, int64_t sampling_ratio) {
  TORCH_CHECK(input.dim() == 4, op, "expected input to be a 4-D tensor [N, C, H, W], but got a ", input.dim(),
              "-D tensor of shape ", shape_of(input));
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), op, "expected input to have a floating point dtype, but got ",
              input.scalar_type());
  check_roi_map_shape(op, "input", input.sym_size(0), input.sym_size(1), input.sym_size(2), input.sym_size(3));
  check_ps_scalars(op, rois, spatial_scale, sampling_ratio);
  TORCH_CHECK(rois.scalar_type() == input.scalar_type(), op, "expected rois to have the dtype of input (",
              input.scalar_type(), "), but got ", rois.scalar_type());
  TORCH_CHECK(rois.device() == input.device(), op, "expected rois on the device of input (", input.device(),
              "), but got ", rois.device());
  check_roi_output_size(op, output_size);
  // Both sides are at most kMaxRoiOutputSide, so their product is small.
  const c10::SymInt bins = output_size[0] * output_size[1];
  TORCH_SYM_CHECK((input.sym_size(1) % bins).sym_eq(0), op,
                  "expected the channels of input to be a multiple of output_size[0] * output_size[1] = ", bins,
                  " (one channel per output channel and bin), but got ", input.sym_size(1), " channels");
  const c10::SymInt channels_out = ps_roi_channels_out(input, output_size);
  check_roi_output_numel(op, rois.sym_size(0), channels_out, output_size);
  return ps_params_of(output_size[0], output_size[1], channels_out, spatial_scale, sampling_ratio);
}

PSRoIParams check_ps_roi_backward(const char* op, const at::Tensor& grad_output, const at::Tensor& rois,
                                  c10::SymIntArrayRef input_shape, double spatial_scale, int64_t sampling_ratio) {
  check_ps_scalars(op, rois, spatial_scale, sampling_ratio);
  TORCH_CHECK(input_shape.size() == 4, op, "expected input_shape to hold 4 values, but got ", input_shape.size());
  check_roi_map_shape(op, "input_shape", input_shape[0], input_shape[1], input_shape[2], input_shape[3]);
  check_roi_grad_output(op, grad_output, rois);
  const std::vector<c10::SymInt> pooled{grad_output.sym_size(2), grad_output.sym_size(3)};
  check_roi_output_size(op, pooled, "the pooled size of grad_output");
  const c10::SymInt channels = grad_output.sym_size(1) * pooled[0] * pooled[1];
  TORCH_SYM_CHECK(channels.sym_eq(input_shape[1]), op, "expected input_shape[1] = C_out * out_h * out_w = ", channels,
                  " (from grad_output of shape ", shape_of(grad_output), "), but got ", input_shape[1]);
  return ps_params_of(pooled[0], pooled[1], grad_output.sym_size(1), spatial_scale, sampling_ratio);
}

} // namespace detail
} // namespace mmops

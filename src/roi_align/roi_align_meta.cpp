// Meta (shape and dtype only) kernels of roi_align, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic.

#include "roi_align/roi_align_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

constexpr const char* kOp = "mmops::roi_align: ";

std::vector<c10::SymInt> output_shape(const at::Tensor& input, const at::Tensor& rois,
                                      c10::SymIntArrayRef output_size) {
  return {rois.sym_size(0), input.sym_size(1), output_size[0], output_size[1]};
}

at::Tensor roi_align_meta(const at::Tensor& input, const at::Tensor& rois,
                          c10::SymIntArrayRef output_size, double spatial_scale,
                          int64_t sampling_ratio, c10::string_view pool_mode, bool aligned) {
  detail::check_roi_align_forward(kOp, input, rois, output_size, spatial_scale, sampling_ratio,
                                  pool_mode, aligned);
  return at::empty_symint(output_shape(input, rois, output_size), input.options());
}

std::tuple<at::Tensor, at::Tensor> roi_align_forward_meta(
    const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
    double spatial_scale, int64_t sampling_ratio, c10::string_view pool_mode, bool aligned) {
  const RoIAlignParams p = detail::check_roi_align_forward(kOp, input, rois, output_size, spatial_scale,
                                                          sampling_ratio, pool_mode, aligned);
  const std::vector<c10::SymInt> shape = output_shape(input, rois, output_size);
  at::Tensor output = at::empty_symint(shape, input.options());
  at::Tensor argmax = p.pool_mode == PoolMode::Max
      ? at::empty_symint(shape, input.options().dtype(at::kInt))
      : at::empty_symint({0}, input.options().dtype(at::kInt));
  return {output, argmax};
}

at::Tensor roi_align_backward_meta(const at::Tensor& grad_output, const at::Tensor& rois,
                                   const at::Tensor& argmax, c10::SymIntArrayRef input_shape,
                                   double spatial_scale, int64_t sampling_ratio,
                                   c10::string_view pool_mode, bool aligned) {
  detail::check_roi_align_backward(kOp, grad_output, rois, argmax, input_shape, spatial_scale,
                                   sampling_ratio, pool_mode, aligned);
  return at::empty_symint(input_shape, grad_output.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("roi_align", &mmops::roi_align_meta);
  m.impl("_roi_align_forward", &mmops::roi_align_forward_meta);
  m.impl("_roi_align_backward", &mmops::roi_align_backward_meta);
}

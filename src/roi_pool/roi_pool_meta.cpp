// Meta (shape and dtype only) kernels of roi_pool, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic.

#include "roi_pool/roi_pool_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <vector>

namespace mmops {
namespace {

std::vector<c10::SymInt> output_shape(const at::Tensor& input, const at::Tensor& rois,
                                      c10::SymIntArrayRef output_size) {
  return {rois.sym_size(0), input.sym_size(1), output_size[0], output_size[1]};
}

at::Tensor roi_pool_meta(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                         double spatial_scale) {
  detail::check_roi_pool_forward(input, rois, output_size, spatial_scale);
  return at::empty_symint(output_shape(input, rois, output_size), input.options());
}

std::tuple<at::Tensor, at::Tensor> forward_meta(const at::Tensor& input, const at::Tensor& rois,
                                                c10::SymIntArrayRef output_size, double spatial_scale) {
  detail::check_roi_pool_forward(input, rois, output_size, spatial_scale);
  const std::vector<c10::SymInt> shape = output_shape(input, rois, output_size);
  // argmax is channels-last, as the CPU and CUDA kernels return it
  return {at::empty_symint(shape, input.options()),
          at::empty_symint(shape, input.options().dtype(at::kInt), at::MemoryFormat::ChannelsLast)};
}

at::Tensor backward_meta(const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
                         c10::SymIntArrayRef input_shape, double spatial_scale) {
  detail::check_roi_pool_backward(grad_output, rois, argmax, input_shape, spatial_scale);
  return at::empty_symint(input_shape, grad_output.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("roi_pool", &mmops::roi_pool_meta);
  m.impl("_roi_pool_forward", &mmops::forward_meta);
  m.impl("_roi_pool_backward", &mmops::backward_meta);
}

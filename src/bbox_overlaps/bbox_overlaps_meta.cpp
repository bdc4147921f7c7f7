// Meta (shape and dtype only) kernels of bbox_overlaps, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic.

#include "bbox_overlaps/bbox_overlaps_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor bbox_overlaps_meta(const at::Tensor& bboxes1, const at::Tensor& bboxes2, c10::string_view mode, bool aligned,
                              int64_t offset) {
  detail::check_bbox_overlaps(bboxes1, bboxes2, mode, aligned, offset);
  return at::empty_symint(kernels::overlaps_shape(bboxes1, bboxes2, aligned), bboxes1.options());
}

std::tuple<at::Tensor, at::Tensor> bbox_overlaps_backward_meta(const at::Tensor& grad_output, const at::Tensor& bboxes1,
                                                               const at::Tensor& bboxes2, c10::string_view mode,
                                                               bool aligned, int64_t offset) {
  detail::check_bbox_overlaps_backward(grad_output, bboxes1, bboxes2, mode, aligned, offset);
  return {at::empty_symint({bboxes1.sym_size(0), 4}, bboxes1.options()),
          at::empty_symint({bboxes2.sym_size(0), 4}, bboxes2.options())};
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("bbox_overlaps", &mmops::bbox_overlaps_meta);
  m.impl("_bbox_overlaps_backward", &mmops::bbox_overlaps_backward_meta);
}

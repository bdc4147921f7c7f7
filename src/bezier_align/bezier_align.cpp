// mmops::bezier_align: schemas, device entries (CPU/CUDA registration) and the
// public C++ API. Validation is in bezier_align_checks.cpp, kernels in
// kernels/bezier_align, the meta functions in bezier_align_meta.cpp and
// autograd in bezier_align_autograd.cpp.

#include "bezier_align/bezier_align_ops.h"

#include "common/autocast.h"
#include "common/check_utils.h"
#include "common/dispatch.h"
#include "common/roi_checks.h"

#include <mmops/bezier_align.h>

#include <torch/library.h>

#include <vector>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m,
            "bezier_align(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale=1.0, "
            "int sampling_ratio=0, bool aligned=True) -> Tensor");
  define_op(m,
            "_bezier_align_backward(Tensor grad_output, Tensor rois, SymInt[4] input_shape, float spatial_scale, "
            "int sampling_ratio, bool aligned) -> Tensor");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), the batch-index policy,
// then the kernel (CPU or CUDA).

template <auto Kernel>
at::Tensor bezier_align_entry(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                              double spatial_scale, int64_t sampling_ratio, bool aligned) {
  const BezierAlignParams p =
      detail::check_bezier_align_forward(input, rois, output_size, spatial_scale, sampling_ratio, aligned);
  detail::check_roi_batch_indices(kBezierAlignOp, rois, input.size(0));
  return Kernel(input, rois, p);
}

template <auto Kernel>
at::Tensor bezier_align_backward_entry(const at::Tensor& grad_output, const at::Tensor& rois,
                                       c10::SymIntArrayRef input_shape, double spatial_scale, int64_t sampling_ratio,
                                       bool aligned) {
  const BezierAlignParams p =
      detail::check_bezier_align_backward(grad_output, rois, input_shape, spatial_scale, sampling_ratio, aligned);
  const std::vector<int64_t> shape = detail::concrete(input_shape);
  detail::check_roi_batch_indices(kBezierAlignOp, rois, shape[0]);
  return Kernel(grad_output, rois, shape, p);
}

} // namespace

at::Tensor bezier_align(const at::Tensor& input, const at::Tensor& rois, at::IntArrayRef output_size,
                        double spatial_scale, int64_t sampling_ratio, bool aligned) {
  static const auto op = detail::op_handle<BezierAlignFn>("mmops::bezier_align");
  return op.call(input, rois, c10::fromIntArrayRefSlow(output_size), spatial_scale, sampling_ratio, aligned);
}

} // namespace mmops

#define MMOPS_BEZIER_ALIGN_ENTRIES(m, device)                                          \
  m.impl("bezier_align", &bezier_align_entry<kernels::bezier_align_forward_##device>); \
  m.impl("_bezier_align_backward", &bezier_align_backward_entry<kernels::bezier_align_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_BEZIER_ALIGN_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "bezier_align")

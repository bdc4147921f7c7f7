// mmops::roi_align_rotated: schemas, device entries (CPU/CUDA registration)
// and the public C++ API. Validation is in roi_align_rotated_checks.cpp,
// kernels in kernels/roi_align_rotated (bodies shared with riroi_align_rotated
// in kernels/common/rotated_roi*), the meta functions in
// roi_align_rotated_meta.cpp and autograd in roi_align_rotated_autograd.cpp.

#include "roi_align_rotated/roi_align_rotated_ops.h"

#include "common/autocast.h"
#include "common/check_utils.h"
#include "common/dispatch.h"
#include "common/roi_checks.h"

#include <mmops/roi_align_rotated.h>

#include <torch/library.h>

#include <vector>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m,
            "roi_align_rotated(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale=1.0, "
            "int sampling_ratio=0, bool aligned=True, bool clockwise=False) -> Tensor");
  define_op(m,
            "_roi_align_rotated_backward(Tensor grad_output, Tensor rois, SymInt[4] input_shape, "
            "float spatial_scale, int sampling_ratio, bool aligned, bool clockwise) -> Tensor");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), the batch index of
// every roi when the index policy says so, then the kernel (CPU or CUDA).

template <auto Kernel>
at::Tensor forward_entry(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                         double spatial_scale, int64_t sampling_ratio, bool aligned, bool clockwise) {
  const RotatedRoiParams p = detail::check_roi_align_rotated_forward(input, rois, output_size, spatial_scale,
                                                                     sampling_ratio, aligned, clockwise);
  detail::check_roi_batch_indices(kRoIAlignRotatedOp, rois, input.size(0));
  return Kernel(input, rois, p);
}

template <auto Kernel>
at::Tensor backward_entry(const at::Tensor& grad_output, const at::Tensor& rois, c10::SymIntArrayRef input_shape,
                          double spatial_scale, int64_t sampling_ratio, bool aligned, bool clockwise) {
  const RotatedRoiParams p = detail::check_roi_align_rotated_backward(grad_output, rois, input_shape, spatial_scale,
                                                                      sampling_ratio, aligned, clockwise);
  const std::vector<int64_t> shape = detail::concrete(input_shape);
  detail::check_roi_batch_indices(kRoIAlignRotatedOp, rois, shape[0]);
  return Kernel(grad_output, rois, shape, p);
}

} // namespace

at::Tensor roi_align_rotated(const at::Tensor& input, const at::Tensor& rois, at::IntArrayRef output_size,
                             double spatial_scale, int64_t sampling_ratio, bool aligned, bool clockwise) {
  static const auto op = detail::op_handle<RoIAlignRotatedFn>("mmops::roi_align_rotated");
  return op.call(input, rois, c10::fromIntArrayRefSlow(output_size), spatial_scale, sampling_ratio, aligned, clockwise);
}

} // namespace mmops

#define MMOPS_ROI_ALIGN_ROTATED_ENTRIES(m, device)                                          \
  m.impl("roi_align_rotated", &forward_entry<kernels::roi_align_rotated_forward_##device>); \
  m.impl("_roi_align_rotated_backward", &backward_entry<kernels::roi_align_rotated_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_ROI_ALIGN_ROTATED_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "roi_align_rotated")

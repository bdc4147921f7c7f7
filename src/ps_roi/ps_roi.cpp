// mmops::ps_roi_align and mmops::ps_roi_pool: schemas, device entries
// (CPU/CUDA registration) and the public C++ API. Validation is in
// ps_roi_checks.cpp, kernels in kernels/ps_roi, the meta functions in
// ps_roi_meta.cpp and autograd in ps_roi_autograd.cpp.
//
// The backward ops take no channel mapping (torchvision's forward returns
// one): the input channel of output (k, c, ph, pw) is (c * PH + ph) * PW + pw,
// recomputed from the position.

#include "ps_roi/ps_roi_ops.h"

#include "common/autocast.h"
#include "common/check_utils.h"
#include "common/dispatch.h"
#include "common/roi_checks.h"

#include <mmops/ps_roi.h>

#include <torch/library.h>

#include <vector>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m,
            "ps_roi_align(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale=1.0, "
            "int sampling_ratio=-1) -> Tensor");
  define_op(m,
            "_ps_roi_align_backward(Tensor grad_output, Tensor rois, SymInt[4] input_shape, float spatial_scale, "
            "int sampling_ratio) -> Tensor");
  define_op(m, "ps_roi_pool(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale=1.0) -> Tensor");
  define_op(m,
            "_ps_roi_pool_backward(Tensor grad_output, Tensor rois, SymInt[4] input_shape, float spatial_scale) "
            "-> Tensor");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), the batch index of
// every roi when the index policy says so, then the kernel (CPU or CUDA).

template <auto Kernel>
at::Tensor ps_roi_align_entry(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                              double spatial_scale, int64_t sampling_ratio) {
  const PSRoIParams p =
      detail::check_ps_roi_forward(kPSRoIAlignOp, input, rois, output_size, spatial_scale, sampling_ratio);
  detail::check_roi_batch_indices(kPSRoIAlignOp, rois, input.size(0));
  return Kernel(input, rois, p);
}

template <auto Kernel>
at::Tensor ps_roi_pool_entry(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                             double spatial_scale) {
  const PSRoIParams p = detail::check_ps_roi_forward(kPSRoIPoolOp, input, rois, output_size, spatial_scale, 0);
  detail::check_roi_batch_indices(kPSRoIPoolOp, rois, input.size(0));
  return Kernel(input, rois, p);
}

template <auto Kernel>
at::Tensor ps_roi_align_backward_entry(const at::Tensor& grad_output, const at::Tensor& rois,
                                       c10::SymIntArrayRef input_shape, double spatial_scale, int64_t sampling_ratio) {
  const PSRoIParams p =
      detail::check_ps_roi_backward(kPSRoIAlignOp, grad_output, rois, input_shape, spatial_scale, sampling_ratio);
  const std::vector<int64_t> shape = detail::concrete(input_shape);
  detail::check_roi_batch_indices(kPSRoIAlignOp, rois, shape[0]);
  return Kernel(grad_output, rois, shape, p);
}

template <auto Kernel>
at::Tensor ps_roi_pool_backward_entry(const at::Tensor& grad_output, const at::Tensor& rois,
                                      c10::SymIntArrayRef input_shape, double spatial_scale) {
  const PSRoIParams p = detail::check_ps_roi_backward(kPSRoIPoolOp, grad_output, rois, input_shape, spatial_scale, 0);
  const std::vector<int64_t> shape = detail::concrete(input_shape);
  detail::check_roi_batch_indices(kPSRoIPoolOp, rois, shape[0]);
  return Kernel(grad_output, rois, shape, p);
}

} // namespace

at::Tensor ps_roi_align(const at::Tensor& input, const at::Tensor& rois, at::IntArrayRef output_size,
                        double spatial_scale, int64_t sampling_ratio) {
  static const auto op = detail::op_handle<PSRoIAlignFn>("mmops::ps_roi_align");
  return op.call(input, rois, c10::fromIntArrayRefSlow(output_size), spatial_scale, sampling_ratio);
}

at::Tensor ps_roi_pool(const at::Tensor& input, const at::Tensor& rois, at::IntArrayRef output_size,
                       double spatial_scale) {
  static const auto op = detail::op_handle<PSRoIPoolFn>("mmops::ps_roi_pool");
  return op.call(input, rois, c10::fromIntArrayRefSlow(output_size), spatial_scale);
}

} // namespace mmops

#define MMOPS_PS_ROI_ENTRIES(m, device)                                                                    \
  m.impl("ps_roi_align", &ps_roi_align_entry<kernels::ps_roi_align_forward_##device>);                     \
  m.impl("_ps_roi_align_backward", &ps_roi_align_backward_entry<kernels::ps_roi_align_backward_##device>); \
  m.impl("ps_roi_pool", &ps_roi_pool_entry<kernels::ps_roi_pool_forward_##device>);                        \
  m.impl("_ps_roi_pool_backward", &ps_roi_pool_backward_entry<kernels::ps_roi_pool_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_PS_ROI_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "ps_roi_align", "ps_roi_pool")

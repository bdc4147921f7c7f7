// mmops::deform_roi_pool: schemas, device entries (CPU/CUDA registration) and
// the public C++ API. Validation is in deform_roi_pool_checks.cpp, kernels in
// kernels/deform_roi_pool, the meta (shape) functions in
// deform_roi_pool_meta.cpp and autograd in deform_roi_pool_autograd.cpp.

#include "deform_roi_pool/deform_roi_pool_ops.h"

#include "common/autocast.h"
#include "common/check_utils.h"
#include "common/dispatch.h"
#include "common/roi_checks.h"

#include <mmops/deform_roi_pool.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m,
            "deform_roi_pool(Tensor input, Tensor rois, Tensor? offset, SymInt[2] output_size, "
            "float spatial_scale=1.0, int sampling_ratio=0, float gamma=0.1) -> Tensor");
  // Gradients of input and offset (an empty [0] tensor without offset); rois get none.
  define_op(m,
            "_deform_roi_pool_backward(Tensor grad_output, Tensor input, Tensor rois, Tensor? offset, "
            "float spatial_scale, int sampling_ratio, float gamma) -> (Tensor grad_input, Tensor grad_offset)");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), the batch index of
// every roi when the index policy says so, then the kernel (CPU or CUDA).

template <auto Kernel>
at::Tensor forward_entry(const at::Tensor& input, const at::Tensor& rois, const std::optional<at::Tensor>& offset,
                         c10::SymIntArrayRef output_size, double spatial_scale, int64_t sampling_ratio, double gamma) {
  const DeformRoIPoolParams p =
      detail::check_deform_roi_pool_forward(input, rois, offset, output_size, spatial_scale, sampling_ratio, gamma);
  detail::check_roi_batch_indices(kDeformRoIPoolOp, rois, input.size(0));
  return Kernel(input, rois, offset, p);
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor> backward_entry(const at::Tensor& grad_output, const at::Tensor& input,
                                                  const at::Tensor& rois, const std::optional<at::Tensor>& offset,
                                                  double spatial_scale, int64_t sampling_ratio, double gamma) {
  const DeformRoIPoolParams p =
      detail::check_deform_roi_pool_backward(grad_output, input, rois, offset, spatial_scale, sampling_ratio, gamma);
  detail::check_roi_batch_indices(kDeformRoIPoolOp, rois, input.size(0));
  return Kernel(grad_output, input, rois, offset, p);
}

} // namespace

at::Tensor deform_roi_pool(const at::Tensor& input, const at::Tensor& rois, const std::optional<at::Tensor>& offset,
                           at::IntArrayRef output_size, double spatial_scale, int64_t sampling_ratio, double gamma) {
  static const auto op = detail::op_handle<DeformRoIPoolFn>("mmops::deform_roi_pool");
  return op.call(input, rois, offset, c10::fromIntArrayRefSlow(output_size), spatial_scale, sampling_ratio, gamma);
}

} // namespace mmops

#define MMOPS_DEFORM_ROI_POOL_ENTRIES(m, device)                                        \
  m.impl("deform_roi_pool", &forward_entry<kernels::deform_roi_pool_forward_##device>); \
  m.impl("_deform_roi_pool_backward", &backward_entry<kernels::deform_roi_pool_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_DEFORM_ROI_POOL_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "deform_roi_pool")

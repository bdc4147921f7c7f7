// mmops::roi_align: schemas, CPU/CUDA registration and the public C++ API.
// Validation is shared with multi_level_roi_align (roi_align_checks.cpp);
// kernels live in kernels/roi_align (roi_align is their one-level case), the
// meta (shape) functions in roi_align_meta.cpp and autograd in roi_align_autograd.cpp.

#include "roi_align/roi_align_ops.h"
#include "common/check_utils.h"
#include "common/roi_checks.h"

#include <mmops/roi_align.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  m.def(
      "roi_align(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale=1.0, "
      "int sampling_ratio=0, str pool_mode=\"avg\", bool aligned=True) -> Tensor",
      {at::Tag::pt2_compliant_tag});
  // Forward that also returns, in max mode, the winning sample of every output
  // (int32, -1 when the bin had no sample) for the backward. Autograd uses it.
  m.def(
      "_roi_align_forward(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale, "
      "int sampling_ratio, str pool_mode, bool aligned) -> (Tensor output, Tensor argmax)",
      {at::Tag::pt2_compliant_tag});
  m.def(
      "_roi_align_backward(Tensor grad_output, Tensor rois, Tensor argmax, SymInt[4] input_shape, "
      "float spatial_scale, int sampling_ratio, str pool_mode, bool aligned) -> Tensor",
      {at::Tag::pt2_compliant_tag});
}

namespace mmops {
namespace {

constexpr const char* kOp = "mmops::roi_align: ";

RoIAlignParams forward_params(
    const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
    double spatial_scale, int64_t sampling_ratio, c10::string_view pool_mode, bool aligned) {
  const RoIAlignParams p = detail::check_roi_align_forward(kOp, input, rois, output_size, spatial_scale,
                                                          sampling_ratio, pool_mode, aligned);
  detail::check_roi_batch_indices(kOp, rois, input.size(0));
  return p;
}

// Dispatcher entry points, one instance per device: validate, then call that
// device's kernel (Forward / Backward from kernels/roi_align).

template <auto Forward>
at::Tensor roi_align_kernel(const at::Tensor& input, const at::Tensor& rois,
                            c10::SymIntArrayRef output_size, double spatial_scale,
                            int64_t sampling_ratio, c10::string_view pool_mode, bool aligned) {
  const RoIAlignParams p = forward_params(input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned);
  return std::get<0>(Forward(input, rois, p, /*with_argmax=*/false));
}

template <auto Forward>
std::tuple<at::Tensor, at::Tensor> roi_align_forward_kernel(
    const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
    double spatial_scale, int64_t sampling_ratio, c10::string_view pool_mode, bool aligned) {
  const RoIAlignParams p = forward_params(input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned);
  return Forward(input, rois, p, /*with_argmax=*/true);
}

template <auto Backward>
at::Tensor roi_align_backward_kernel(const at::Tensor& grad_output, const at::Tensor& rois,
                                     const at::Tensor& argmax, c10::SymIntArrayRef input_shape,
                                     double spatial_scale, int64_t sampling_ratio,
                                     c10::string_view pool_mode, bool aligned) {
  const RoIAlignParams p = detail::check_roi_align_backward(
      kOp, grad_output, rois, argmax, input_shape, spatial_scale, sampling_ratio, pool_mode, aligned);
  const std::vector<int64_t> shape = detail::concrete(input_shape);
  detail::check_roi_batch_indices(kOp, rois, shape[0]);
  return Backward(grad_output, rois, argmax, {shape}, p)[0];
}

} // namespace

at::Tensor roi_align(const at::Tensor& input, const at::Tensor& rois, at::IntArrayRef output_size,
                     double spatial_scale, int64_t sampling_ratio, c10::string_view pool_mode,
                     bool aligned) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::roi_align", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef,
                                         double, int64_t, c10::string_view, bool)>();
  return op.call(input, rois, c10::fromIntArrayRefSlow(output_size), spatial_scale,
                 sampling_ratio, pool_mode, aligned);
}

} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, CPU, m) {
  using namespace mmops;
  m.impl("roi_align", &roi_align_kernel<kernels::roi_align_forward_cpu>);
  m.impl("_roi_align_forward", &roi_align_forward_kernel<kernels::roi_align_forward_cpu>);
  m.impl("_roi_align_backward", &roi_align_backward_kernel<kernels::roi_align_backward_cpu>);
}

#ifdef MMOPS_WITH_CUDA
TORCH_LIBRARY_IMPL(mmops, CUDA, m) {
  using namespace mmops;
  m.impl("roi_align", &roi_align_kernel<kernels::roi_align_forward_cuda>);
  m.impl("_roi_align_forward", &roi_align_forward_kernel<kernels::roi_align_forward_cuda>);
  m.impl("_roi_align_backward", &roi_align_backward_kernel<kernels::roi_align_backward_cuda>);
}
#endif

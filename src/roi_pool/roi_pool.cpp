// mmops::roi_pool: schemas, device entries (CPU/CUDA registration) and the
// public C++ API. Validation is in roi_pool_checks.cpp, kernels in
// kernels/roi_pool, the meta (shape) functions in roi_pool_meta.cpp and
// autograd in roi_pool_autograd.cpp.

#include "roi_pool/roi_pool_ops.h"

#include "common/autocast.h"
#include "common/check_utils.h"
#include "common/dispatch.h"
#include "common/roi_checks.h"

#include <mmops/roi_pool.h>

#include <torch/library.h>

#include <vector>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  mmops::detail::define_op(
      m, "roi_pool(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale=1.0) -> Tensor");
  // Forward that also returns the winning pixel h * W + w of every output
  // (int32, -1 for an empty bin) for the backward. Autograd uses it.
  define_op(m,
            "_roi_pool_forward(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale) "
            "-> (Tensor output, Tensor argmax)");
  define_op(m,
            "_roi_pool_backward(Tensor grad_output, Tensor rois, Tensor argmax, SymInt[4] input_shape, "
            "float spatial_scale) -> Tensor");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), the batch index of
// every roi when the index policy says so, then the kernel (CPU or CUDA).

RoIPoolParams forward_params(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                             double spatial_scale) {
  const RoIPoolParams p = detail::check_roi_pool_forward(input, rois, output_size, spatial_scale);
  detail::check_roi_batch_indices(kRoIPoolOp, rois, input.size(0));
  return p;
}

template <auto Kernel>
at::Tensor roi_pool_entry(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                          double spatial_scale) {
  const RoIPoolParams p = forward_params(input, rois, output_size, spatial_scale);
  return std::get<0>(Kernel(input, rois, p, /*with_argmax=*/false));
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor> forward_entry(const at::Tensor& input, const at::Tensor& rois,
                                                 c10::SymIntArrayRef output_size, double spatial_scale) {
  const RoIPoolParams p = forward_params(input, rois, output_size, spatial_scale);
  return Kernel(input, rois, p, /*with_argmax=*/true);
}

template <auto Kernel>
at::Tensor backward_entry(const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
                          c10::SymIntArrayRef input_shape, double spatial_scale) {
  const RoIPoolParams p = detail::check_roi_pool_backward(grad_output, rois, argmax, input_shape, spatial_scale);
  const std::vector<int64_t> shape = detail::concrete(input_shape);
  detail::check_roi_batch_indices(kRoIPoolOp, rois, shape[0]);
  return Kernel(grad_output, rois, argmax, shape, p);
}

} // namespace

at::Tensor roi_pool(const at::Tensor& input, const at::Tensor& rois, at::IntArrayRef output_size,
                    double spatial_scale) {
  static const auto op = detail::op_handle<RoIPoolFn>("mmops::roi_pool");
  return op.call(input, rois, c10::fromIntArrayRefSlow(output_size), spatial_scale);
}

} // namespace mmops

#define MMOPS_ROI_POOL_ENTRIES(m, device)                                          \
  m.impl("roi_pool", &roi_pool_entry<kernels::roi_pool_forward_##device>);         \
  m.impl("_roi_pool_forward", &forward_entry<kernels::roi_pool_forward_##device>); \
  m.impl("_roi_pool_backward", &backward_entry<kernels::roi_pool_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_ROI_POOL_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "roi_pool")

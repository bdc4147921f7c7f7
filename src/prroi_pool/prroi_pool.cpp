// mmops::prroi_pool: schemas, device entries (CPU/CUDA registration) and the
// public C++ API. Validation is in prroi_pool_checks.cpp, kernels in
// kernels/prroi_pool, the meta (shape) functions in prroi_pool_meta.cpp and
// autograd in prroi_pool_autograd.cpp.

#include "prroi_pool/prroi_pool_ops.h"

#include "common/autocast.h"
#include "common/check_utils.h"
#include "common/dispatch.h"
#include "common/roi_checks.h"

#include <mmops/prroi_pool.h>

#include <torch/library.h>

#include <vector>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m, "prroi_pool(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale=1.0) -> Tensor");
  // The gradients of input and of rois, apart: autograd calls only what it needs.
  define_op(m,
            "_prroi_pool_input_backward(Tensor grad_output, Tensor rois, SymInt[4] input_shape, "
            "float spatial_scale) -> Tensor");
  define_op(m,
            "_prroi_pool_rois_backward(Tensor grad_output, Tensor input, Tensor rois, float spatial_scale) "
            "-> Tensor");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), the batch index of
// every roi when the index policy says so, then the kernel (CPU or CUDA).

template <auto Kernel>
at::Tensor forward_entry(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                         double spatial_scale) {
  const PrRoIPoolParams p = detail::check_prroi_pool_forward(input, rois, output_size, spatial_scale);
  detail::check_roi_batch_indices(kPrRoIPoolOp, rois, input.size(0));
  return Kernel(input, rois, p);
}

template <auto Kernel>
at::Tensor input_backward_entry(const at::Tensor& grad_output, const at::Tensor& rois, c10::SymIntArrayRef input_shape,
                                double spatial_scale) {
  const PrRoIPoolParams p = detail::check_prroi_pool_input_backward(grad_output, rois, input_shape, spatial_scale);
  const std::vector<int64_t> shape = detail::concrete(input_shape);
  detail::check_roi_batch_indices(kPrRoIPoolOp, rois, shape[0]);
  return Kernel(grad_output, rois, shape, p);
}

template <auto Kernel>
at::Tensor rois_backward_entry(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& rois,
                               double spatial_scale) {
  const PrRoIPoolParams p = detail::check_prroi_pool_rois_backward(grad_output, input, rois, spatial_scale);
  detail::check_roi_batch_indices(kPrRoIPoolOp, rois, input.size(0));
  return Kernel(grad_output, input, rois, p);
}

} // namespace

at::Tensor prroi_pool(const at::Tensor& input, const at::Tensor& rois, at::IntArrayRef output_size,
                      double spatial_scale) {
  static const auto op = detail::op_handle<PrRoIPoolFn>("mmops::prroi_pool");
  return op.call(input, rois, c10::fromIntArrayRefSlow(output_size), spatial_scale);
}

} // namespace mmops

#define MMOPS_PRROI_POOL_ENTRIES(m, device)                                                                 \
  m.impl("prroi_pool", &forward_entry<kernels::prroi_pool_forward_##device>);                               \
  m.impl("_prroi_pool_input_backward", &input_backward_entry<kernels::prroi_pool_input_backward_##device>); \
  m.impl("_prroi_pool_rois_backward", &rois_backward_entry<kernels::prroi_pool_rois_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_PRROI_POOL_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "prroi_pool")

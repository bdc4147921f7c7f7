// mmops::rotated_feature_align: schemas, device entries (CPU/CUDA registration)
// and the public C++ API. Validation is in rotated_feature_align_checks.cpp,
// kernels in kernels/rotated_feature_align, the meta functions in
// rotated_feature_align_meta.cpp and autograd in rotated_feature_align_autograd.cpp.

#include "rotated_feature_align/rotated_feature_align_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/rotated_feature_align.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m,
            "rotated_feature_align(Tensor features, Tensor best_rbboxes, float spatial_scale=0.125, int points=1) "
            "-> Tensor");
  define_op(m,
            "_rotated_feature_align_backward(Tensor grad_output, Tensor best_rbboxes, float spatial_scale, "
            "int points) -> Tensor");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), then the kernel. The
// rbboxes are coordinates, not indices: nothing to validate in their data.
template <auto Kernel>
at::Tensor forward_entry(const at::Tensor& features, const at::Tensor& best_rbboxes, double spatial_scale,
                         int64_t points) {
  const RotatedFeatureAlignParams p =
      detail::check_rotated_feature_align_forward(features, best_rbboxes, spatial_scale, points);
  return Kernel(features, best_rbboxes, p);
}

template <auto Kernel>
at::Tensor backward_entry(const at::Tensor& grad_output, const at::Tensor& best_rbboxes, double spatial_scale,
                          int64_t points) {
  const RotatedFeatureAlignParams p =
      detail::check_rotated_feature_align_backward(grad_output, best_rbboxes, spatial_scale, points);
  return Kernel(grad_output, best_rbboxes, p);
}

} // namespace

at::Tensor rotated_feature_align(const at::Tensor& features, const at::Tensor& best_rbboxes, double spatial_scale,
                                 int64_t points) {
  static const auto op = detail::op_handle<RotatedFeatureAlignFn>("mmops::rotated_feature_align");
  return op.call(features, best_rbboxes, spatial_scale, points);
}

} // namespace mmops

#define MMOPS_ROTATED_FEATURE_ALIGN_ENTRIES(m, device)                                              \
  m.impl("rotated_feature_align", &forward_entry<kernels::rotated_feature_align_forward_##device>); \
  m.impl("_rotated_feature_align_backward", &backward_entry<kernels::rotated_feature_align_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_ROTATED_FEATURE_ALIGN_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "rotated_feature_align")

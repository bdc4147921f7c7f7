// mmops::riroi_align_rotated: schemas, device entries (CPU/CUDA registration)
// and the public C++ API. Validation is in riroi_align_rotated_checks.cpp,
// kernels in kernels/riroi_align_rotated (bodies shared with roi_align_rotated
// in kernels/common/rotated_roi*), the meta functions in
// riroi_align_rotated_meta.cpp and autograd in riroi_align_rotated_autograd.cpp.

#include "riroi_align_rotated/riroi_align_rotated_ops.h"

#include "common/autocast.h"
#include "common/check_utils.h"
#include "common/dispatch.h"
#include "common/roi_checks.h"

#include <mmops/riroi_align_rotated.h>

#include <torch/library.h>

#include <vector>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m,
            "riroi_align_rotated(Tensor features, Tensor rois, SymInt[2] out_size, float spatial_scale=1.0, "
            "int num_samples=0, int num_orientations=8, bool clockwise=False) -> Tensor");
  define_op(m,
            "_riroi_align_rotated_backward(Tensor grad_output, Tensor rois, SymInt[4] input_shape, "
            "float spatial_scale, int num_samples, int num_orientations, bool clockwise) -> Tensor");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), the batch index of
// every roi when the index policy says so, then the kernel (CPU or CUDA).

template <auto Kernel>
at::Tensor forward_entry(const at::Tensor& features, const at::Tensor& rois, c10::SymIntArrayRef out_size,
                         double spatial_scale, int64_t num_samples, int64_t num_orientations, bool clockwise) {
  const RotatedRoiParams p = detail::check_riroi_align_rotated_forward(features, rois, out_size, spatial_scale,
                                                                       num_samples, num_orientations, clockwise);
  detail::check_roi_batch_indices(kRiRoIAlignRotatedOp, rois, features.size(0));
  return Kernel(features, rois, p);
}

template <auto Kernel>
at::Tensor backward_entry(const at::Tensor& grad_output, const at::Tensor& rois, c10::SymIntArrayRef input_shape,
                          double spatial_scale, int64_t num_samples, int64_t num_orientations, bool clockwise) {
  const RotatedRoiParams p = detail::check_riroi_align_rotated_backward(grad_output, rois, input_shape, spatial_scale,
                                                                        num_samples, num_orientations, clockwise);
  const std::vector<int64_t> shape = detail::concrete(input_shape);
  detail::check_roi_batch_indices(kRiRoIAlignRotatedOp, rois, shape[0]);
  return Kernel(grad_output, rois, shape, p);
}

} // namespace

at::Tensor riroi_align_rotated(const at::Tensor& features, const at::Tensor& rois, at::IntArrayRef out_size,
                               double spatial_scale, int64_t num_samples, int64_t num_orientations, bool clockwise) {
  static const auto op = detail::op_handle<RiRoIAlignRotatedFn>("mmops::riroi_align_rotated");
  return op.call(features, rois, c10::fromIntArrayRefSlow(out_size), spatial_scale, num_samples, num_orientations,
                 clockwise);
}

} // namespace mmops

#define MMOPS_RIROI_ALIGN_ROTATED_ENTRIES(m, device)                                            \
  m.impl("riroi_align_rotated", &forward_entry<kernels::riroi_align_rotated_forward_##device>); \
  m.impl("_riroi_align_rotated_backward", &backward_entry<kernels::riroi_align_rotated_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_RIROI_ALIGN_ROTATED_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "riroi_align_rotated")

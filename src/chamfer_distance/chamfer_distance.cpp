// mmops::chamfer_distance: schemas, device entries (CPU/CUDA registration)
// and the public C++ API. Validation is in chamfer_distance_checks.cpp,
// kernels in kernels/chamfer_distance, the meta functions in
// chamfer_distance_meta.cpp and autograd in chamfer_distance_autograd.cpp.

#include "chamfer_distance/chamfer_distance_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"
#include "common/index_policy.h"

#include <mmops/chamfer_distance.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m, "chamfer_distance(Tensor xyz1, Tensor xyz2) -> (Tensor dist1, Tensor dist2, Tensor idx1, Tensor idx2)");
  define_op(m,
            "_chamfer_distance_backward(Tensor xyz1, Tensor xyz2, Tensor idx1, Tensor idx2, Tensor grad_dist1, "
            "Tensor grad_dist2) -> (Tensor, Tensor)");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), the indices' values
// when the index policy says so (CPU always), then the kernel.
template <auto Kernel>
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> forward_entry(const at::Tensor& xyz1,
                                                                         const at::Tensor& xyz2) {
  return Kernel(xyz1, xyz2, detail::check_chamfer_distance_forward(xyz1, xyz2));
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor> backward_entry(const at::Tensor& xyz1, const at::Tensor& xyz2,
                                                  const at::Tensor& idx1, const at::Tensor& idx2,
                                                  const at::Tensor& grad_dist1, const at::Tensor& grad_dist2) {
  const ChamferDistanceParams p =
      detail::check_chamfer_distance_backward(xyz1, xyz2, idx1, idx2, grad_dist1, grad_dist2);
  if (detail::should_validate_indices(idx1)) {
    detail::check_chamfer_distance_indices(idx1, idx2, p);
  }
  return Kernel(xyz1, xyz2, idx1, idx2, grad_dist1, grad_dist2, p);
}

} // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> chamfer_distance(const at::Tensor& xyz1,
                                                                            const at::Tensor& xyz2) {
  static const auto op = detail::op_handle<ChamferDistanceFn>("mmops::chamfer_distance");
  return op.call(xyz1, xyz2);
}

} // namespace mmops

#define MMOPS_CHAMFER_DISTANCE_ENTRIES(m, device)                                         \
  m.impl("chamfer_distance", &forward_entry<kernels::chamfer_distance_forward_##device>); \
  m.impl("_chamfer_distance_backward", &backward_entry<kernels::chamfer_distance_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_CHAMFER_DISTANCE_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "chamfer_distance")

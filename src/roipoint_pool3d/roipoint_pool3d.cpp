// mmops::roipoint_pool3d: schema, device entries (CPU/CUDA registration) and
// the public C++ API. Validation in roipoint_pool3d_checks.cpp, kernels in
// kernels/roipoint_pool3d, meta in roipoint_pool3d_meta.cpp.

#include "roipoint_pool3d/roipoint_pool3d_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/roipoint_pool3d.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  mmops::detail::define_op(m,
                           "roipoint_pool3d(Tensor points, Tensor point_features, Tensor boxes3d, "
                           "SymInt num_sampled_points=512) -> (Tensor pooled_features, Tensor pooled_empty_flag)");
}

namespace mmops {
namespace {

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor> roipoint_pool3d_entry(const at::Tensor& points, const at::Tensor& point_features,
                                                         const at::Tensor& boxes3d, c10::SymInt num_sampled_points) {
  detail::check_roipoint_pool3d(points, point_features, boxes3d, num_sampled_points);
  return Kernel(points, point_features, boxes3d, num_sampled_points.guard_int(__FILE__, __LINE__));
}

} // namespace

std::tuple<at::Tensor, at::Tensor> roipoint_pool3d(const at::Tensor& points, const at::Tensor& point_features,
                                                   const at::Tensor& boxes3d, int64_t num_sampled_points) {
  static const auto op = detail::op_handle<RoIPointPool3dFn>("mmops::roipoint_pool3d");
  return op.call(points, point_features, boxes3d, c10::SymInt(num_sampled_points));
}

} // namespace mmops

#define MMOPS_ROIPOINT_POOL3D_ENTRIES(m, device) \
  m.impl("roipoint_pool3d", &roipoint_pool3d_entry<kernels::roipoint_pool3d_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_ROIPOINT_POOL3D_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "roipoint_pool3d")

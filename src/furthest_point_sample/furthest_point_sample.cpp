// mmops::furthest_point_sample and furthest_point_sample_with_dist: schemas,
// device entries (CPU/CUDA registration) and the public C++ API. Validation in
// furthest_point_sample_checks.cpp, kernels in kernels/furthest_point_sample.

#include "furthest_point_sample/furthest_point_sample_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/furthest_point_sample.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m, "furthest_point_sample(Tensor points_xyz, SymInt num_points) -> Tensor");
  define_op(m, "furthest_point_sample_with_dist(Tensor points_dist, SymInt num_points) -> Tensor");
}

namespace mmops {
namespace {

template <auto Kernel>
at::Tensor fps_entry(const at::Tensor& points_xyz, c10::SymInt num_points) {
  detail::check_furthest_point_sample(points_xyz, num_points);
  return Kernel(points_xyz, num_points.guard_int(__FILE__, __LINE__));
}

template <auto Kernel>
at::Tensor with_dist_entry(const at::Tensor& points_dist, c10::SymInt num_points) {
  detail::check_furthest_point_sample_with_dist(points_dist, num_points);
  return Kernel(points_dist, num_points.guard_int(__FILE__, __LINE__));
}

} // namespace

at::Tensor furthest_point_sample(const at::Tensor& points_xyz, int64_t num_points) {
  static const auto op = detail::op_handle<FurthestPointSampleFn>("mmops::furthest_point_sample");
  return op.call(points_xyz, c10::SymInt(num_points));
}

at::Tensor furthest_point_sample_with_dist(const at::Tensor& points_dist, int64_t num_points) {
  static const auto op = detail::op_handle<FurthestPointSampleFn>("mmops::furthest_point_sample_with_dist");
  return op.call(points_dist, c10::SymInt(num_points));
}

} // namespace mmops

#define MMOPS_FURTHEST_POINT_SAMPLE_ENTRIES(m, device)                                  \
  m.impl("furthest_point_sample", &fps_entry<kernels::furthest_point_sample_##device>); \
  m.impl("furthest_point_sample_with_dist", &with_dist_entry<kernels::furthest_point_sample_with_dist_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_FURTHEST_POINT_SAMPLE_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "furthest_point_sample", "furthest_point_sample_with_dist")

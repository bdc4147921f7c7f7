// Meta (shape and dtype only) kernels of furthest_point_sample(_with_dist).
// Sizes stay symbolic.

#include "furthest_point_sample/furthest_point_sample_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor furthest_point_sample_meta(const at::Tensor& points_xyz, c10::SymInt num_points) {
  detail::check_furthest_point_sample(points_xyz, num_points);
  return at::empty_symint({points_xyz.sym_size(0), num_points}, points_xyz.options().dtype(at::kInt));
}

at::Tensor with_dist_meta(const at::Tensor& points_dist, c10::SymInt num_points) {
  detail::check_furthest_point_sample_with_dist(points_dist, num_points);
  return at::empty_symint({points_dist.sym_size(0), num_points}, points_dist.options().dtype(at::kInt));
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("furthest_point_sample", &mmops::furthest_point_sample_meta);
  m.impl("furthest_point_sample_with_dist", &mmops::with_dist_meta);
}

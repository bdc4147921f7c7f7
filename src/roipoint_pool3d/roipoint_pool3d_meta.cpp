// Meta (shape and dtype only) kernel of roipoint_pool3d. Sizes stay symbolic.

#include "roipoint_pool3d/roipoint_pool3d_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

std::tuple<at::Tensor, at::Tensor> roipoint_pool3d_meta(const at::Tensor& points, const at::Tensor& point_features,
                                                        const at::Tensor& boxes3d, c10::SymInt num_sampled_points) {
  detail::check_roipoint_pool3d(points, point_features, boxes3d, num_sampled_points);
  const c10::SymInt b = points.sym_size(0), m = boxes3d.sym_size(1);
  return {at::empty_symint({b, m, num_sampled_points, point_features.sym_size(2) + 3}, points.options()),
          at::empty_symint({b, m}, points.options().dtype(at::kInt))};
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("roipoint_pool3d", &mmops::roipoint_pool3d_meta);
}

// Meta (shape and dtype only) kernels of dynamic_voxelize and of dynamic_scatter's
// backward, for fake tensors, torch.compile and torch.export. hard_voxelize,
// dynamic_scatter and _dynamic_scatter_forward return as many voxels as the
// data holds: their fake kernels are in python/mmops/_fake.py.

#include "voxelization/voxelization_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor dynamic_voxelize_meta(const at::Tensor& points, c10::ArrayRef<double> voxel_size,
                                 c10::ArrayRef<double> coors_range) {
  detail::check_dynamic_voxelize(points, voxel_size, coors_range);
  return at::empty_symint({points.sym_size(0), 3}, points.options().dtype(at::kInt));
}

at::Tensor backward_meta(const at::Tensor& grad_voxel_feats, const at::Tensor& point2voxel,
                         const at::Tensor& voxel_points_count, const at::Tensor& argmax, c10::string_view reduce) {
  detail::check_dynamic_scatter_backward(grad_voxel_feats, point2voxel, voxel_points_count, argmax, reduce);
  return at::empty_symint({point2voxel.sym_size(0), grad_voxel_feats.sym_size(1)}, grad_voxel_feats.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("dynamic_voxelize", &mmops::dynamic_voxelize_meta);
  m.impl("_dynamic_scatter_backward", &mmops::backward_meta);
}

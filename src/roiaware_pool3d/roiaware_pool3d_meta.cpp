// Meta (shape and dtype only) kernels of roiaware_pool3d. Sizes stay symbolic.

#include "roiaware_pool3d/roiaware_pool3d_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <vector>

namespace mmops {
namespace {

std::vector<c10::SymInt> output_shape(const at::Tensor& rois, const at::Tensor& pts_feature,
                                      c10::SymIntArrayRef out_size) {
  return {rois.sym_size(0), out_size[0], out_size[1], out_size[2], pts_feature.sym_size(1)};
}

at::Tensor roiaware_pool3d_meta(const at::Tensor& rois, const at::Tensor& pts, const at::Tensor& pts_feature,
                                c10::SymIntArrayRef out_size, int64_t max_pts_per_voxel, c10::string_view mode) {
  detail::check_roiaware_pool3d_forward(rois, pts, pts_feature, out_size, max_pts_per_voxel, mode);
  return at::empty_symint(output_shape(rois, pts_feature, out_size), pts_feature.options());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> forward_meta(const at::Tensor& rois, const at::Tensor& pts,
                                                                        const at::Tensor& pts_feature,
                                                                        c10::SymIntArrayRef out_size,
                                                                        int64_t max_pts_per_voxel,
                                                                        c10::string_view mode) {
  const RoIAwarePool3dParams p =
      detail::check_roiaware_pool3d_forward(rois, pts, pts_feature, out_size, max_pts_per_voxel, mode);
  const std::vector<c10::SymInt> shape = output_shape(rois, pts_feature, out_size);
  const auto ints = pts_feature.options().dtype(at::kInt);
  at::Tensor argmax = p.mode == RoIAwarePoolMode::kMax ? at::empty_symint(shape, ints) : at::empty({0}, ints);
  return {at::empty_symint(shape, pts_feature.options()), argmax,
          at::empty_symint({rois.sym_size(0), pts.sym_size(0)}, ints),
          at::empty_symint({rois.sym_size(0), out_size[0] * out_size[1] * out_size[2]}, ints)};
}

at::Tensor backward_meta(const at::Tensor& grad_output, const at::Tensor& argmax, const at::Tensor& point_voxels,
                         const at::Tensor& voxel_counts, c10::string_view mode) {
  detail::check_roiaware_pool3d_backward(grad_output, argmax, point_voxels, voxel_counts, mode);
  return at::empty_symint({point_voxels.sym_size(1), grad_output.sym_size(4)}, grad_output.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("roiaware_pool3d", &mmops::roiaware_pool3d_meta);
  m.impl("_roiaware_pool3d_forward", &mmops::forward_meta);
  m.impl("_roiaware_pool3d_backward", &mmops::backward_meta);
}

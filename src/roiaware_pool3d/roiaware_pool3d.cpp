// mmops::roiaware_pool3d: schemas, device entries (CPU/CUDA registration) and
// the public C++ API. Validation in roiaware_pool3d_checks.cpp, kernels in
// kernels/roiaware_pool3d, meta in roiaware_pool3d_meta.cpp, autograd in
// roiaware_pool3d_autograd.cpp.

#include "roiaware_pool3d/roiaware_pool3d_ops.h"

#include "common/autocast.h"
#include "common/check_utils.h"
#include "common/dispatch.h"
#include "common/index_policy.h"

#include <mmops/roiaware_pool3d.h>

#include <torch/library.h>

#include <vector>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m,
            "roiaware_pool3d(Tensor rois, Tensor pts, Tensor pts_feature, SymInt[3] out_size, "
            "int max_pts_per_voxel=128, str mode=\"max\") -> Tensor");
  // Forward that also returns what the backward needs: argmax (max mode),
  // the voxel that kept each point in each roi, the kept points per voxel.
  define_op(m,
            "_roiaware_pool3d_forward(Tensor rois, Tensor pts, Tensor pts_feature, SymInt[3] out_size, "
            "int max_pts_per_voxel, str mode) -> (Tensor output, Tensor argmax, Tensor point_voxels, "
            "Tensor voxel_counts)");
  define_op(m,
            "_roiaware_pool3d_backward(Tensor grad_output, Tensor argmax, Tensor point_voxels, Tensor voxel_counts, "
            "str mode) -> Tensor");
}

namespace mmops {
namespace {

RoIAwarePool3dParams concrete_params(RoIAwarePool3dParams p, c10::SymIntArrayRef out_size) {
  const std::vector<int64_t> size = detail::concrete(out_size);
  p.out_x = size[0];
  p.out_y = size[1];
  p.out_z = size[2];
  return p;
}

template <auto Kernel>
at::Tensor roiaware_pool3d_entry(const at::Tensor& rois, const at::Tensor& pts, const at::Tensor& pts_feature,
                                 c10::SymIntArrayRef out_size, int64_t max_pts_per_voxel, c10::string_view mode) {
  const RoIAwarePool3dParams p =
      detail::check_roiaware_pool3d_forward(rois, pts, pts_feature, out_size, max_pts_per_voxel, mode);
  return std::get<0>(Kernel(rois, pts, pts_feature, concrete_params(p, out_size)));
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> forward_entry(const at::Tensor& rois, const at::Tensor& pts,
                                                                         const at::Tensor& pts_feature,
                                                                         c10::SymIntArrayRef out_size,
                                                                         int64_t max_pts_per_voxel,
                                                                         c10::string_view mode) {
  const RoIAwarePool3dParams p =
      detail::check_roiaware_pool3d_forward(rois, pts, pts_feature, out_size, max_pts_per_voxel, mode);
  return Kernel(rois, pts, pts_feature, concrete_params(p, out_size));
}

template <auto Kernel>
at::Tensor backward_entry(const at::Tensor& grad_output, const at::Tensor& argmax, const at::Tensor& point_voxels,
                          const at::Tensor& voxel_counts, c10::string_view mode) {
  const RoIAwarePool3dParams p =
      detail::check_roiaware_pool3d_backward(grad_output, argmax, point_voxels, voxel_counts, mode);
  if (detail::should_validate_indices(point_voxels)) {
    detail::check_point_voxels(point_voxels, p.out_x * p.out_y * p.out_z);
  }
  return Kernel(grad_output, argmax, point_voxels, voxel_counts, p);
}

} // namespace

at::Tensor roiaware_pool3d(const at::Tensor& rois, const at::Tensor& pts, const at::Tensor& pts_feature,
                           at::IntArrayRef out_size, int64_t max_pts_per_voxel, c10::string_view mode) {
  static const auto op = detail::op_handle<RoIAwarePool3dFn>("mmops::roiaware_pool3d");
  return op.call(rois, pts, pts_feature, c10::fromIntArrayRefSlow(out_size), max_pts_per_voxel, mode);
}

} // namespace mmops

#define MMOPS_ROIAWARE_POOL3D_ENTRIES(m, device)                                                 \
  m.impl("roiaware_pool3d", &roiaware_pool3d_entry<kernels::roiaware_pool3d_forward_##device>);  \
  m.impl("_roiaware_pool3d_forward", &forward_entry<kernels::roiaware_pool3d_forward_##device>); \
  m.impl("_roiaware_pool3d_backward", &backward_entry<kernels::roiaware_pool3d_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_ROIAWARE_POOL3D_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "roiaware_pool3d")

// mmops::hard_voxelize, dynamic_voxelize and dynamic_scatter: schemas, device
// entries (CPU/CUDA registration) and the public C++ API. Validation is in
// voxelization_checks.cpp, kernels in kernels/voxelization, the meta kernels in
// voxelization_meta.cpp and autograd in voxelization_autograd.cpp.
//
// The number of voxels of hard_voxelize and dynamic_scatter depends on the
// data: their fake kernels are in Python (python/mmops/_fake.py, an unbacked
// size) and validate through the validation-only schemas below.

#include "voxelization/voxelization_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"
#include "common/index_policy.h"

#include <mmops/voxelization.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m, "dynamic_voxelize(Tensor points, float[3] voxel_size, float[6] coors_range) -> Tensor");
  define_op(m,
            "hard_voxelize(Tensor points, float[3] voxel_size, float[6] coors_range, SymInt max_points=35, "
            "int max_voxels=20000) -> (Tensor voxels, Tensor coors, Tensor num_points_per_voxel)");
  define_op(m,
            "dynamic_scatter(Tensor feats, Tensor coors, str reduce=\"max\") -> (Tensor voxel_feats, "
            "Tensor voxel_coors)");
  // Forward that also returns what the backward needs: the voxel of every point
  // (int32, -1: dropped), the points per voxel and, for max, the winning point.
  define_op(m,
            "_dynamic_scatter_forward(Tensor feats, Tensor coors, str reduce) -> (Tensor voxel_feats, "
            "Tensor voxel_coors, Tensor point2voxel, Tensor voxel_points_count, Tensor argmax)");
  define_op(m,
            "_dynamic_scatter_backward(Tensor grad_voxel_feats, Tensor point2voxel, Tensor voxel_points_count, "
            "Tensor argmax, str reduce) -> Tensor");
  // Validation only (the arguments of the op above, nothing returned): for the fake kernels.
  m.def(
      "_hard_voxelize_check(Tensor points, float[3] voxel_size, float[6] coors_range, SymInt max_points, "
      "int max_voxels) -> ()");
  m.def("_dynamic_scatter_check(Tensor feats, Tensor coors, str reduce) -> ()");
}

namespace mmops {
namespace {

template <auto Kernel>
at::Tensor dynamic_voxelize_entry(const at::Tensor& points, c10::ArrayRef<double> voxel_size,
                                  c10::ArrayRef<double> coors_range) {
  return Kernel(points, detail::check_dynamic_voxelize(points, voxel_size, coors_range));
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor, at::Tensor> hard_voxelize_entry(const at::Tensor& points,
                                                                   c10::ArrayRef<double> voxel_size,
                                                                   c10::ArrayRef<double> coors_range,
                                                                   c10::SymInt max_points, int64_t max_voxels) {
  return Kernel(points, detail::check_hard_voxelize(points, voxel_size, coors_range, max_points, max_voxels));
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor> dynamic_scatter_entry(const at::Tensor& feats, const at::Tensor& coors,
                                                         c10::string_view reduce) {
  const ScatterResult r = Kernel(feats, coors, detail::check_dynamic_scatter(feats, coors, reduce));
  return {r.voxel_feats, r.voxel_coors};
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> forward_entry(const at::Tensor& feats,
                                                                                     const at::Tensor& coors,
                                                                                     c10::string_view reduce) {
  const ScatterResult r = Kernel(feats, coors, detail::check_dynamic_scatter(feats, coors, reduce));
  return {r.voxel_feats, r.voxel_coors, r.point2voxel, r.voxel_points_count, r.argmax};
}

template <auto Kernel>
at::Tensor backward_entry(const at::Tensor& grad_voxel_feats, const at::Tensor& point2voxel,
                          const at::Tensor& voxel_points_count, const at::Tensor& argmax, c10::string_view reduce) {
  const ScatterReduce r =
      detail::check_dynamic_scatter_backward(grad_voxel_feats, point2voxel, voxel_points_count, argmax, reduce);
  if (detail::should_validate_indices(point2voxel)) {
    detail::check_scatter_indices(point2voxel, voxel_points_count, argmax);
  }
  return Kernel(grad_voxel_feats, point2voxel, voxel_points_count, argmax, r);
}

void hard_voxelize_check(const at::Tensor& points, c10::ArrayRef<double> voxel_size, c10::ArrayRef<double> coors_range,
                         c10::SymInt max_points, int64_t max_voxels) {
  detail::check_hard_voxelize(points, voxel_size, coors_range, max_points, max_voxels);
}

void dynamic_scatter_check(const at::Tensor& feats, const at::Tensor& coors, c10::string_view reduce) {
  detail::check_dynamic_scatter(feats, coors, reduce);
}

} // namespace

at::Tensor dynamic_voxelize(const at::Tensor& points, at::ArrayRef<double> voxel_size,
                            at::ArrayRef<double> coors_range) {
  static const auto op = detail::op_handle<DynamicVoxelizeFn>("mmops::dynamic_voxelize");
  return op.call(points, voxel_size, coors_range);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> hard_voxelize(const at::Tensor& points, at::ArrayRef<double> voxel_size,
                                                             at::ArrayRef<double> coors_range, int64_t max_points,
                                                             int64_t max_voxels) {
  static const auto op = detail::op_handle<HardVoxelizeFn>("mmops::hard_voxelize");
  return op.call(points, voxel_size, coors_range, c10::SymInt(max_points), max_voxels);
}

std::tuple<at::Tensor, at::Tensor> dynamic_scatter(const at::Tensor& feats, const at::Tensor& coors,
                                                   c10::string_view reduce) {
  static const auto op = detail::op_handle<DynamicScatterFn>("mmops::dynamic_scatter");
  return op.call(feats, coors, reduce);
}

} // namespace mmops

#define MMOPS_VOXELIZATION_ENTRIES(m, device)                                                    \
  m.impl("dynamic_voxelize", &dynamic_voxelize_entry<kernels::dynamic_voxelize_##device>);       \
  m.impl("hard_voxelize", &hard_voxelize_entry<kernels::hard_voxelize_##device>);                \
  m.impl("dynamic_scatter", &dynamic_scatter_entry<kernels::dynamic_scatter_forward_##device>);  \
  m.impl("_dynamic_scatter_forward", &forward_entry<kernels::dynamic_scatter_forward_##device>); \
  m.impl("_dynamic_scatter_backward", &backward_entry<kernels::dynamic_scatter_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_VOXELIZATION_ENTRIES)

// Every backend, fake and meta tensors included.
TORCH_LIBRARY_IMPL(mmops, CompositeExplicitAutograd, m) {
  m.impl("_hard_voxelize_check", &mmops::hard_voxelize_check);
  m.impl("_dynamic_scatter_check", &mmops::dynamic_scatter_check);
}
MMOPS_REGISTER_AUTOCAST(kDataDtype, "dynamic_voxelize", "hard_voxelize", "dynamic_scatter")

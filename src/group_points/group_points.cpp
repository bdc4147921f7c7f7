// mmops::gather_points, group_points and stack_group_points: schemas, device
// entries (CPU/CUDA registration) and the public C++ API. group_points is
// gather_points on the indices flattened to [B, npoint * nsample]. Validation
// in group_points_checks.cpp, kernels in kernels/group_points, meta in
// group_points_meta.cpp, autograd in group_points_autograd.cpp.

#include "group_points/group_points_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"
#include "common/index_policy.h"

#include <mmops/group_points.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m, "gather_points(Tensor features, Tensor indices) -> Tensor");
  define_op(m, "_gather_points_backward(Tensor grad_output, Tensor indices, SymInt n) -> Tensor");
  define_op(m, "group_points(Tensor features, Tensor indices) -> Tensor");
  define_op(m, "_group_points_backward(Tensor grad_output, Tensor indices, SymInt n) -> Tensor");
  define_op(m,
            "stack_group_points(Tensor features, Tensor features_batch_cnt, Tensor indices, "
            "Tensor indices_batch_cnt) -> Tensor");
  define_op(m,
            "_stack_group_points_backward(Tensor grad_output, Tensor features_batch_cnt, Tensor indices, "
            "Tensor indices_batch_cnt, SymInt n) -> Tensor");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), the indices' values
// when the index policy says so (CPU always), then the kernel.

void apply_index_policy(const char* op, const at::Tensor& indices, int64_t n) {
  if (detail::should_validate_indices(indices)) {
    detail::check_point_indices(op, indices, n);
  }
}

template <auto Gather>
at::Tensor gather_entry(const at::Tensor& features, const at::Tensor& indices) {
  detail::check_gather_points_forward(features, indices);
  apply_index_policy(kGatherPointsOp, indices, features.size(2));
  return Gather(features, indices);
}

template <auto GatherBackward>
at::Tensor gather_backward_entry(const at::Tensor& grad_output, const at::Tensor& indices, c10::SymInt n) {
  detail::check_gather_points_backward(grad_output, indices, n);
  const int64_t points = n.guard_int(__FILE__, __LINE__);
  apply_index_policy(kGatherPointsOp, indices, points);
  return GatherBackward(grad_output, indices, points);
}

template <auto Gather>
at::Tensor group_entry(const at::Tensor& features, const at::Tensor& indices) {
  detail::check_group_points_forward(features, indices);
  apply_index_policy(kGroupPointsOp, indices, features.size(2));
  const int64_t batch = indices.size(0), npoint = indices.size(1), nsample = indices.size(2);
  return Gather(features, indices.reshape({batch, npoint * nsample})).view({batch, features.size(1), npoint, nsample});
}

template <auto GatherBackward>
at::Tensor group_backward_entry(const at::Tensor& grad_output, const at::Tensor& indices, c10::SymInt n) {
  detail::check_group_points_backward(grad_output, indices, n);
  const int64_t points = n.guard_int(__FILE__, __LINE__);
  apply_index_policy(kGroupPointsOp, indices, points);
  const int64_t batch = indices.size(0), samples = indices.size(1) * indices.size(2);
  return GatherBackward(grad_output.reshape({batch, grad_output.size(1), samples}), indices.reshape({batch, samples}),
                        points);
}

template <auto Kernel>
at::Tensor stack_entry(const at::Tensor& features, const at::Tensor& features_batch_cnt, const at::Tensor& indices,
                       const at::Tensor& indices_batch_cnt) {
  detail::check_stack_group_points_forward(features, features_batch_cnt, indices, indices_batch_cnt);
  if (detail::should_validate_indices(indices)) {
    detail::check_stacked_indices(features_batch_cnt, indices, indices_batch_cnt, features.size(0));
  }
  return Kernel(features, features_batch_cnt, indices, indices_batch_cnt);
}

template <auto Kernel>
at::Tensor stack_backward_entry(const at::Tensor& grad_output, const at::Tensor& features_batch_cnt,
                                const at::Tensor& indices, const at::Tensor& indices_batch_cnt, c10::SymInt n) {
  detail::check_stack_group_points_backward(grad_output, features_batch_cnt, indices, indices_batch_cnt, n);
  const int64_t points = n.guard_int(__FILE__, __LINE__);
  if (detail::should_validate_indices(indices)) {
    detail::check_stacked_indices(features_batch_cnt, indices, indices_batch_cnt, points);
  }
  return Kernel(grad_output, features_batch_cnt, indices, indices_batch_cnt, points);
}

} // namespace

at::Tensor gather_points(const at::Tensor& features, const at::Tensor& indices) {
  static const auto op = detail::op_handle<GatherPointsFn>("mmops::gather_points");
  return op.call(features, indices);
}

at::Tensor group_points(const at::Tensor& features, const at::Tensor& indices) {
  static const auto op = detail::op_handle<GatherPointsFn>("mmops::group_points");
  return op.call(features, indices);
}

at::Tensor stack_group_points(const at::Tensor& features, const at::Tensor& features_batch_cnt,
                              const at::Tensor& indices, const at::Tensor& indices_batch_cnt) {
  static const auto op = detail::op_handle<StackGroupPointsFn>("mmops::stack_group_points");
  return op.call(features, features_batch_cnt, indices, indices_batch_cnt);
}

} // namespace mmops

#define MMOPS_GROUP_POINTS_ENTRIES(m, device)                                                          \
  m.impl("gather_points", &gather_entry<kernels::gather_points_forward_##device>);                     \
  m.impl("_gather_points_backward", &gather_backward_entry<kernels::gather_points_backward_##device>); \
  m.impl("group_points", &group_entry<kernels::gather_points_forward_##device>);                       \
  m.impl("_group_points_backward", &group_backward_entry<kernels::gather_points_backward_##device>);   \
  m.impl("stack_group_points", &stack_entry<kernels::stack_group_points_forward_##device>);            \
  m.impl("_stack_group_points_backward", &stack_backward_entry<kernels::stack_group_points_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_GROUP_POINTS_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "gather_points", "group_points", "stack_group_points")

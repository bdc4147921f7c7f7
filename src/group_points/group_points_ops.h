#pragma once
// Internal to group_points (gather_points, group_points, stack_group_points):
// the validation (group_points_checks.cpp) shared by the device entries and
// the meta kernels, and the dispatcher signature of each schema.

#include "group_points/group_points_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>

namespace mmops {

constexpr const char* kGatherPointsOp = "mmops::gather_points: ";
constexpr const char* kGroupPointsOp = "mmops::group_points: ";
constexpr const char* kStackGroupPointsOp = "mmops::stack_group_points: ";

namespace detail {

// features [B, C, N] floating, indices int32 [B, M]; fake tensors too.
void check_gather_points_forward(const at::Tensor& features, const at::Tensor& indices);
// grad_output [B, C, M], indices int32 [B, M], 0 <= n < 2^31 - 1.
void check_gather_points_backward(const at::Tensor& grad_output, const at::Tensor& indices, const c10::SymInt& n);

// features [B, C, N] floating, indices int32 [B, npoint, nsample].
void check_group_points_forward(const at::Tensor& features, const at::Tensor& indices);
// grad_output [B, C, npoint, nsample], indices int32 [B, npoint, nsample].
void check_group_points_backward(const at::Tensor& grad_output, const at::Tensor& indices, const c10::SymInt& n);

// features [N, C] floating, features_batch_cnt int32 [B], indices int32 [M, nsample],
// indices_batch_cnt int32 [B].
void check_stack_group_points_forward(const at::Tensor& features, const at::Tensor& features_batch_cnt,
                                      const at::Tensor& indices, const at::Tensor& indices_batch_cnt);
// grad_output [M, C, nsample] and the rest as above, n features.
void check_stack_group_points_backward(const at::Tensor& grad_output, const at::Tensor& features_batch_cnt,
                                       const at::Tensor& indices, const at::Tensor& indices_batch_cnt,
                                       const c10::SymInt& n);

// The values (reads the data; the index policy decides when): every index in [0, n).
void check_point_indices(const char* op, const at::Tensor& indices, int64_t n);
// Counts >= 0 summing to n features and to M rows; every index inside its row's batch.
void check_stacked_indices(const at::Tensor& features_batch_cnt, const at::Tensor& indices,
                           const at::Tensor& indices_batch_cnt, int64_t n);

} // namespace detail

// gather_points(Tensor features, Tensor indices) -> Tensor, and group_points (same signature)
using GatherPointsFn = at::Tensor(const at::Tensor&, const at::Tensor&);
// _gather_points_backward / _group_points_backward(Tensor grad_output, Tensor indices, SymInt n) -> Tensor
using GatherPointsBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymInt);
// stack_group_points(Tensor features, Tensor features_batch_cnt, Tensor indices, Tensor indices_batch_cnt) -> Tensor
using StackGroupPointsFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&);
// _stack_group_points_backward(Tensor grad_output, Tensor features_batch_cnt, Tensor indices,
//     Tensor indices_batch_cnt, SymInt n) -> Tensor
using StackGroupPointsBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                              const at::Tensor&, c10::SymInt);

} // namespace mmops

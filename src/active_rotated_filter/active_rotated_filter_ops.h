#pragma once
// Internal to active_rotated_filter: the validation (active_rotated_filter_checks.cpp),
// shared by the device entries and the meta kernels, and the dispatcher
// signature of each schema (for detail::op_handle).

#include "active_rotated_filter/active_rotated_filter_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymIntArrayRef.h>

namespace mmops {

// The prefix of every active_rotated_filter error message.
constexpr const char* kActiveRotatedFilterOp = "mmops::active_rotated_filter: ";

namespace detail {

// Every argument of a forward call; works on real and fake tensors (no data
// access). Sizes still symbolic are -1 in the params (meta only).
ActiveRotatedFilterParams check_active_rotated_filter_forward(const at::Tensor& input, const at::Tensor& indices);

// The arguments of a backward call (input_size = the shape of input).
ActiveRotatedFilterParams check_active_rotated_filter_backward(const at::Tensor& grad_output, const at::Tensor& indices,
                                                               c10::SymIntArrayRef input_size);

// Reads indices and raises unless every value lies in [1, orientations * kH * kW].
void check_active_rotated_filter_indices(const at::Tensor& indices, int64_t entries);

} // namespace detail

// active_rotated_filter(Tensor input, Tensor indices) -> Tensor
using ActiveRotatedFilterFn = at::Tensor(const at::Tensor&, const at::Tensor&);

// _active_rotated_filter_backward(Tensor grad_output, Tensor indices, SymInt[5] input_size) -> Tensor
using ActiveRotatedFilterBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef);

} // namespace mmops

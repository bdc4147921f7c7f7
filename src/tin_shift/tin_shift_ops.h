#pragma once
// Internal to tin_shift: the validation (tin_shift_checks.cpp), shared by the
// device entries (tin_shift.cpp) and the meta kernels (tin_shift_meta.cpp),
// and the dispatcher signature of each schema (for detail::op_handle).

#include "tin_shift/tin_shift_kernels.h"

#include <ATen/core/Tensor.h>

namespace mmops {

// The prefix of every tin_shift error message.
constexpr const char* kTinShiftOp = "mmops::tin_shift: ";

namespace detail {

// input [N, T, C, H * W] or [N, T, C, H, W] and shift [N, G]; works on real and
// fake tensors (no data access). Sizes still symbolic are -1 in the params.
TinShiftParams check_tin_shift_forward(const at::Tensor& input, const at::Tensor& shift);

// The same rules for grad_output (the shape of input) and shift.
TinShiftParams check_tin_shift_backward(const at::Tensor& grad_output, const at::Tensor& shift);

} // namespace detail

// tin_shift(Tensor input, Tensor shift) -> Tensor
using TinShiftFn = at::Tensor(const at::Tensor&, const at::Tensor&);

// _tin_shift_backward(Tensor grad_output, Tensor shift) -> Tensor
using TinShiftBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&);

} // namespace mmops

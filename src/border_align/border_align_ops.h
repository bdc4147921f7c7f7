#pragma once
// Internal to border_align: the validation (border_align_checks.cpp), shared by
// the device entries (border_align.cpp) and the meta kernels
// (border_align_meta.cpp), and the dispatcher signature of each schema (for
// detail::op_handle).

#include "border_align/border_align_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymIntArrayRef.h>

#include <cstdint>
#include <tuple>

namespace mmops {

// The prefix of every border_align error message.
constexpr const char* kBorderAlignOp = "mmops::border_align: ";

namespace detail {

// Every argument of a forward call; works on real and fake tensors (no data
// access). Sizes still symbolic are -1 in the params (meta only).
BorderAlignParams check_border_align_forward(const at::Tensor& input, const at::Tensor& boxes, int64_t pool_size);

// The arguments of a backward call (input_shape = [N, 4C, H, W]).
BorderAlignParams check_border_align_backward(const at::Tensor& grad_output, const at::Tensor& boxes,
                                              const at::Tensor& argmax_idx, int64_t pool_size,
                                              c10::SymIntArrayRef input_shape);

} // namespace detail

// border_align(Tensor input, Tensor boxes, int pool_size) -> Tensor
using BorderAlignFn = at::Tensor(const at::Tensor&, const at::Tensor&, int64_t);

// _border_align_forward(Tensor input, Tensor boxes, int pool_size) -> (Tensor output, Tensor argmax_idx)
using BorderAlignForwardFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, int64_t);

// _border_align_backward(Tensor grad_output, Tensor boxes, Tensor argmax_idx, int pool_size,
//     SymInt[4] input_shape) -> Tensor
using BorderAlignBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t,
                                         c10::SymIntArrayRef);

} // namespace mmops

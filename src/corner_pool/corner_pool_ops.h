#pragma once
// Internal to corner_pool: the validation (corner_pool_checks.cpp), shared by
// the device entries and the meta kernels, and the dispatcher signature of
// each schema (for detail::op_handle).

#include "corner_pool/corner_pool_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <utility>

namespace mmops {

// The prefix of every corner_pool error message.
constexpr const char* kCornerPoolOp = "mmops::corner_pool: ";

namespace detail {

// The mode strings (for parse_choice / choice_name), mmcv's names.
inline constexpr std::pair<const char*, CornerPoolMode> kCornerPoolModes[] = {{"top", CornerPoolMode::Top},
                                                                              {"bottom", CornerPoolMode::Bottom},
                                                                              {"left", CornerPoolMode::Left},
                                                                              {"right", CornerPoolMode::Right}};

// Every argument of a forward call; works on real and fake tensors (no data
// access). Sizes still symbolic are -1 in the params (meta only).
CornerPoolParams check_corner_pool_forward(const at::Tensor& input, c10::string_view mode);

// The arguments of a backward call: grad_output as input.
CornerPoolParams check_corner_pool_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                            c10::string_view mode);

} // namespace detail

// corner_pool(Tensor input, str mode) -> Tensor
using CornerPoolFn = at::Tensor(const at::Tensor&, c10::string_view);

// _corner_pool_backward(Tensor grad_output, Tensor input, str mode) -> Tensor
using CornerPoolBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view);

} // namespace mmops

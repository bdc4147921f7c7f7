#pragma once
// Internal to psa_mask: the validation (psa_mask_checks.cpp), shared by the
// device entries and the meta kernels, and the dispatcher signature of each
// schema (for detail::op_handle).

#include "psa_mask/psa_mask_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <utility>

namespace mmops {

// The prefix of every psa_mask error message.
constexpr const char* kPsaMaskOp = "mmops::psa_mask: ";

namespace detail {

// The psa_type strings (for parse_choice / choice_name).
inline constexpr std::pair<const char*, PsaType> kPsaTypes[] = {{"collect", PsaType::Collect},
                                                                {"distribute", PsaType::Distribute}};

// Every argument of a forward call; works on real and fake tensors (no data
// access). Sizes still symbolic are -1 in the params (meta only).
PsaMaskParams check_psa_mask_forward(const at::Tensor& input, c10::string_view psa_type, at::IntArrayRef mask_size);

// The arguments of a backward call.
PsaMaskParams check_psa_mask_backward(const at::Tensor& grad_output, c10::string_view psa_type,
                                      at::IntArrayRef mask_size);

} // namespace detail

// psa_mask(Tensor input, str psa_type, int[2] mask_size) -> Tensor
using PsaMaskFn = at::Tensor(const at::Tensor&, c10::string_view, at::IntArrayRef);

// _psa_mask_backward(Tensor grad_output, str psa_type, int[2] mask_size) -> Tensor
using PsaMaskBackwardFn = at::Tensor(const at::Tensor&, c10::string_view, at::IntArrayRef);

} // namespace mmops

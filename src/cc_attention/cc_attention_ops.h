#pragma once
// Internal to cc_attention: the validation (cc_attention_checks.cpp), shared by
// the device entries and the meta kernels, and the dispatcher signature of each
// schema (for detail::op_handle).

#include "cc_attention/cc_attention_kernels.h"

#include <ATen/core/Tensor.h>

#include <tuple>

namespace mmops {

// The prefixes of the error messages of the two ops (and of their backward helpers).
constexpr const char* kCaWeightOp = "mmops::ca_weight: ";
constexpr const char* kCaMapOp = "mmops::ca_map: ";

namespace detail {

// t and f: 4-D [N, C, H, W] of one floating dtype, device and shape, H + W >= 1.
// Works on real and fake tensors (no data access); sizes still symbolic are -1
// in the params (meta only).
CcAttentionParams check_ca_weight(const at::Tensor& t, const at::Tensor& f);

// The forward's checks, then grad_weight [N, H + W - 1, H, W] like t.
CcAttentionParams check_ca_weight_backward(const at::Tensor& grad_weight, const at::Tensor& t, const at::Tensor& f);

// g: 4-D [N, C, H, W] floating, H + W >= 1; weight [N, H + W - 1, H, W] of g's dtype and device.
CcAttentionParams check_ca_map(const at::Tensor& weight, const at::Tensor& g);

// The forward's checks, then grad_out of g's shape, dtype and device.
CcAttentionParams check_ca_map_backward(const at::Tensor& grad_out, const at::Tensor& weight, const at::Tensor& g);

} // namespace detail

// ca_weight(Tensor t, Tensor f) -> Tensor
using CaWeightFn = at::Tensor(const at::Tensor&, const at::Tensor&);

// _ca_weight_backward(Tensor grad_weight, Tensor t, Tensor f) -> (Tensor grad_t, Tensor grad_f)
using CaWeightBackwardFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&);

// ca_map(Tensor weight, Tensor g) -> Tensor
using CaMapFn = at::Tensor(const at::Tensor&, const at::Tensor&);

// _ca_map_backward(Tensor grad_out, Tensor weight, Tensor g) -> (Tensor grad_weight, Tensor grad_g)
using CaMapBackwardFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&);

} // namespace mmops

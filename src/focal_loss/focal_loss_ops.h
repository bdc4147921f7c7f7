#pragma once
// Internal to sigmoid_focal_loss and softmax_focal_loss: the validation
// (focal_loss_checks.cpp), shared by the device entries (focal_loss.cpp) and
// the meta kernels (focal_loss_meta.cpp), the reduction names, and the
// dispatcher signature of each schema (for detail::op_handle).

#include "focal_loss/focal_loss_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <cstdint>
#include <optional>
#include <utility>

namespace mmops {

// The prefix of the loss' error messages, e.g. "mmops::sigmoid_focal_loss: ".
constexpr const char* focal_op_prefix(FocalKind kind) {
  return kind == FocalKind::Sigmoid ? "mmops::sigmoid_focal_loss: " : "mmops::softmax_focal_loss: ";
}

// The values of the string argument `reduction` (detail::parse_choice).
inline constexpr std::pair<const char*, focal_loss_math::Reduction> kReductions[] = {
    {"none", focal_loss_math::Reduction::None},
    {"mean", focal_loss_math::Reduction::Mean},
    {"sum", focal_loss_math::Reduction::Sum}};

namespace detail {

// Every argument of a forward call; works on real and fake tensors (no data access).
FocalLossParams check_focal_forward(FocalKind kind, const at::Tensor& input, const at::Tensor& target, double gamma,
                                    double alpha, const std::optional<at::Tensor>& weight, c10::string_view reduction);

// The above plus grad_output's shape: the loss' shape for "none", else 0-d.
FocalLossParams check_focal_backward(FocalKind kind, const at::Tensor& grad_output, const at::Tensor& input,
                                     const at::Tensor& target, double gamma, double alpha,
                                     const std::optional<at::Tensor>& weight, c10::string_view reduction);

// The class ids in target (tensor data): [0, C] for sigmoid (C = background),
// [0, C) for softmax. Reads target; callers follow common/index_policy.h.
void check_class_ids(FocalKind kind, const at::Tensor& target, int64_t classes);

} // namespace detail

// sigmoid_focal_loss / softmax_focal_loss(Tensor input, Tensor target, float gamma=2.0,
//     float alpha=0.25, Tensor? weight=None, str reduction="mean") -> Tensor
using FocalLossFn = at::Tensor(const at::Tensor&, const at::Tensor&, double, double, const std::optional<at::Tensor>&,
                               c10::string_view);

// _sigmoid_focal_loss_backward / _softmax_focal_loss_backward(Tensor grad_output, Tensor input,
//     Tensor target, float gamma, float alpha, Tensor? weight, str reduction) -> Tensor
using FocalLossBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double, double,
                                       const std::optional<at::Tensor>&, c10::string_view);

} // namespace mmops

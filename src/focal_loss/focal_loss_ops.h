#pragma once
// Internal pieces of sigmoid_focal_loss and softmax_focal_loss shared by their
// registration, meta and autograd files: validation and typed dispatcher handles.

#include "focal_loss/focal_loss_kernels.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/string_view.h>

#include <optional>

namespace mmops {

enum class FocalKind { Sigmoid, Softmax };

namespace detail {

// Every argument of a forward call; works on real and fake tensors (no data access).
FocalLossParams check_focal_forward(const char* op, FocalKind kind, const at::Tensor& input,
                                    const at::Tensor& target, double gamma, double alpha,
                                    const std::optional<at::Tensor>& weight,
                                    c10::string_view reduction);

// The above plus grad_output's shape: the loss' shape for "none", else 0-d.
FocalLossParams check_focal_backward(const char* op, FocalKind kind, const at::Tensor& grad_output,
                                     const at::Tensor& input, const at::Tensor& target, double gamma,
                                     double alpha, const std::optional<at::Tensor>& weight,
                                     c10::string_view reduction);

// Class ids in target: [0, C] for sigmoid (C = background), [0, C) for softmax.
// Always checked on CPU; on CUDA only in strict mode and not while a graph is captured.
void check_class_ids_if_needed(const char* op, FocalKind kind, const at::Tensor& target,
                               int64_t classes);

} // namespace detail

namespace ops {

using FocalBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double,
                                   double, const std::optional<at::Tensor>&, c10::string_view);

inline at::Tensor focal_loss_backward(FocalKind kind, const at::Tensor& grad_output,
                                      const at::Tensor& input, const at::Tensor& target,
                                      double gamma, double alpha,
                                      const std::optional<at::Tensor>& weight,
                                      c10::string_view reduction) {
  static auto sigmoid = c10::Dispatcher::singleton()
                            .findSchemaOrThrow("mmops::_sigmoid_focal_loss_backward", "")
                            .typed<FocalBackwardFn>();
  static auto softmax = c10::Dispatcher::singleton()
                            .findSchemaOrThrow("mmops::_softmax_focal_loss_backward", "")
                            .typed<FocalBackwardFn>();
  return (kind == FocalKind::Sigmoid ? sigmoid : softmax)
      .call(grad_output, input, target, gamma, alpha, weight, reduction);
}

} // namespace ops
} // namespace mmops

#pragma once
// Internal to bias_act: the validation (bias_act_checks.cpp), shared by the
// device entries (bias_act.cpp), the meta kernels (bias_act_meta.cpp) and the
// autograd (bias_act_autograd.cpp); the activation table; the dispatcher
// signature of each schema (for detail::op_handle).

#include "bias_act/bias_act_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <cstdint>
#include <optional>

namespace mmops {

// The prefix of every bias_act error message.
constexpr const char* kBiasActOp = "mmops::bias_act: ";

namespace detail {

// An activation's name (mmcv's: "linear", "relu", ...), parsed; an unknown one
// raises naming `act` and the known names.
BiasAct parse_bias_act(c10::string_view act);
const char* bias_act_name(BiasAct act);

// mmcv's defaults of an activation: alpha (lrelu's slope 0.2, else 0) and gain
// (sqrt(2) for relu, lrelu and swish, else 1).
double default_alpha(BiasAct act);
double default_gain(BiasAct act);

// What the backward of an act reads: input and bias (swish, and the acts with
// a second derivative, whose double backward returns their gradient) and the
// forward's output (every act but linear and swish; linear with a clamp).
bool backward_needs_input(BiasAct act);
bool backward_needs_output(BiasAct act, double clamp);

// Every argument of a forward call, the defaults resolved; works on real and
// fake tensors.
BiasActParams check_bias_act_forward(const at::Tensor& input, const std::optional<at::Tensor>& bias, int64_t dim,
                                     c10::string_view act, std::optional<double> alpha, std::optional<double> gain,
                                     std::optional<double> clamp);

// The arguments of a backward call (clamp < 0: none; order 1 or 2).
BiasActParams check_bias_act_backward(const at::Tensor& grad_output, const std::optional<at::Tensor>& input,
                                      const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& output,
                                      int64_t dim, c10::string_view act, double alpha, double gain, double clamp,
                                      int64_t order);

} // namespace detail

// bias_act(Tensor input, Tensor? bias=None, int dim=1, str act="linear", float? alpha=None,
//          float? gain=None, float? clamp=None) -> Tensor
using BiasActFn = at::Tensor(const at::Tensor&, const std::optional<at::Tensor>&, int64_t, c10::string_view,
                             std::optional<double>, std::optional<double>, std::optional<double>);

// _bias_act_backward(Tensor grad_output, Tensor? input, Tensor? bias, Tensor? output, int dim, str act,
//                    float alpha, float gain, float clamp, int order=1) -> Tensor
using BiasActBackwardFn = at::Tensor(const at::Tensor&, const std::optional<at::Tensor>&,
                                     const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, int64_t,
                                     c10::string_view, double, double, double, int64_t);

} // namespace mmops

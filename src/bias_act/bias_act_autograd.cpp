// Autograd of bias_act, in C++ so that backward works from C++ programs and
// from TorchScript loaded without Python; first and second order, as mmcv's.
//
// The gradient of input is _bias_act_backward(grad_output, ..., order=1) =
// grad_output * gain * f'(x + bias), 0 where the output was clamped. It is
// linear in grad_output (its gradient there: the same op on the incoming
// gradient, so relu / lrelu / linear, whose f'' is 0, have gradients of any
// order) and its derivative w.r.t. input is the same op at order 2 on the
// incoming gradient times grad_output (bias: that summed over every dim but
// `dim`). The forward's output, which the order-1 op reads for most acts, gets
// no gradient there: the order-2 term is the total derivative along
// output = bias_act(input, bias) (mmcv's design). A third derivative w.r.t.
// input raises. Every pass goes through the dispatcher with autograd, so a
// create_graph backward records it again.

#include "bias_act/bias_act_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sum.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <vector>

namespace mmops {
namespace {

const c10::TypedOperatorHandle<BiasActBackwardFn>& bias_act_backward_op() {
  static const auto op = detail::op_handle<BiasActBackwardFn>("mmops::_bias_act_backward");
  return op;
}

const c10::TypedOperatorHandle<BiasActFn>& bias_act_op() {
  static const auto op = detail::op_handle<BiasActFn>("mmops::bias_act");
  return op;
}

std::optional<at::Tensor> present(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

// bias's gradient: the sum over every dim of t but `dim` (a copy for a 1-D t).
at::Tensor sum_but(const at::Tensor& t, int64_t dim) {
  const int64_t d = at::maybe_wrap_dim(dim, t.dim());
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (i != d) {
      dims.push_back(i);
    }
  }
  return dims.empty() ? t.clone() : at::sum(t, dims);
}

// The resolved arguments of one bias_act call, as the backward op takes them.
struct Config {
  int64_t dim;
  std::string act;
  double alpha;
  double gain;
  double clamp;

  void save(AutogradContext* ctx) const {
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["act"] = act;
    ctx->saved_data["alpha"] = alpha;
    ctx->saved_data["gain"] = gain;
    ctx->saved_data["clamp"] = clamp;
  }

  static Config saved(AutogradContext* ctx) {
    return {ctx->saved_data["dim"].toInt(), ctx->saved_data["act"].toStringRef(), ctx->saved_data["alpha"].toDouble(),
            ctx->saved_data["gain"].toDouble(), ctx->saved_data["clamp"].toDouble()};
  }
};

at::Tensor call_backward_op(const at::Tensor& grad, const std::optional<at::Tensor>& input,
                            const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& output,
                            const Config& c, int64_t order) {
  return bias_act_backward_op().call(grad, input, bias, output, c.dim, c.act, c.alpha, c.gain, c.clamp, order);
}

at::Tensor apply_backward(const at::Tensor& grad, const std::optional<at::Tensor>& input,
                          const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& output,
                          const Config& c, int64_t order);

class BiasActBackwardFunction : public torch::autograd::Function<BiasActBackwardFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& grad_output, const std::optional<at::Tensor>& input,
                            const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& output,
                            const Config& c, int64_t order) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    ctx->save_for_backward(
        {grad_output, input.value_or(at::Tensor()), bias.value_or(at::Tensor()), output.value_or(at::Tensor())});
    c.save(ctx);
    ctx->saved_data["order"] = order;
    ctx->saved_data["has_input"] = input.has_value();
    ctx->saved_data["has_bias"] = bias.has_value();
    return call_backward_op(grad_output, input, bias, output, c, order);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const std::optional<at::Tensor> input = present(saved[1]), bias = present(saved[2]), output = present(saved[3]);
    const Config c = Config::saved(ctx);
    const int64_t order = ctx->saved_data["order"].toInt();
    // needs_input_grad counts the tensors given (an absent optional has no edge)
    const bool has_input = ctx->saved_data["has_input"].toBool(), has_bias = ctx->saved_data["has_bias"].toBool();
    const bool input_grad = has_input && ctx->needs_input_grad(1);
    const bool bias_grad = has_bias && ctx->needs_input_grad(has_input ? 2 : 1);
    at::Tensor d_grad, d_input, d_bias;
    if (ctx->needs_input_grad(0)) { // linear in grad_output
      d_grad = apply_backward(grads[0], input, bias, output, c, order);
    }
    const BiasAct act = detail::parse_bias_act(c.act);
    if (bias_act_math::has_second_derivative(act) && (input_grad || bias_grad)) {
      TORCH_CHECK(order == 1, kBiasActOp, "gradients of third order w.r.t. input or bias are not implemented (act \"",
                  c.act, "\"; mmcv has first and second order)");
      d_input = apply_backward(at::mul(grads[0], saved[0]), input, bias, output, c, 2);
      if (bias_grad) {
        d_bias = sum_but(d_input, c.dim);
      }
      if (!input_grad) {
        d_input = at::Tensor();
      }
    }
    return {d_grad, d_input, d_bias, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// The backward op, recorded for a higher-order gradient when one is being built.
at::Tensor apply_backward(const at::Tensor& grad, const std::optional<at::Tensor>& input,
                          const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& output,
                          const Config& c, int64_t order) {
  std::vector<at::Tensor> differentiable = {grad};
  for (const auto& t : {input, bias}) {
    if (t.has_value()) {
      differentiable.push_back(*t);
    }
  }
  if (!detail::needs_grad(differentiable)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return call_backward_op(grad, input, bias, output, c, order);
  }
  return BiasActBackwardFunction::apply(grad, input, bias, output, c, order);
}

class BiasActFunction : public torch::autograd::Function<BiasActFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const std::optional<at::Tensor>& bias,
                            int64_t dim, const std::string& act, std::optional<double> alpha,
                            std::optional<double> gain, std::optional<double> clamp) {
    at::Tensor output;
    {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      output = bias_act_op().call(input, bias, dim, act, alpha, gain, clamp); // validates
    }
    const BiasAct a = detail::parse_bias_act(act);
    const Config c{dim, act, alpha.value_or(detail::default_alpha(a)), gain.value_or(detail::default_gain(a)),
                   clamp.value_or(-1.0)};
    c.save(ctx);
    ctx->saved_data["has_bias"] = bias.has_value();
    // Only what the backward reads (relu / lrelu: the output alone, as mmcv).
    const bool keep_input = detail::backward_needs_input(a);
    ctx->save_for_backward({keep_input ? input : at::Tensor(), keep_input ? bias.value_or(at::Tensor()) : at::Tensor(),
                            detail::backward_needs_output(a, c.clamp) ? output : at::Tensor()});
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const Config c = Config::saved(ctx);
    const at::Tensor grad_input =
        c.act == "linear" && c.gain == 1.0 && c.clamp < 0
            ? grads[0] // the identity
            : apply_backward(grads[0], present(saved[0]), present(saved[1]), present(saved[2]), c, 1);
    const bool bias_grad = ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(1);
    const at::Tensor grad_bias = bias_grad ? sum_but(grad_input, c.dim) : at::Tensor();
    return {grad_input, grad_bias, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor bias_act_autograd(const at::Tensor& input, const std::optional<at::Tensor>& bias, int64_t dim,
                             c10::string_view act, std::optional<double> alpha, std::optional<double> gain,
                             std::optional<double> clamp) {
  std::vector<at::Tensor> differentiable = {input};
  if (bias.has_value()) {
    differentiable.push_back(*bias);
  }
  if (!detail::needs_grad(differentiable)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return bias_act_op().call(input, bias, dim, act, alpha, gain, clamp);
  }
  return BiasActFunction::apply(input, bias, dim, std::string(act), alpha, gain, clamp);
}

at::Tensor bias_act_backward_autograd(const at::Tensor& grad_output, const std::optional<at::Tensor>& input,
                                      const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& output,
                                      int64_t dim, c10::string_view act, double alpha, double gain, double clamp,
                                      int64_t order) {
  return apply_backward(grad_output, input, bias, output, Config{dim, std::string(act), alpha, gain, clamp}, order);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("bias_act", &mmops::bias_act_autograd);
  m.impl("_bias_act_backward", &mmops::bias_act_backward_autograd);
}

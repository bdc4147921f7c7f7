// Autograd of filtered_lrelu, in C++ so that backward works from C++ programs
// and from TorchScript loaded without Python.
//
// With U the upsampling filter pass, D the filtering downsampling one and M
// the derivative of the pointwise step (gain, gain * slope or 0 where
// clamped: the mask _filtered_lrelu_forward records), the gradient of input
// is U^T M D^T grad_output (_filtered_lrelu_backward) and bias's is its sum
// over N, H and W. That gradient is linear in grad_output and M is piecewise
// constant in input (its derivative is 0 almost everywhere), so its gradient
// w.r.t. grad_output is the adjoint D M U (the same op with transpose=True),
// whose gradient is the first one again: gradients of any order w.r.t. the
// incoming gradients (StyleGAN's R1 penalty); w.r.t. input they are 0 past
// the first order, as the composite's. Every pass goes through the dispatcher
// with autograd, so a create_graph backward records it again. The filters get
// no gradient (as mmcv): a filter that requires grad is refused.

#include "filtered_lrelu/filtered_lrelu_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <ATen/ops/sum.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <optional>
#include <vector>

namespace mmops {
namespace {

using SymInts = std::vector<c10::SymInt>;

const c10::TypedOperatorHandle<FilteredLreluFn>& public_op() {
  static const auto op = detail::op_handle<FilteredLreluFn>("mmops::filtered_lrelu");
  return op;
}

const c10::TypedOperatorHandle<FilteredLreluForwardFn>& forward_op() {
  static const auto op = detail::op_handle<FilteredLreluForwardFn>("mmops::_filtered_lrelu_forward");
  return op;
}

const c10::TypedOperatorHandle<FilteredLreluBackwardFn>& backward_op() {
  static const auto op = detail::op_handle<FilteredLreluBackwardFn>("mmops::_filtered_lrelu_backward");
  return op;
}

// The arguments of the backward op besides grad, the mask and the filters.
struct Config {
  int64_t up;
  int64_t down;
  SymInts padding;
  double gain;
  double slope;
  SymInts input_size; // the forward input's [H, W]

  void save(AutogradContext* ctx) const {
    ctx->saved_data["up"] = up;
    ctx->saved_data["down"] = down;
    detail::save_sizes(ctx, "padding", padding);
    ctx->saved_data["gain"] = gain;
    ctx->saved_data["slope"] = slope;
    detail::save_sizes(ctx, "input_size", input_size);
  }

  static Config saved(AutogradContext* ctx) {
    return {ctx->saved_data["up"].toInt(),       ctx->saved_data["down"].toInt(),
            detail::saved_sizes(ctx, "padding"), ctx->saved_data["gain"].toDouble(),
            ctx->saved_data["slope"].toDouble(), detail::saved_sizes(ctx, "input_size")};
  }
};

at::Tensor apply_backward(const at::Tensor& grad, const at::Tensor& mask, const at::Tensor& filter_up,
                          const at::Tensor& filter_down, const Config& c, bool transpose);

class BackwardFunction : public torch::autograd::Function<BackwardFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& grad, const at::Tensor& mask,
                            const at::Tensor& filter_up, const at::Tensor& filter_down, const Config& c,
                            bool transpose) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    ctx->save_for_backward({mask, filter_up, filter_down});
    c.save(ctx);
    ctx->saved_data["transpose"] = transpose;
    return backward_op().call(grad, mask, filter_up, filter_down, c.up, c.down, c.padding, c.gain, c.slope,
                              c.input_size, transpose);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const Config c = Config::saved(ctx);
    const bool transpose = ctx->saved_data["transpose"].toBool();
    at::Tensor d_grad;
    if (ctx->needs_input_grad(0)) { // linear in grad: the adjoint pass
      d_grad = apply_backward(grads[0], saved[0], saved[1], saved[2], c, !transpose);
    }
    return {d_grad, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// The backward op, recorded for a higher-order gradient when one is being built.
at::Tensor apply_backward(const at::Tensor& grad, const at::Tensor& mask, const at::Tensor& filter_up,
                          const at::Tensor& filter_down, const Config& c, bool transpose) {
  if (!detail::needs_grad({grad})) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return backward_op().call(grad, mask, filter_up, filter_down, c.up, c.down, c.padding, c.gain, c.slope,
                              c.input_size, transpose);
  }
  return BackwardFunction::apply(grad, mask, filter_up, filter_down, c, transpose);
}

class FilteredLreluFunction : public torch::autograd::Function<FilteredLreluFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& filter_up,
                            const at::Tensor& filter_down, const std::optional<at::Tensor>& bias, int64_t up,
                            int64_t down, c10::SymIntArrayRef padding, double gain, double slope,
                            std::optional<double> clamp) {
    at::Tensor output, mask;
    {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      std::tie(output, mask) =
          forward_op().call(input, filter_up, filter_down, bias, up, down, padding, gain, slope, clamp); // validates
    }
    ctx->save_for_backward({mask, filter_up, filter_down});
    const Config c{up, down, padding.vec(), gain, slope, {input.sym_size(2), input.sym_size(3)}};
    c.save(ctx);
    ctx->saved_data["has_bias"] = bias.has_value();
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const Config c = Config::saved(ctx);
    // needs_input_grad counts the tensors given (an absent bias has no edge)
    const bool bias_grad = ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(3);
    at::Tensor grad_input, grad_bias;
    if (ctx->needs_input_grad(0) || bias_grad) {
      grad_input = apply_backward(grads[0], saved[0], saved[1], saved[2], c, false);
    }
    if (bias_grad) {
      grad_bias = at::sum(grad_input, {0, 2, 3});
    }
    if (!ctx->needs_input_grad(0)) {
      grad_input = at::Tensor();
    }
    // gradients of (input, filter_up, filter_down, bias, up, down, padding, gain, slope, clamp)
    return {grad_input,   at::Tensor(), at::Tensor(), grad_bias,    at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

void refuse_filter_grads(const at::Tensor& filter_up, const at::Tensor& filter_down) {
  for (const auto& [name, f] : {std::pair<const char*, const at::Tensor&>{"filter_up", filter_up},
                                std::pair<const char*, const at::Tensor&>{"filter_down", filter_down}}) {
    TORCH_CHECK(!(f.requires_grad() && at::GradMode::is_enabled()), kFilteredLreluOp, name,
                " gets no gradient (as mmcv's); expected a filter that does not require grad (detach it), but got "
                "one that requires grad");
  }
}

at::Tensor filtered_lrelu_autograd(const at::Tensor& input, const at::Tensor& filter_up, const at::Tensor& filter_down,
                                   const std::optional<at::Tensor>& bias, int64_t up, int64_t down,
                                   c10::SymIntArrayRef padding, double gain, double slope,
                                   std::optional<double> clamp) {
  refuse_filter_grads(filter_up, filter_down);
  std::vector<at::Tensor> differentiable = {input};
  if (bias.has_value()) {
    differentiable.push_back(*bias);
  }
  if (!detail::needs_grad(differentiable)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return public_op().call(input, filter_up, filter_down, bias, up, down, padding, gain, slope, clamp);
  }
  return FilteredLreluFunction::apply(input, filter_up, filter_down, bias, up, down, padding, gain, slope, clamp);
}

at::Tensor filtered_lrelu_backward_autograd(const at::Tensor& grad, const at::Tensor& mask, const at::Tensor& filter_up,
                                            const at::Tensor& filter_down, int64_t up, int64_t down,
                                            c10::SymIntArrayRef padding, double gain, double slope,
                                            c10::SymIntArrayRef input_size, bool transpose) {
  refuse_filter_grads(filter_up, filter_down);
  return apply_backward(grad, mask, filter_up, filter_down,
                        Config{up, down, padding.vec(), gain, slope, input_size.vec()}, transpose);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("filtered_lrelu", &mmops::filtered_lrelu_autograd);
  m.impl("_filtered_lrelu_backward", &mmops::filtered_lrelu_backward_autograd);
}

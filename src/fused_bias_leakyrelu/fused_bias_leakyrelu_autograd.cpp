// Autograd of fused_bias_leakyrelu, in C++ so that backward works from C++
// programs and from TorchScript loaded without Python. Gradients of any order
// (StyleGAN's R1 and path-length penalties): the gradient of input is
// _fused_bias_leakyrelu_backward(grad_output, output) = grad_output * (output > 0
// ? scale : negative_slope * scale), linear in grad_output with a piecewise
// constant factor, so its own gradient is the same op on the incoming gradient
// (w.r.t. grad_output) and 0 w.r.t. output; bias gets the sum of the input's
// gradient over every dim but 1. Both passes go through the dispatcher with
// autograd, so a create_graph backward records them again.

#include "fused_bias_leakyrelu/fused_bias_leakyrelu_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <ATen/ops/sum.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <vector>

namespace mmops {
namespace {

const c10::TypedOperatorHandle<FusedBiasLeakyReLUBackwardFn>& backward_op() {
  static const auto op = detail::op_handle<FusedBiasLeakyReLUBackwardFn>("mmops::_fused_bias_leakyrelu_backward");
  return op;
}

// The sum over every dim but 1: bias's gradient.
at::Tensor sum_but_channels(const at::Tensor& t) {
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < t.dim(); ++d) {
    dims.push_back(d);
  }
  return at::sum(t, dims);
}

class BackwardFunction : public torch::autograd::Function<BackwardFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& grad_output, const at::Tensor& output,
                            double negative_slope, double scale) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    ctx->save_for_backward({output});
    ctx->saved_data["negative_slope"] = negative_slope;
    ctx->saved_data["scale"] = scale;
    return backward_op().call(grad_output, output, negative_slope, scale);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor output = ctx->get_saved_variables()[0];
    // Linear in grad_output: the same mask on the incoming gradient; output: 0 (piecewise constant).
    at::Tensor grad = backward_op().call(grads[0], output, ctx->saved_data["negative_slope"].toDouble(),
                                         ctx->saved_data["scale"].toDouble());
    return {grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class FusedBiasLeakyReLUFunction : public torch::autograd::Function<FusedBiasLeakyReLUFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& bias,
                            double negative_slope, double scale) {
    static const auto op = detail::op_handle<FusedBiasLeakyReLUFn>("mmops::fused_bias_leakyrelu");
    at::Tensor output;
    {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      output = op.call(input, bias, negative_slope, scale);
    }
    ctx->save_for_backward({output});
    ctx->saved_data["negative_slope"] = negative_slope;
    ctx->saved_data["scale"] = scale;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor output = ctx->get_saved_variables()[0];
    const at::Tensor grad_input = apply_backward(grads[0], output, ctx->saved_data["negative_slope"].toDouble(),
                                                 ctx->saved_data["scale"].toDouble());
    const at::Tensor grad_bias = ctx->needs_input_grad(1) ? sum_but_channels(grad_input) : at::Tensor();
    return {grad_input, grad_bias, at::Tensor(), at::Tensor()};
  }

  // The backward op, recorded for a higher-order gradient when one is being built.
  static at::Tensor apply_backward(const at::Tensor& grad_output, const at::Tensor& output, double negative_slope,
                                   double scale) {
    if (!detail::needs_grad({grad_output})) {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      return backward_op().call(grad_output, output, negative_slope, scale);
    }
    return BackwardFunction::apply(grad_output, output, negative_slope, scale);
  }
};

at::Tensor fused_bias_leakyrelu_autograd(const at::Tensor& input, const at::Tensor& bias, double negative_slope,
                                         double scale) {
  if (!detail::needs_grad({input, bias})) {
    static const auto op = detail::op_handle<FusedBiasLeakyReLUFn>("mmops::fused_bias_leakyrelu");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, bias, negative_slope, scale);
  }
  return FusedBiasLeakyReLUFunction::apply(input, bias, negative_slope, scale);
}

at::Tensor backward_autograd(const at::Tensor& grad_output, const at::Tensor& output, double negative_slope,
                             double scale) {
  return FusedBiasLeakyReLUFunction::apply_backward(grad_output, output, negative_slope, scale);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("fused_bias_leakyrelu", &mmops::fused_bias_leakyrelu_autograd);
  m.impl("_fused_bias_leakyrelu_backward", &mmops::backward_autograd);
}

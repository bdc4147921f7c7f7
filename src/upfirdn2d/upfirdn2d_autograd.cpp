// Autograd of upfirdn2d, in C++ so that backward works from C++ programs and
// from TorchScript loaded without Python. Differentiable in input to any order
// (StyleGAN's R1 and path-length penalties): the gradient of upfirdn2d is
// upfirdn2d of grad_output with the flipped kernel, up and down swapped and
// the pads that bring it back to the input's size, called through the
// dispatcher so that a create_graph backward records it again. kernel gets no
// gradient (as mmcv): a kernel that requires grad is refused.

#include "upfirdn2d/upfirdn2d_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <ATen/ops/flip.h>
#include <ATen/ops/zeros.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <vector>

namespace mmops {
namespace {

using SymInts = std::vector<c10::SymInt>;

class Upfirdn2dFunction : public torch::autograd::Function<Upfirdn2dFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& kernel,
                            c10::IntArrayRef up, c10::IntArrayRef down, c10::SymIntArrayRef pad) {
    static const auto op = detail::op_handle<Upfirdn2dFn>("mmops::upfirdn2d");
    at::Tensor output;
    {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      output = op.call(input, kernel, up, down, pad);
    }
    ctx->save_for_backward({kernel});
    detail::save_sizes(ctx, "input_size", input.sym_sizes());
    detail::save_sizes(ctx, "pad", pad);
    ctx->saved_data["up"] = up.vec();
    ctx->saved_data["down"] = down.vec();
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto op = detail::op_handle<Upfirdn2dFn>("mmops::upfirdn2d");
    const at::Tensor& grad_output = grad_outputs[0];
    const at::Tensor kernel = ctx->get_saved_variables()[0];
    const SymInts in = detail::saved_sizes(ctx, "input_size");
    const SymInts pad = detail::saved_sizes(ctx, "pad");
    const std::vector<int64_t> up = ctx->saved_data["up"].toIntVector();
    const std::vector<int64_t> down = ctx->saved_data["down"].toIntVector();
    if ((in[2].sym_eq(0) | in[3].sym_eq(0)).guard_bool(__FILE__, __LINE__)) {
      // no input pixels (the output read only padding): the adjoint below would have no valid
      // output size; sizes 0 are static under torch.compile, so this guard does not recompile
      return {at::zeros_symint(in, grad_output.options()), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    }
    const c10::SymInt kh = kernel.sym_size(0), kw = kernel.sym_size(1);
    const c10::SymInt out_h = grad_output.sym_size(2), out_w = grad_output.sym_size(3);
    // The adjoint: pad0' = k - pad0 - 1 and pad1' such that the output is the input's size.
    const SymInts grad_pad = {kw - pad[0] - 1, in[3] * up[0] - out_w * down[0] + pad[0] - up[0] + 1, kh - pad[2] - 1,
                              in[2] * up[1] - out_h * down[1] + pad[2] - up[1] + 1};
    // Through the dispatcher with autograd: differentiable again when create_graph is on.
    at::Tensor grad_input = op.call(grad_output, at::flip(kernel, {0, 1}), down, up, grad_pad);
    // Gradients for (input, kernel, up, down, pad).
    return {grad_input, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor upfirdn2d_autograd(const at::Tensor& input, const at::Tensor& kernel, c10::IntArrayRef up,
                              c10::IntArrayRef down, c10::SymIntArrayRef pad) {
  TORCH_CHECK(!(kernel.requires_grad() && at::GradMode::is_enabled()), kUpfirdn2dOp,
              "kernel gets no gradient (as mmcv's); expected a kernel that does not require grad (detach it), but "
              "got one that requires grad");
  if (!detail::needs_grad({input})) {
    static const auto op = detail::op_handle<Upfirdn2dFn>("mmops::upfirdn2d");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, kernel, up, down, pad);
  }
  return Upfirdn2dFunction::apply(input, kernel, up, down, pad);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("upfirdn2d", &mmops::upfirdn2d_autograd);
}

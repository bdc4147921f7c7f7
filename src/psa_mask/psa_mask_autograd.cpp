// Autograd of psa_mask, in C++ so that backward works from C++ programs and
// from TorchScript loaded without Python. Differentiable in input.

#include "psa_mask/psa_mask_ops.h"

#include "common/autograd_utils.h"
#include "common/check_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

#include <string>

namespace mmops {
namespace {

class PsaMaskFunction : public torch::autograd::Function<PsaMaskFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, c10::string_view psa_type,
                            at::IntArrayRef mask_size) {
    static const auto op = detail::op_handle<PsaMaskFn>("mmops::psa_mask");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor output = op.call(input, psa_type, mask_size);
    ctx->saved_data["psa_type"] = std::string(psa_type);
    ctx->saved_data["mask_size"] = mask_size.vec();
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<PsaMaskBackwardFn>("mmops::_psa_mask_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::psa_mask", grad_output);
    const std::string psa_type = ctx->saved_data["psa_type"].toStringRef();
    const std::vector<int64_t> mask_size = ctx->saved_data["mask_size"].toIntVector();
    // Gradients for (input, psa_type, mask_size).
    return {backward_op.call(grad_output, psa_type, mask_size), at::Tensor(), at::Tensor()};
  }
};

at::Tensor psa_mask_autograd(const at::Tensor& input, c10::string_view psa_type, at::IntArrayRef mask_size) {
  if (!detail::needs_grad({input})) {
    static const auto op = detail::op_handle<PsaMaskFn>("mmops::psa_mask");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, psa_type, mask_size);
  }
  return PsaMaskFunction::apply(input, psa_type, mask_size);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("psa_mask", &mmops::psa_mask_autograd);
}

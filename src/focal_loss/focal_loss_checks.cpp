// Argument validation of the focal losses, on every backend (the meta kernels
// run it too, so fake tensors raise the same errors).

#include "focal_loss/focal_loss_ops.h"

#include "common/check_utils.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>

#include <cmath>
#include <string>

namespace mmops {
namespace detail {

FocalLossParams check_focal_forward(FocalKind kind, const at::Tensor& input, const at::Tensor& target, double gamma,
                                    double alpha, const std::optional<at::Tensor>& weight, c10::string_view reduction) {
  const char* op = focal_op_prefix(kind);
  TORCH_CHECK(input.dim() == 2, op, "expected input to be a 2-D tensor [N, C] of logits, but got a ", input.dim(),
              "-D tensor of shape ", shape_of(input));
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), op, "expected input to have a floating point dtype, but got ",
              input.scalar_type());
  TORCH_CHECK(target.dim() == 1, op, "expected target to be a 1-D tensor [N] of class ids, but got shape ",
              shape_of(target));
  TORCH_CHECK(target.scalar_type() == at::kLong, op, "expected target to be int64 (class ids), but got ",
              target.scalar_type());
  TORCH_CHECK(target.device() == input.device(), op, "expected target on the device of input (", input.device(),
              "), but got ", target.device());
  TORCH_SYM_CHECK(target.sym_size(0).sym_eq(input.sym_size(0)), op, "expected target to have N = ", input.sym_size(0),
                  " entries (input.size(0)), but got ", target.sym_size(0));
  if (weight.has_value() && weight->defined()) {
    const at::Tensor& w = *weight;
    TORCH_CHECK(w.dim() == 1, op, "expected weight to be a 1-D tensor [C] of class weights, but got shape ",
                shape_of(w));
    TORCH_SYM_CHECK(w.sym_size(0).sym_eq(input.sym_size(1)), op, "expected weight to have C = ", input.sym_size(1),
                    " entries (input.size(1)), but got ", w.sym_size(0));
    TORCH_CHECK(w.scalar_type() == input.scalar_type(), op, "expected weight to have the dtype of input (",
                input.scalar_type(), "), but got ", w.scalar_type());
    TORCH_CHECK(w.device() == input.device(), op, "expected weight on the device of input (", input.device(),
                "), but got ", w.device());
  }
  TORCH_CHECK(std::isfinite(gamma) && gamma >= 0, op, "gamma must be a finite number >= 0, but got ", gamma);
  TORCH_CHECK(std::isfinite(alpha), op, "alpha must be a finite number, but got ", alpha);
  FocalLossParams p{};
  p.kind = kind;
  p.gamma = gamma;
  p.alpha = alpha;
  p.reduction = parse_choice(op, "reduction", reduction, kReductions);
  return p;
}

FocalLossParams check_focal_backward(FocalKind kind, const at::Tensor& grad_output, const at::Tensor& input,
                                     const at::Tensor& target, double gamma, double alpha,
                                     const std::optional<at::Tensor>& weight, c10::string_view reduction) {
  const char* op = focal_op_prefix(kind);
  const FocalLossParams p = check_focal_forward(kind, input, target, gamma, alpha, weight, reduction);
  TORCH_CHECK(grad_output.scalar_type() == input.scalar_type(), op, "expected grad_output to have the dtype of input (",
              input.scalar_type(), "), but got ", grad_output.scalar_type());
  TORCH_CHECK(grad_output.device() == input.device(), op, "expected grad_output on the device of input (",
              input.device(), "), but got ", grad_output.device());
  if (p.reduction == focal_loss_math::Reduction::None) {
    if (kind == FocalKind::Sigmoid) {
      TORCH_CHECK(grad_output.sym_sizes() == input.sym_sizes(), op, "expected grad_output of shape ", shape_of(input),
                  " (reduction \"none\"), but got ", shape_of(grad_output));
    } else {
      TORCH_CHECK(grad_output.dim() == 1, op, "expected grad_output of shape [N] (reduction \"none\"), but got ",
                  shape_of(grad_output));
      TORCH_SYM_CHECK(grad_output.sym_size(0).sym_eq(input.sym_size(0)), op, "expected grad_output of shape [",
                      input.sym_size(0), "] (reduction \"none\"), but got ", shape_of(grad_output));
    }
  } else {
    TORCH_CHECK(grad_output.dim() == 0, op, "expected a 0-d grad_output (reduction \"", std::string(reduction),
                "\"), but got shape ", shape_of(grad_output));
  }
  return p;
}

void check_class_ids(FocalKind kind, const at::Tensor& target, int64_t classes) {
  if (target.numel() == 0) {
    return;
  }
  const at::Tensor ids = target.to(at::kCPU).contiguous();
  const int64_t* values = ids.const_data_ptr<int64_t>();
  const bool sigmoid = kind == FocalKind::Sigmoid;
  for (int64_t n = 0; n < ids.numel(); ++n) {
    const bool ok = sigmoid ? focal_loss_math::valid_sigmoid_target(values[n], classes)
                            : focal_loss_math::valid_softmax_target(values[n], classes);
    TORCH_CHECK(ok, focal_op_prefix(kind), "target must hold class ids in ",
                sigmoid ? "[0, C] (C means background)" : "[0, C)", " with C = input.size(1) = ", classes,
                ", but target[", n, "] = ", values[n]);
  }
}

} // namespace detail
} // namespace mmops

// Argument validation of bias_act, on every backend (the meta kernels run it
// too, so fake tensors raise the same errors), and the activation table.

#include "bias_act/bias_act_ops.h"

#include "common/check_utils.h"

#include <c10/core/SymInt.h>

#include <cmath>
#include <cstdint>
#include <utility>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kOp = kBiasActOp;

constexpr std::pair<const char*, BiasAct> kActs[] = {
    {"linear", BiasAct::Linear}, {"relu", BiasAct::Relu},         {"lrelu", BiasAct::Lrelu},
    {"tanh", BiasAct::Tanh},     {"sigmoid", BiasAct::Sigmoid},   {"elu", BiasAct::Elu},
    {"selu", BiasAct::Selu},     {"softplus", BiasAct::Softplus}, {"swish", BiasAct::Swish},
};

constexpr double kSqrt2 = 1.4142135623730951;

void check_same_tensor(const at::Tensor& t, const char* name, const at::Tensor& ref, const char* ref_name) {
  TORCH_CHECK(t.scalar_type() == ref.scalar_type() && t.device() == ref.device(), kOp, "expected ", name,
              " with the dtype and device of ", ref_name, " (", ref.scalar_type(), " on ", ref.device(), "), but got ",
              t.scalar_type(), " on ", t.device());
  TORCH_CHECK(t.sym_sizes() == ref.sym_sizes(), kOp, "expected ", name, " of shape ", shape_of(ref), " (as ", ref_name,
              "), but got ", shape_of(t));
}

// bias [x.size(dim)] of x's dtype and device; returns dim wrapped to [0, x.dim()).
int64_t check_bias(const at::Tensor& x, const char* x_name, const at::Tensor& bias, int64_t dim) {
  TORCH_CHECK(bias.dim() == 1, kOp, "expected bias to be a 1-D tensor, but got a ", bias.dim(), "-D tensor of shape ",
              shape_of(bias));
  TORCH_CHECK(bias.scalar_type() == x.scalar_type(), kOp, "expected bias to have the dtype of ", x_name, " (",
              x.scalar_type(), "), but got ", bias.scalar_type());
  TORCH_CHECK(bias.device() == x.device(), kOp, "expected bias on the device of ", x_name, " (", x.device(),
              "), but got ", bias.device());
  const int64_t rank = x.dim();
  TORCH_CHECK(rank >= 1 && dim >= -rank && dim < rank, kOp, "expected dim in [", -rank, ", ", rank, ") (a dim of the ",
              rank, "-D ", x_name, ") with a bias, but got ", dim);
  const int64_t d = dim < 0 ? dim + rank : dim;
  TORCH_SYM_CHECK(bias.sym_size(0).sym_eq(x.sym_size(d)), kOp, "expected bias to hold ", x.sym_size(d), " values (",
                  x_name, "'s dim ", d, "), but got bias of shape ", shape_of(bias));
  return d;
}

void check_floats(double alpha, double gain) {
  TORCH_CHECK(std::isfinite(alpha), kOp, "expected a finite alpha, but got ", alpha);
  TORCH_CHECK(std::isfinite(gain), kOp, "expected a finite gain, but got ", gain);
}

} // namespace

BiasAct parse_bias_act(c10::string_view act) {
  return parse_choice(kOp, "act", act, kActs);
}

const char* bias_act_name(BiasAct act) {
  return choice_name(act, kActs);
}

double default_alpha(BiasAct act) {
  return act == BiasAct::Lrelu ? 0.2 : 0.0;
}

double default_gain(BiasAct act) {
  return act == BiasAct::Relu || act == BiasAct::Lrelu || act == BiasAct::Swish ? kSqrt2 : 1.0;
}

bool backward_needs_input(BiasAct act) {
  return bias_act_math::uses_x(act) || bias_act_math::has_second_derivative(act);
}

bool backward_needs_output(BiasAct act, double clamp) {
  return bias_act_math::uses_y(act) || (act == BiasAct::Linear && clamp >= 0);
}

BiasActParams check_bias_act_forward(const at::Tensor& input, const std::optional<at::Tensor>& bias, int64_t dim,
                                     c10::string_view act, std::optional<double> alpha, std::optional<double> gain,
                                     std::optional<double> clamp) {
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), kOp, "expected input to have a floating point dtype, but got ",
              input.scalar_type());
  BiasActParams p{};
  p.act = parse_bias_act(act);
  p.alpha = alpha.value_or(default_alpha(p.act));
  p.gain = gain.value_or(default_gain(p.act));
  check_floats(p.alpha, p.gain);
  // mmcv asserts clamp >= 0; None (-1 inside) is no clamp
  TORCH_CHECK(!clamp.has_value() || *clamp >= 0, kOp, "expected clamp >= 0 or None, but got ", clamp.value_or(0.0));
  p.clamp = clamp.value_or(-1.0);
  p.dim = bias.has_value() ? check_bias(input, "input", *bias, dim) : 0; // dim is ignored without a bias (mmcv)
  return p;
}

BiasActParams check_bias_act_backward(const at::Tensor& grad_output, const std::optional<at::Tensor>& input,
                                      const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& output,
                                      int64_t dim, c10::string_view act, double alpha, double gain, double clamp,
                                      int64_t order) {
  TORCH_CHECK(at::isFloatingType(grad_output.scalar_type()), kOp,
              "expected grad_output to have a floating point dtype, but got ", grad_output.scalar_type());
  BiasActParams p{};
  p.act = parse_bias_act(act);
  check_floats(alpha, gain);
  TORCH_CHECK(!std::isnan(clamp), kOp, "expected a clamp that is not NaN (< 0: none), but got ", clamp);
  TORCH_CHECK(order == 1 || order == 2, kOp, "expected order 1 or 2 (the derivative), but got ", order);
  p.alpha = alpha;
  p.gain = gain;
  p.clamp = clamp < 0 ? -1.0 : clamp;
  p.order = order;
  if (input.has_value()) {
    check_same_tensor(*input, "input", grad_output, "grad_output");
  }
  if (output.has_value()) {
    check_same_tensor(*output, "output", grad_output, "grad_output");
  }
  p.dim = bias.has_value() ? check_bias(grad_output, "grad_output", *bias, dim) : 0;
  TORCH_CHECK(!bias_act_math::uses_x(p.act) || input.has_value(), kOp, "expected input (the forward's) for act \"",
              bias_act_name(p.act), "\", but got None");
  TORCH_CHECK(!backward_needs_output(p.act, p.clamp) || output.has_value(), kOp,
              "expected output (the forward's) for act \"", bias_act_name(p.act),
              p.clamp >= 0 ? "\" with a clamp" : "\"", ", but got None");
  return p;
}

} // namespace detail
} // namespace mmops

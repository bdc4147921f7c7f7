// CPU kernels of bias_act: the tensors made dense in one layout
// (bias_act_kernels.h), then at::parallel_for over chunks of their storage,
// each chunk computed by the vectorised loops (bias_act_cpu_simd.cpp) of the
// instruction set ATen's own kernels use. Each value is computed alone: the
// result depends neither on the thread count nor on the layout.

#include "bias_act/bias_act_cpu_simd.h"
#include "bias_act/bias_act_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>

namespace mmops {
namespace kernels {
namespace {

constexpr int64_t kGrain = 32768; // values per task

// The dtype fields of call (the storage type, clamp as the output stores it)
// and bias in the compute type, contiguous (or none).
std::optional<at::Tensor> set_dtype(BiasActCpuCall& call, at::ScalarType dtype, const std::optional<at::Tensor>& bias,
                                    double clamp) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mmops::bias_act (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    call.dtype = std::is_same_v<scalar_t, float>    ? BiasActCpuDtype::Float
                 : std::is_same_v<scalar_t, double> ? BiasActCpuDtype::Double
                 : std::is_same_v<scalar_t, at::Half> ? BiasActCpuDtype::Half
                                                    : BiasActCpuDtype::BFloat16;
    call.clamp_y = static_cast<double>(static_cast<acc_t>(static_cast<scalar_t>(clamp)));
  });
  if (!bias.has_value()) {
    return std::nullopt;
  }
  return bias->to(dtype == at::kDouble ? at::kDouble : at::kFloat).contiguous();
}

// The bias layout of a call: step and C, or one run of everything without a bias.
void set_layout(BiasActCpuCall& call, const at::Tensor& dense, const std::optional<at::Tensor>& bias, int64_t dim) {
  if (!bias.has_value()) {
    call.step = std::max<int64_t>(dense.numel(), 1);
    call.channels = 1;
  } else {
    call.step = bias_step(dense, dim);
    call.channels = std::max<int64_t>(dense.size(dim), 1);
    call.bias = bias->const_data_ptr();
  }
}

} // namespace

at::Tensor bias_act_forward_cpu(const at::Tensor& input_, const std::optional<at::Tensor>& bias_,
                                const BiasActParams& p) {
  const at::MemoryFormat format = input_.suggest_memory_format();
  const at::Tensor input = input_.contiguous(format);
  at::Tensor output = at::empty(input.sizes(), input.options().memory_format(format));
  if (output.numel() == 0) {
    return output;
  }
  BiasActCpuCall call;
  call.params = p;
  const std::optional<at::Tensor> bias = set_dtype(call, input.scalar_type(), bias_, p.clamp);
  set_layout(call, input, bias, p.dim);
  call.input = input.const_data_ptr();
  call.result = output.mutable_data_ptr();
  const auto range = MMOPS_CPU_SIMD_PICK(bias_act_forward_range);
  at::parallel_for(0, output.numel(), kGrain, [&](int64_t begin, int64_t end) { range(call, begin, end); });
  return output;
}

at::Tensor bias_act_backward_cpu(const at::Tensor& grad_output_, const std::optional<at::Tensor>& input_,
                                 const std::optional<at::Tensor>& bias_, const std::optional<at::Tensor>& output_,
                                 const BiasActParams& p) {
  const at::MemoryFormat format = backward_memory_format(grad_output_, input_, output_);
  const at::Tensor grad_output = grad_output_.contiguous(format);
  // What the act reads (the validation made sure it is there); the rest stays unread.
  const bool read_x = bias_act_math::uses_x(p.act);
  const bool read_y = bias_act_math::uses_y(p.act) || (p.act == BiasAct::Linear && p.clamp >= 0);
  const at::Tensor input = read_x ? input_->contiguous(format) : at::Tensor();
  const at::Tensor output = read_y ? output_->contiguous(format) : at::Tensor();
  at::Tensor grad_input = at::empty(grad_output.sizes(), grad_output.options().memory_format(format));
  if (grad_input.numel() == 0) {
    return grad_input;
  }
  BiasActCpuCall call;
  call.params = p;
  const std::optional<at::Tensor> bias =
      set_dtype(call, grad_output.scalar_type(), read_x ? bias_ : std::nullopt, p.clamp);
  set_layout(call, grad_output, bias, p.dim);
  call.grad = grad_output.const_data_ptr();
  call.input = read_x ? input.const_data_ptr() : nullptr;
  call.output = read_y ? output.const_data_ptr() : nullptr;
  call.result = grad_input.mutable_data_ptr();
  const auto range = MMOPS_CPU_SIMD_PICK(bias_act_backward_range);
  at::parallel_for(0, grad_input.numel(), kGrain, [&](int64_t begin, int64_t end) { range(call, begin, end); });
  return grad_input;
}

} // namespace kernels
} // namespace mmops

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
#include <optional>

namespace mmops {
namespace kernels {
namespace {

constexpr int64_t kGrain = 32768; // values per task

BiasActCpuDtype cpu_dtype(at::ScalarType dtype) {
  switch (dtype) {
    case at::kDouble:
      return BiasActCpuDtype::Double;
    case at::kHalf:
      return BiasActCpuDtype::Half;
    case at::kBFloat16:
      return BiasActCpuDtype::BFloat16;
    default:
      return BiasActCpuDtype::Float;
  }
}

// What a call points into besides the dense tensors: the bias in the compute
// type and its pattern.
struct BiasTensors {
  at::Tensor bias;
  at::Tensor pattern;
};

// Fills call for p and values laid out as `dense` (float, double, half or
// bfloat16), with bias (or none) along p.dim: the dtype, the clamp as the
// output stores it, the bias in the compute type, its runs (step and C; without
// a bias one run of everything) and, for runs shorter than kMaxBiasBlock, the
// bias of values 0 .. step * C + kMaxBiasBlock - 1.
BiasTensors set_call(BiasActCpuCall& call, const BiasActParams& p, const at::Tensor& dense,
                     const std::optional<at::Tensor>& bias) {
  call.params = p;
  call.dtype = cpu_dtype(dense.scalar_type());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dense.scalar_type(), "mmops::bias_act (CPU)", [&] {
    call.clamp_y = static_cast<at::opmath_type<scalar_t>>(static_cast<scalar_t>(p.clamp));
  });
  if (!bias.has_value()) {
    call.step = std::max<int64_t>(dense.numel(), 1);
    call.channels = 1;
    return {};
  }
  BiasTensors kept;
  kept.bias = bias->to(dense.scalar_type() == at::kDouble ? at::kDouble : at::kFloat).contiguous();
  call.bias = kept.bias.const_data_ptr();
  call.step = bias_step(dense, p.dim);
  call.channels = std::max<int64_t>(dense.size(p.dim), 1);
  if (call.step < kMaxBiasBlock) {
    const int64_t size = call.step * call.channels + kMaxBiasBlock; // step * C < kMaxBiasBlock * C
    kept.pattern = at::empty({size}, kept.bias.options());
    AT_DISPATCH_FLOATING_TYPES(kept.bias.scalar_type(), "mmops::bias_act (CPU)", [&] {
      const scalar_t* b = kept.bias.const_data_ptr<scalar_t>();
      scalar_t* out = kept.pattern.mutable_data_ptr<scalar_t>();
      for (int64_t i = 0, c = 0; i < size; i += call.step, c = c + 1 == call.channels ? 0 : c + 1) {
        std::fill_n(out + i, std::min(call.step, size - i), b[c]);
      }
    });
    call.bias_pattern = kept.pattern.const_data_ptr();
  }
  return kept;
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
  const BiasTensors kept = set_call(call, p, input, bias_);
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
  const BiasTensors kept = set_call(call, p, grad_output, read_x ? bias_ : std::nullopt);
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

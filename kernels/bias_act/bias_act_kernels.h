#pragma once
// Device kernels of bias_act. Callers (src/bias_act) validate the arguments
// first; these functions only compute.
//
// Layout: the kernels run elementwise over the storage of dense tensors in the
// suggested memory format of the first tensor (contiguous or channels_last,
// others are made so); the bias of storage element i is bias[(i / step) % C]
// with step = the stride of `dim` (1 where C is 1): exact for any dense,
// non-overlapping layout. The result takes that format.

#include "bias_act/bias_act_math.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <cstdint>
#include <optional>
#include <type_traits>

namespace mmops {
namespace kernels {

// The bias step of a dense tensor: the stride of its bias dim (1 where that dim has size <= 1).
inline int64_t bias_step(const at::Tensor& t, int64_t dim) {
  return t.size(dim) > 1 ? t.stride(dim) : 1;
}

// The memory format of a backward call (and its result): output's suggested
// one, else input's, else grad_output's.
inline at::MemoryFormat backward_memory_format(const at::Tensor& grad_output, const std::optional<at::Tensor>& input,
                                               const std::optional<at::Tensor>& output) {
  const at::Tensor& ref = output.has_value() ? *output : (input.has_value() ? *input : grad_output);
  return ref.suggest_memory_format();
}

// input (any shape), bias [input.size(dim)] or None -> clamp(f(input + bias) * gain),
// input's shape, dtype and suggested memory format.
at::Tensor bias_act_forward_cpu(const at::Tensor& input, const std::optional<at::Tensor>& bias,
                                const BiasActParams& params);

// grad_output, and what params.act needs of input, bias (its argument: swish)
// and output (the forward's: every other act; linear with a clamp) -> the
// gradient of input (first or second derivative: params.order), in the suggested
// memory format of output (else input, else grad_output).
at::Tensor bias_act_backward_cpu(const at::Tensor& grad_output, const std::optional<at::Tensor>& input,
                                 const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& output,
                                 const BiasActParams& params);

#ifdef MMOPS_WITH_CUDA
at::Tensor bias_act_forward_cuda(const at::Tensor& input, const std::optional<at::Tensor>& bias,
                                 const BiasActParams& params);

at::Tensor bias_act_backward_cuda(const at::Tensor& grad_output, const std::optional<at::Tensor>& input,
                                  const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& output,
                                  const BiasActParams& params);
#endif

} // namespace kernels
} // namespace mmops

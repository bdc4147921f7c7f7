#pragma once
// Device kernels of cc_attention (ca_weight, ca_map). Callers (src/cc_attention)
// validate the arguments first; these functions only compute. The index
// conventions are in cc_attention_math.h.

#include "cc_attention/cc_attention_math.h"

#include <ATen/core/Tensor.h>

#include <tuple>

namespace mmops {
namespace kernels {

// t, f [N, C, H, W] -> energies [N, H + W - 1, H, W].
at::Tensor ca_weight_forward_cpu(const at::Tensor& t, const at::Tensor& f, const CcAttentionParams& params);

// grad_weight [N, H + W - 1, H, W] -> (grad_t, grad_f), both [N, C, H, W].
std::tuple<at::Tensor, at::Tensor> ca_weight_backward_cpu(const at::Tensor& grad_weight, const at::Tensor& t,
                                                          const at::Tensor& f, const CcAttentionParams& params);

// weight [N, H + W - 1, H, W], g [N, C, H, W] -> [N, C, H, W].
at::Tensor ca_map_forward_cpu(const at::Tensor& weight, const at::Tensor& g, const CcAttentionParams& params);

// grad_out [N, C, H, W] -> (grad_weight [N, H + W - 1, H, W], grad_g [N, C, H, W]).
std::tuple<at::Tensor, at::Tensor> ca_map_backward_cpu(const at::Tensor& grad_out, const at::Tensor& weight,
                                                       const at::Tensor& g, const CcAttentionParams& params);

#ifdef MMOPS_WITH_CUDA
at::Tensor ca_weight_forward_cuda(const at::Tensor& t, const at::Tensor& f, const CcAttentionParams& params);

std::tuple<at::Tensor, at::Tensor> ca_weight_backward_cuda(const at::Tensor& grad_weight, const at::Tensor& t,
                                                           const at::Tensor& f, const CcAttentionParams& params);

at::Tensor ca_map_forward_cuda(const at::Tensor& weight, const at::Tensor& g, const CcAttentionParams& params);

std::tuple<at::Tensor, at::Tensor> ca_map_backward_cuda(const at::Tensor& grad_out, const at::Tensor& weight,
                                                        const at::Tensor& g, const CcAttentionParams& params);
#endif

} // namespace kernels
} // namespace mmops

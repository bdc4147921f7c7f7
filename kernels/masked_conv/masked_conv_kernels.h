#pragma once
// Kernels of masked_conv2d. Callers (src/masked_conv) validate the arguments
// first; these functions only compute.
//
// Structure (the same on CPU and CUDA, see masked_conv_gemm.cpp):
//   positions = the masked output positions (n, h, w), from at::nonzero(mask > 0)
//               (on CUDA the one host sync: the count M sizes the buffers);
//   forward:  cols [C*kh*kw, M] = the input patches of those positions only;
//             values [O, M] = bias + weight [O, C*kh*kw] @ cols (ATen's GEMM);
//             output = zeros with values scattered to the positions.
//   backward: g [O, M] = grad_output gathered at the positions;
//             grad_weight = g @ cols^T, grad_bias = g summed over M,
//             grad_input = col2im (scatter-add) of weight^T @ g.
// The work is proportional to M, not to N * H_out * W_out; the positions are
// processed in chunks so that a column buffer stays below kColumnBytes.

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <tuple>

namespace mmops {

// Plain data, passed by value to the CUDA kernels. All sizes concrete.
struct MaskedConvParams {
  int64_t kernel_h, kernel_w;
  int64_t pad_h, pad_w;
  int64_t stride_h, stride_w;
  int64_t out_h, out_w;
};

namespace kernels {

// Upper bound of one column buffer (cols or grad_cols) of a chunk of masked
// positions; a chunk holds at least one position.
constexpr int64_t kColumnBytes = int64_t(512) << 20;

// The entry points, one signature for both devices. bias is undefined when absent.
// forward: output [N, O, H_out, W_out] contiguous.
at::Tensor masked_conv2d_forward_cpu(const at::Tensor& input, const at::Tensor& mask, const at::Tensor& weight,
                                     const at::Tensor& bias, const MaskedConvParams& p);

// backward: (grad_input, grad_weight, grad_bias), contiguous; output_mask
// selects them, the others are empty [0] tensors.
std::tuple<at::Tensor, at::Tensor, at::Tensor> masked_conv2d_backward_cpu(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& mask, const at::Tensor& weight,
    const MaskedConvParams& p, std::array<bool, 3> output_mask);

#ifdef MMOPS_WITH_CUDA
at::Tensor masked_conv2d_forward_cuda(const at::Tensor& input, const at::Tensor& mask, const at::Tensor& weight,
                                      const at::Tensor& bias, const MaskedConvParams& p);

std::tuple<at::Tensor, at::Tensor, at::Tensor> masked_conv2d_backward_cuda(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& mask, const at::Tensor& weight,
    const MaskedConvParams& p, std::array<bool, 3> output_mask);
#endif

// ---------------------------------------------------------------------------
// The device part. positions: [M, 3] int64 contiguous (n, h, w), every one
// inside the output (they come from nonzero over the output grid).
// ---------------------------------------------------------------------------
struct MaskedKernels {
  // cols [C*kh*kw, M] (input's dtype, contiguous) from input (any strides).
  void (*im2col)(const at::Tensor& input, const at::Tensor& positions, at::Tensor& cols, const MaskedConvParams& p);
  // grad_input_acc [N, C, H, W] contiguous (float for half/bfloat16) +=
  // the columns grad_cols [C*kh*kw, M] put back under their patches.
  void (*col2im)(const at::Tensor& grad_cols, const at::Tensor& positions, at::Tensor& grad_input_acc,
                 const MaskedConvParams& p);
  // output [N, O, H_out, W_out] contiguous: output[n, o, h, w] = values[o, m].
  void (*scatter)(const at::Tensor& values, const at::Tensor& positions, at::Tensor& output);
  // values [O, M] contiguous: values[o, m] = grad_output[n, o, h, w] (any strides).
  void (*gather)(const at::Tensor& grad_output, const at::Tensor& positions, at::Tensor& values);
  // When col2im adds with atomics: the name alertNotDeterministic reports. Null: deterministic.
  const char* nondeterministic_grad_input;
};

at::Tensor masked_conv2d_forward_gemm(const MaskedKernels& device, const at::Tensor& input, const at::Tensor& mask,
                                      const at::Tensor& weight, const at::Tensor& bias, const MaskedConvParams& p);

std::tuple<at::Tensor, at::Tensor, at::Tensor> masked_conv2d_backward_gemm(
    const MaskedKernels& device, const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& mask,
    const at::Tensor& weight, const MaskedConvParams& p, std::array<bool, 3> output_mask);

} // namespace kernels
} // namespace mmops

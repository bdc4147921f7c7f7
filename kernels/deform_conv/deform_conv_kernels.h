#pragma once
// Kernels of deform_conv2d (DCNv1) and modulated_deform_conv2d (DCNv2).
// Callers (src/deform_conv) validate the arguments first; these functions only compute.
//
// Structure (the same on CPU and CUDA, see deform_conv_gemm.cpp):
//   forward:  cols = deformable im2col of the input (bilinear samples, times the
//             mask), stored channels-last: memory [n, H_out, W_out, K] with
//             K = groups * kh * kw * (C_in / groups) in (group, tap, channel) order;
//             output = 1x1 convolution of cols (as an [n, K, H_out, W_out]
//             channels_last tensor) with the weight reordered to [C_out, kh*kw*C_in/groups, 1, 1].
//   backward: grad_cols = transposed 1x1 convolution of grad_output; grad_weight
//             from the convolution backward with the recomputed cols; then one
//             col2im pass that scatters grad_input and reduces grad_offset and
//             grad_mask over the channels.
// The batch is processed in chunks so that a column buffer stays below kColumnBytes.

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <tuple>

namespace mmops {

// Plain data, passed by value to the CUDA kernels. All sizes concrete.
struct DeformConvParams {
  int64_t kernel_h, kernel_w;
  int64_t stride_h, stride_w;
  int64_t pad_h, pad_w;
  int64_t dilation_h, dilation_w;
  int64_t groups, deform_groups;
  int64_t out_h, out_w;
};

namespace kernels {

// Upper bound of one column buffer (cols or grad_cols) of a batch chunk; a
// chunk holds at least one image.
constexpr int64_t kColumnBytes = int64_t(512) << 20;

// The entry points, one signature for both devices (src/deform_conv calls
// them after the checks). mask and bias are undefined tensors when absent.
//
// forward: output [N, C_out, H_out, W_out] in input.suggest_memory_format().
at::Tensor deform_conv2d_forward_cpu(const at::Tensor& input, const at::Tensor& offset, const at::Tensor& mask,
                                     const at::Tensor& weight, const at::Tensor& bias, const DeformConvParams& p);

// backward: (grad_input, grad_offset, grad_mask, grad_weight, grad_bias).
// output_mask selects the gradients to compute, in that order; the others,
// and grad_mask when there is no mask, are empty [0] tensors. grad_input
// follows input.suggest_memory_format(); the others are contiguous.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> deform_conv2d_backward_cpu(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& offset, const at::Tensor& mask,
    const at::Tensor& weight, const DeformConvParams& p, std::array<bool, 5> output_mask);

#ifdef MMOPS_WITH_CUDA
at::Tensor deform_conv2d_forward_cuda(const at::Tensor& input, const at::Tensor& offset, const at::Tensor& mask,
                                      const at::Tensor& weight, const at::Tensor& bias, const DeformConvParams& p);

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> deform_conv2d_backward_cuda(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& offset, const at::Tensor& mask,
    const at::Tensor& weight, const DeformConvParams& p, std::array<bool, 5> output_mask);
#endif

// ---------------------------------------------------------------------------
// Column kernels, per device. Tensors:
//   input   [N, C, H, W] channels_last (whole batch), n_begin: first image of the chunk
//   offset  [N, 2*dg*kh*kw, H_out, W_out] contiguous (whole batch)
//   mask    [N, dg*kh*kw, H_out, W_out] contiguous, or undefined
//   cols / grad_cols: contiguous [n_count, H_out, W_out, K] (input dtype)
//   grad_input: channels_last accumulation buffer (float for half/bfloat16) of
//               the whole batch, or undefined (not wanted)
//   grad_offset / grad_mask: contiguous, whole batch, or undefined (not wanted);
//               every element of the chunk's images is written.
// ---------------------------------------------------------------------------

struct ColumnArgs {
  at::Tensor input, offset, mask;
  int64_t n_begin, n_count;
};

// Sizes of a column call (passed by value to the CUDA kernels).
struct ColumnSizes {
  int64_t n_begin;                     // first image of the chunk
  int64_t height, width, channels;     // of the input
  int64_t taps, plane, columns;        // kh * kw, H_out * W_out, K = C * kh * kw
  int64_t per_group, per_deform_group; // channels per conv group / per deform group
};

inline ColumnSizes column_sizes(const ColumnArgs& a, const DeformConvParams& p) {
  ColumnSizes s;
  s.n_begin = a.n_begin;
  s.height = a.input.size(2);
  s.width = a.input.size(3);
  s.channels = a.input.size(1);
  s.taps = p.kernel_h * p.kernel_w;
  s.plane = p.out_h * p.out_w;
  s.columns = s.channels * s.taps;
  s.per_group = s.channels / p.groups;
  s.per_deform_group = s.channels / p.deform_groups;
  return s;
}

// The device part of the entry points above: its column kernels and its
// channels-last copy. The rest (batch chunking, the 1x1 convolutions) is one
// implementation for both devices, in deform_conv_gemm.cpp.
struct ColumnKernels {
  void (*im2col)(const ColumnArgs& a, at::Tensor& cols, const DeformConvParams& p);
  void (*col2im)(const ColumnArgs& a, const at::Tensor& grad_cols, at::Tensor& grad_input, at::Tensor& grad_offset,
                 at::Tensor& grad_mask, const DeformConvParams& p);
  at::Tensor (*channels_last)(const at::Tensor& t); // t itself, or its channels-last copy
  // Adds a chunk's weight gradient into grad_weight_acc ([C_out, kh*kw*C_in/groups],
  // the accumulation dtype), from the chunk's grad_output (channels-last) and
  // cols, in an order that does not depend on the thread count; null: the
  // convolution backward (cuDNN).
  void (*weight_grad)(const at::Tensor& grad_output, const at::Tensor& cols, at::Tensor& grad_weight_acc,
                      int64_t groups);
  // grad_bias [C_out] in a fixed order; null: grad_output.sum({0, 2, 3}).
  at::Tensor (*bias_grad)(const at::Tensor& grad_output);
  // When col2im adds into grad_input with atomics (the order of the float
  // additions varies): the name alertNotDeterministic reports. Null: deterministic.
  const char* nondeterministic_grad_input;
};

at::Tensor deform_conv2d_forward_gemm(const ColumnKernels& device, const at::Tensor& input, const at::Tensor& offset,
                                      const at::Tensor& mask, const at::Tensor& weight, const at::Tensor& bias,
                                      const DeformConvParams& p);

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> deform_conv2d_backward_gemm(
    const ColumnKernels& device, const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& offset,
    const at::Tensor& mask, const at::Tensor& weight, const DeformConvParams& p, std::array<bool, 5> output_mask);

} // namespace kernels
} // namespace mmops

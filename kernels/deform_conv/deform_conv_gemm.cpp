// deform_conv2d / modulated_deform_conv2d, the device-independent part: the
// batch chunking and the matrix products, done as 1x1 convolutions of the
// column buffer (cuDNN on CUDA, so half/bfloat16 use the tensor cores and
// float32 follows torch.backends.cudnn.allow_tf32 exactly as nn.Conv2d does;
// oneDNN or ATen's own convolution on CPU). The device entry points in
// deform_conv_cpu.cpp and deform_conv_cuda.cu call it with their column kernels.

#include "deform_conv/deform_conv_kernels.h"

#include <ATen/Context.h>
#include <ATen/ops/conv2d.h>
#include <ATen/ops/conv_transpose2d.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>

namespace mmops {
namespace kernels {
namespace {

// Stride / padding / dilation of the 1x1 convolutions.
constexpr std::array<int64_t, 2> kOnes{1, 1};
constexpr std::array<int64_t, 2> kZeros{0, 0};

// The accumulation dtype of gradients that several terms add into.
at::ScalarType accumulation_dtype(at::ScalarType t) {
  return (t == at::kHalf || t == at::kBFloat16) ? at::kFloat : t;
}

// The column buffer budget: kColumnBytes, or for tests a smaller positive
// number of bytes in MMOPS_DEFORM_CONV_COLUMN_BYTES (read at every call).
int64_t column_budget() {
  if (const char* env = std::getenv("MMOPS_DEFORM_CONV_COLUMN_BYTES")) {
    const long long bytes = std::atoll(env);
    if (bytes > 0) {
      return std::min<int64_t>(bytes, kColumnBytes);
    }
  }
  return kColumnBytes;
}

// Images per chunk: the column buffer of a chunk stays below the budget.
int64_t chunk_images(int64_t batch, int64_t bytes_per_image) {
  const int64_t fit = column_budget() / std::max<int64_t>(bytes_per_image, 1);
  return std::clamp<int64_t>(fit, 1, std::max<int64_t>(batch, 1));
}

// The weight as a 1x1 convolution over the columns: [C_out, kh*kw*C_in/groups, 1, 1]
// in (tap, channel) order, matching the column layout inside a group.
at::Tensor weight_1x1(const at::Tensor& weight) {
  return weight.permute({0, 2, 3, 1}).reshape({weight.size(0), weight.size(1) * weight.size(2) * weight.size(3), 1, 1});
}

// [n, H_out, W_out, K] memory as the [n, K, H_out, W_out] channels_last tensor
// the convolutions take.
at::Tensor as_nchw(const at::Tensor& cols) {
  return cols.permute({0, 3, 1, 2});
}

ColumnArgs column_args(const ColumnKernels& device, const at::Tensor& input, const at::Tensor& offset,
                       const at::Tensor& mask) {
  ColumnArgs a;
  a.input = device.channels_last(input);
  a.offset = offset.contiguous();
  a.mask = mask.defined() ? mask.contiguous() : at::Tensor();
  a.n_begin = 0;
  a.n_count = 0;
  return a;
}

// The convolutions below must see exactly the dtypes given: no autocast
// inside the op (autocast, when on, applies to the op's inputs as a whole).
struct NoAutocast {
  c10::impl::ExcludeDispatchKeyGuard guard{c10::autocast_dispatch_keyset};
};

} // namespace

at::Tensor deform_conv2d_forward_gemm(const ColumnKernels& device, const at::Tensor& input, const at::Tensor& offset,
                                      const at::Tensor& mask, const at::Tensor& weight, const at::Tensor& bias,
                                      const DeformConvParams& p) {
  NoAutocast no_autocast;
  c10::OptionalDeviceGuard device_guard(input.device());
  const int64_t batch = input.size(0), channels = input.size(1), out_channels = weight.size(0);
  const int64_t columns = channels * p.kernel_h * p.kernel_w; // K
  const at::MemoryFormat format = input.suggest_memory_format();
  at::Tensor output = at::empty({batch, out_channels, p.out_h, p.out_w}, input.options(), format);
  if (output.numel() == 0) {
    return output;
  }
  if (columns == 0) { // no input channels: only the bias
    if (bias.defined()) {
      output.copy_(bias.view({1, out_channels, 1, 1}).expand_as(output));
    } else {
      output.zero_();
    }
    return output;
  }
  ColumnArgs a = column_args(device, input, offset, mask);
  const at::Tensor w = weight_1x1(weight);
  const std::optional<at::Tensor> b = bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt;
  const int64_t chunk = chunk_images(batch, p.out_h * p.out_w * columns * input.element_size());
  for (int64_t n0 = 0; n0 < batch; n0 += chunk) {
    a.n_begin = n0;
    a.n_count = std::min(chunk, batch - n0);
    at::Tensor cols = at::empty({a.n_count, p.out_h, p.out_w, columns}, input.options());
    device.im2col(a, cols, p);
    at::Tensor out = at::conv2d(as_nchw(cols), w, b, kOnes, kZeros, kOnes, p.groups);
    if (a.n_count == batch && out.is_contiguous(format)) {
      return out; // one chunk, already in the input's memory format
    }
    output.narrow(0, n0, a.n_count).copy_(out);
  }
  return output;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> deform_conv2d_backward_gemm(
    const ColumnKernels& device, const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& offset,
    const at::Tensor& mask, const at::Tensor& weight, const DeformConvParams& p, std::array<bool, 5> output_mask) {
  NoAutocast no_autocast;
  c10::OptionalDeviceGuard device_guard(input.device());
  const bool want_input = output_mask[0];
  const bool want_offset = output_mask[1];
  const bool want_mask = output_mask[2] && mask.defined();
  const bool want_weight = output_mask[3];
  const bool want_bias = output_mask[4];
  const bool want_cols_grad = want_input || want_offset || want_mask;
  if (want_input && device.nondeterministic_grad_input != nullptr) {
    at::globalContext().alertNotDeterministic(device.nondeterministic_grad_input);
  }
  const int64_t batch = input.size(0), channels = input.size(1), out_channels = weight.size(0);
  const int64_t columns = channels * p.kernel_h * p.kernel_w; // K
  const at::TensorOptions options = input.options();
  const at::ScalarType acc = accumulation_dtype(input.scalar_type());
  const at::MemoryFormat format = input.suggest_memory_format();

  at::Tensor grad_bias = !want_bias                    ? at::empty({0}, options)
                         : device.bias_grad != nullptr ? device.bias_grad(grad_output)
                                                       : grad_output.sum({0, 2, 3});
  // Every image of the chunks below is written by col2im; zeros cover the
  // cases where there is nothing to compute (no channels).
  at::Tensor grad_offset = want_offset ? at::zeros(offset.sizes(), options) : at::Tensor();
  at::Tensor grad_mask = want_mask ? at::zeros(mask.sizes(), options) : at::Tensor();
  // at::zeros would drop the channels-last memory format.
  at::Tensor grad_input_acc =
      want_input ? at::empty(input.sizes(), options.dtype(acc), at::MemoryFormat::ChannelsLast).zero_() : at::Tensor();
  at::Tensor grad_weight_acc; // [C_out, kh*kw*C_in/groups, 1, 1]

  if (batch > 0 && columns > 0 && out_channels > 0 && (want_cols_grad || want_weight)) {
    ColumnArgs a = column_args(device, input, offset, mask);
    const at::Tensor w = weight_1x1(weight);
    const at::Tensor go = device.channels_last(grad_output);
    const int64_t chunk = chunk_images(batch, p.out_h * p.out_w * columns * input.element_size());
    for (int64_t n0 = 0; n0 < batch; n0 += chunk) {
      a.n_begin = n0;
      a.n_count = std::min(chunk, batch - n0);
      const at::Tensor go_chunk = go.narrow(0, n0, a.n_count);
      if (want_weight) {
        at::Tensor cols = at::empty({a.n_count, p.out_h, p.out_w, columns}, options);
        device.im2col(a, cols, p);
        if (device.weight_grad != nullptr) { // fixed reduction order (CPU)
          if (!grad_weight_acc.defined()) {
            grad_weight_acc = at::zeros({out_channels, columns / p.groups, 1, 1}, options.dtype(acc));
          }
          device.weight_grad(go_chunk, cols, grad_weight_acc, p.groups);
        } else {
          at::Tensor gw =
              std::get<1>(at::convolution_backward(go_chunk, as_nchw(cols), w, std::nullopt, kOnes, kZeros, kOnes,
                                                   /*transposed=*/false, kZeros, p.groups, {false, true, false}));
          if (!grad_weight_acc.defined()) {
            grad_weight_acc = a.n_count == batch ? gw : gw.to(acc);
          } else {
            grad_weight_acc.add_(gw);
          }
        }
      }
      if (want_cols_grad) {
        // grad_cols = the transposed 1x1 convolution of grad_output, as
        // [n, H_out, W_out, K] memory (already so when cuDNN / oneDNN return channels_last).
        const at::Tensor grad_cols =
            at::conv_transpose2d(go_chunk, w, std::nullopt, kOnes, kZeros, kZeros, p.groups, kOnes)
                .permute({0, 2, 3, 1})
                .contiguous();
        device.col2im(a, grad_cols, grad_input_acc, grad_offset, grad_mask, p);
      }
    }
  }

  at::Tensor grad_input = at::empty({0}, options);
  if (want_input) {
    grad_input = grad_input_acc.scalar_type() == input.scalar_type() && grad_input_acc.is_contiguous(format)
                     ? grad_input_acc
                     : at::empty(input.sizes(), options, format).copy_(grad_input_acc);
  }
  at::Tensor grad_weight = at::empty({0}, options);
  if (want_weight) {
    grad_weight = at::empty(weight.sizes(), options);
    if (grad_weight_acc.defined()) {
      grad_weight.copy_(
          grad_weight_acc.view({out_channels, p.kernel_h, p.kernel_w, weight.size(1)}).permute({0, 3, 1, 2}));
    } else {
      grad_weight.zero_();
    }
  }
  return {grad_input, want_offset ? grad_offset : at::empty({0}, options),
          want_mask ? grad_mask : at::empty({0}, options), grad_weight, grad_bias};
}

} // namespace kernels
} // namespace mmops

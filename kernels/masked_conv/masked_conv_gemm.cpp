// masked_conv2d, the device-independent part: the masked positions, the
// buffers and the matrix products (ATen's GEMM: cuBLAS on CUDA, so half and
// bfloat16 products accumulate in float32 as nn.Conv2d's do). The device
// entry points in masked_conv_cpu.cpp and masked_conv_cuda.cu call it with
// their gather / scatter kernels.

#include "masked_conv/masked_conv_kernels.h"

#include <ATen/Context.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cstdlib>

namespace mmops {
namespace kernels {
namespace {

bool low_precision(at::ScalarType t) {
  return t == at::kHalf || t == at::kBFloat16;
}

// The masked output positions [M, 3] = (n, h, w), in row-major order. The mask
// indexes the output grid; a mask of the input's size that is larger than the
// output has its positions beyond the output ignored. On CUDA, nonzero waits
// for the count M (the op's one host sync).
at::Tensor masked_positions(const at::Tensor& mask, const MaskedConvParams& p) {
  const at::Tensor grid =
      mask.slice(1, 0, std::min(mask.size(1), p.out_h)).slice(2, 0, std::min(mask.size(2), p.out_w));
  // nonzero's result is column-major; the kernels read (n, h, w) rows
  return at::nonzero(grid.scalar_type() == at::kBool ? grid : at::gt(grid, 0)).contiguous();
}

// Positions per chunk: a chunk's column buffer stays below kColumnBytes (or,
// for tests, a smaller positive MMOPS_MASKED_CONV_COLUMN_BYTES); at least one.
int64_t chunk_positions(int64_t rows, int64_t element_bytes) {
  int64_t budget = kColumnBytes;
  if (const char* env = std::getenv("MMOPS_MASKED_CONV_COLUMN_BYTES")) {
    const long long bytes = std::atoll(env);
    if (bytes > 0) {
      budget = std::min<int64_t>(bytes, kColumnBytes);
    }
  }
  return std::max<int64_t>(1, budget / std::max<int64_t>(rows * element_bytes, 1));
}

at::Tensor weight_matrix(const at::Tensor& weight) {
  return weight.reshape({weight.size(0), weight.size(1) * weight.size(2) * weight.size(3)});
}

at::Tensor columns(const MaskedKernels& device, const at::Tensor& input, const at::Tensor& positions,
                   const MaskedConvParams& p) {
  at::Tensor cols = at::empty({input.size(1) * p.kernel_h * p.kernel_w, positions.size(0)}, input.options());
  if (cols.numel() > 0) {
    device.im2col(input, positions, cols, p);
  }
  return cols;
}

at::Tensor empty_grad(const at::Tensor& like) {
  return at::empty({0}, like.options());
}

} // namespace

at::Tensor masked_conv2d_forward_gemm(const MaskedKernels& device, const at::Tensor& input, const at::Tensor& mask,
                                      const at::Tensor& weight, const at::Tensor& bias, const MaskedConvParams& p) {
  at::Tensor output = at::zeros({input.size(0), weight.size(0), p.out_h, p.out_w}, input.options());
  if (output.numel() == 0) {
    return output;
  }
  const at::Tensor positions = masked_positions(mask, p);
  if (positions.size(0) == 0) {
    return output;
  }
  const at::Tensor w = weight_matrix(weight);
  const int64_t count = positions.size(0);
  const int64_t step = chunk_positions(w.size(1), input.element_size());
  for (int64_t begin = 0; begin < count; begin += step) {
    const at::Tensor chunk = positions.slice(0, begin, std::min(count, begin + step));
    const at::Tensor cols = columns(device, input, chunk, p);
    // bias is added at the masked positions only (mmcv: the others stay zero)
    const at::Tensor values = bias.defined() ? at::addmm(bias.unsqueeze(1), w, cols) : at::mm(w, cols);
    device.scatter(values.contiguous(), chunk, output);
  }
  return output;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> masked_conv2d_backward_gemm(
    const MaskedKernels& device, const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& mask,
    const at::Tensor& weight, const MaskedConvParams& p, std::array<bool, 3> output_mask) {
  const at::ScalarType dtype = input.scalar_type();
  const at::ScalarType acc = low_precision(dtype) ? at::kFloat : dtype;
  const int64_t out_channels = weight.size(0);
  at::Tensor grad_input_acc = output_mask[0] ? at::zeros(input.sizes(), input.options().dtype(acc)) : at::Tensor();
  at::Tensor grad_weight = output_mask[1] ? at::zeros(weight.sizes(), weight.options()) : empty_grad(weight);
  at::Tensor grad_bias = output_mask[2] ? at::zeros({out_channels}, weight.options()) : empty_grad(weight);
  const at::Tensor positions = grad_output.numel() > 0 ? masked_positions(mask, p) : at::Tensor();
  const int64_t count = positions.defined() ? positions.size(0) : 0;
  if (count > 0 && output_mask[0] && input.numel() > 0 && device.nondeterministic_grad_input != nullptr) {
    at::globalContext().alertNotDeterministic(device.nondeterministic_grad_input);
  }
  // The weight and bias gradients sum over every position: in float32 for 16-bit dtypes.
  const at::Tensor w = weight_matrix(weight);
  at::Tensor grad_weight_acc = output_mask[1] ? at::zeros(w.sizes(), weight.options().dtype(acc)) : at::Tensor();
  at::Tensor grad_bias_acc = output_mask[2] ? at::zeros({out_channels}, weight.options().dtype(acc)) : at::Tensor();
  // a chunk holds cols (acc dtype), grad_cols and g
  const int64_t step = chunk_positions(std::max<int64_t>(w.size(1), out_channels), input.element_size() + 4);
  for (int64_t begin = 0; begin < count; begin += step) {
    const at::Tensor chunk = positions.slice(0, begin, std::min(count, begin + step));
    at::Tensor g = at::empty({out_channels, chunk.size(0)}, grad_output.options());
    device.gather(grad_output, chunk, g);
    const at::Tensor g_acc = g.to(acc);
    if (output_mask[2]) {
      grad_bias_acc.add_(at::sum(g_acc, {1}));
    }
    if (output_mask[1]) {
      const at::Tensor cols = columns(device, input, chunk, p).to(acc);
      grad_weight_acc.addmm_(g_acc, cols.t());
    }
    if (output_mask[0] && input.numel() > 0) {
      const at::Tensor grad_cols = at::mm(w.t(), g).contiguous();
      device.col2im(grad_cols, chunk, grad_input_acc, p);
    }
  }
  if (count > 0 && output_mask[1]) {
    grad_weight = grad_weight_acc.to(dtype).view(weight.sizes());
  }
  if (count > 0 && output_mask[2]) {
    grad_bias = grad_bias_acc.to(dtype);
  }
  at::Tensor grad_input = output_mask[0] ? grad_input_acc.to(dtype) : empty_grad(input);
  return {grad_input, grad_weight, grad_bias};
}

} // namespace kernels
} // namespace mmops

// CPU kernels of masked_conv2d: the gathers and scatters around the GEMM
// (masked_conv_gemm.cpp), each parallel over its rows (column rows, output
// channels or input channels), so no two threads write one element.
// When more than kDenseFraction of the output positions are masked (float and
// double), the CPU runs ATen's dense convolution (oneDNN) instead and keeps
// the masked positions: there the gathered GEMM's im2col costs more than the
// products it saves (1x64x50x76, half masked: 0.26x the dense composite). The
// backward takes that path only for finite input and weight, so that a NaN or
// Inf still reaches the gradients through selected positions only (as in the
// GEMM: the dense products would add 0 * Inf from unselected ones).

#include "masked_conv/masked_conv_kernels.h"
#include "masked_conv/masked_conv_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/conv2d.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cmath>

namespace mmops {
namespace kernels {
namespace {

using masked_conv::column_row;
using masked_conv::tap_source;

// Rows per parallel_for task: about 32k elements.
int64_t grain(int64_t per_row) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(per_row, 1));
}

template <typename scalar_t>
void im2col_impl(const at::Tensor& input, const at::Tensor& positions, at::Tensor& cols, const MaskedConvParams& p) {
  const scalar_t* in = input.const_data_ptr<scalar_t>();
  const int64_t* pos = positions.const_data_ptr<int64_t>();
  scalar_t* out = cols.mutable_data_ptr<scalar_t>();
  const int64_t rows = cols.size(0), m_count = cols.size(1);
  const int64_t height = input.size(2), width = input.size(3);
  const auto st = input.strides();
  at::parallel_for(0, rows, grain(m_count), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const auto row = column_row(r, p.kernel_h, p.kernel_w);
      scalar_t* dst = out + r * m_count;
      for (int64_t m = 0; m < m_count; ++m) {
        const int64_t* q = pos + 3 * m;
        int64_t y = 0, x = 0;
        const bool inside =
            tap_source(q[1], q[2], row.i, row.j, p.stride_h, p.stride_w, p.pad_h, p.pad_w, height, width, y, x);
        dst[m] = inside ? in[q[0] * st[0] + row.channel * st[1] + y * st[2] + x * st[3]] : scalar_t(0);
      }
    }
  });
}

// Parallel over input channels: a channel's patches only touch its own planes.
template <typename scalar_t, typename acc_t>
void col2im_impl(const at::Tensor& grad_cols, const at::Tensor& positions, at::Tensor& grad_input,
                 const MaskedConvParams& p) {
  const scalar_t* gc = grad_cols.const_data_ptr<scalar_t>();
  const int64_t* pos = positions.const_data_ptr<int64_t>();
  acc_t* gi = grad_input.mutable_data_ptr<acc_t>();
  const int64_t channels = grad_input.size(1), height = grad_input.size(2), width = grad_input.size(3);
  const int64_t taps = p.kernel_h * p.kernel_w, m_count = grad_cols.size(1);
  at::parallel_for(0, channels, grain(taps * m_count), [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      for (int64_t tap = 0; tap < taps; ++tap) {
        const int64_t i = tap / p.kernel_w, j = tap % p.kernel_w;
        const scalar_t* src = gc + (c * taps + tap) * m_count;
        for (int64_t m = 0; m < m_count; ++m) {
          const int64_t* q = pos + 3 * m;
          int64_t y = 0, x = 0;
          if (tap_source(q[1], q[2], i, j, p.stride_h, p.stride_w, p.pad_h, p.pad_w, height, width, y, x)) {
            gi[((q[0] * channels + c) * height + y) * width + x] += static_cast<acc_t>(src[m]);
          }
        }
      }
    }
  });
}

template <typename scalar_t>
void scatter_impl(const at::Tensor& values, const at::Tensor& positions, at::Tensor& output) {
  const scalar_t* v = values.const_data_ptr<scalar_t>();
  const int64_t* pos = positions.const_data_ptr<int64_t>();
  scalar_t* out = output.mutable_data_ptr<scalar_t>();
  const int64_t channels = output.size(1), height = output.size(2), width = output.size(3);
  const int64_t m_count = values.size(1);
  at::parallel_for(0, channels, grain(m_count), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      for (int64_t m = 0; m < m_count; ++m) {
        const int64_t* q = pos + 3 * m;
        out[((q[0] * channels + o) * height + q[1]) * width + q[2]] = v[o * m_count + m];
      }
    }
  });
}

template <typename scalar_t>
void gather_impl(const at::Tensor& grad_output, const at::Tensor& positions, at::Tensor& values) {
  const scalar_t* g = grad_output.const_data_ptr<scalar_t>();
  const int64_t* pos = positions.const_data_ptr<int64_t>();
  scalar_t* v = values.mutable_data_ptr<scalar_t>();
  const auto st = grad_output.strides();
  const int64_t channels = values.size(0), m_count = values.size(1);
  at::parallel_for(0, channels, grain(m_count), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      for (int64_t m = 0; m < m_count; ++m) {
        const int64_t* q = pos + 3 * m;
        v[o * m_count + m] = g[q[0] * st[0] + o * st[1] + q[1] * st[2] + q[2] * st[3]];
      }
    }
  });
}

void im2col_cpu(const at::Tensor& input, const at::Tensor& positions, at::Tensor& cols, const MaskedConvParams& p) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::masked_conv2d im2col (CPU)",
                                  [&] { im2col_impl<scalar_t>(input, positions, cols, p); });
}

void col2im_cpu(const at::Tensor& grad_cols, const at::Tensor& positions, at::Tensor& grad_input,
                const MaskedConvParams& p) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad_cols.scalar_type(),
                                  "mmops::masked_conv2d col2im (CPU)", [&] {
                                    using acc_t = at::opmath_type<scalar_t>;
                                    col2im_impl<scalar_t, acc_t>(grad_cols, positions, grad_input, p);
                                  });
}

void scatter_cpu(const at::Tensor& values, const at::Tensor& positions, at::Tensor& output) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, values.scalar_type(), "mmops::masked_conv2d scatter (CPU)",
                                  [&] { scatter_impl<scalar_t>(values, positions, output); });
}

void gather_cpu(const at::Tensor& grad_output, const at::Tensor& positions, at::Tensor& values) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad_output.scalar_type(),
                                  "mmops::masked_conv2d gather (CPU)",
                                  [&] { gather_impl<scalar_t>(grad_output, positions, values); });
}

constexpr MaskedKernels kCpu{&im2col_cpu, &col2im_cpu, &scatter_cpu, &gather_cpu, nullptr};

constexpr double kDenseFraction = 0.12; // the crossover measured at 1x64x50x76 and 1x64x25x38, 3x3

// A finite sum: no NaN or Inf (an overflowing sum of finite values only costs the slower path).
bool finite_sum(const at::Tensor& t) {
  return std::isfinite(t.sum().item<double>());
}

// The mask over the output grid as 0 / 1 in input's dtype, [N, 1, H_out, W_out]
// (0 beyond the mask's extent), or undefined when the GEMM path should run.
at::Tensor dense_grid(const at::Tensor& input, const at::Tensor& mask, const MaskedConvParams& p) {
  if (input.scalar_type() != at::kFloat && input.scalar_type() != at::kDouble) {
    return {};
  }
  at::Tensor grid = at::zeros({mask.size(0), 1, p.out_h, p.out_w}, input.options());
  const int64_t h = std::min(mask.size(1), p.out_h), w = std::min(mask.size(2), p.out_w);
  grid.slice(2, 0, h).slice(3, 0, w).copy_(at::gt(mask.slice(1, 0, h).slice(2, 0, w), 0).unsqueeze(1));
  const double masked = grid.sum().item<double>();
  return masked > kDenseFraction * static_cast<double>(grid.numel()) ? grid : at::Tensor();
}

// values at the masked positions, 0 elsewhere: a product by the 0 / 1 grid
// when values are finite (NaN * 0 would be NaN), else a select.
at::Tensor keep_masked(const at::Tensor& values, const at::Tensor& grid) {
  return finite_sum(values) ? values.mul(grid) : at::where(grid.gt(0), values, 0);
}

} // namespace

at::Tensor masked_conv2d_forward_cpu(const at::Tensor& input, const at::Tensor& mask, const at::Tensor& weight,
                                     const at::Tensor& bias, const MaskedConvParams& p) {
  const at::Tensor grid = input.numel() > 0 && weight.numel() > 0 ? dense_grid(input, mask, p) : at::Tensor();
  if (grid.defined()) {
    // bias included: the unmasked positions are set to zero afterwards
    const at::Tensor dense = at::conv2d(input, weight, bias, {p.stride_h, p.stride_w}, {p.pad_h, p.pad_w});
    TORCH_INTERNAL_ASSERT(dense.size(2) == p.out_h && dense.size(3) == p.out_w);
    return keep_masked(dense, grid).contiguous();
  }
  return masked_conv2d_forward_gemm(kCpu, input, mask, weight, bias, p);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> masked_conv2d_backward_cpu(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& mask, const at::Tensor& weight,
    const MaskedConvParams& p, std::array<bool, 3> output_mask) {
  const at::Tensor grid =
      input.numel() > 0 && weight.numel() > 0 && grad_output.numel() > 0 ? dense_grid(input, mask, p) : at::Tensor();
  if (grid.defined() && finite_sum(input) && finite_sum(weight)) {
    auto [gi, gw, gb] =
        at::convolution_backward(keep_masked(grad_output, grid), input, weight, std::vector<int64_t>{weight.size(0)},
                                 {p.stride_h, p.stride_w}, {p.pad_h, p.pad_w}, {1, 1}, /*transposed=*/false, {0, 0},
                                 /*groups=*/1, output_mask);
    const auto result = [&](const at::Tensor& t, bool wanted, const at::Tensor& like) {
      return wanted ? t.contiguous() : at::empty({0}, like.options());
    };
    return {result(gi, output_mask[0], input), result(gw, output_mask[1], weight), result(gb, output_mask[2], weight)};
  }
  return masked_conv2d_backward_gemm(kCpu, grad_output, input, mask, weight, p, output_mask);
}

} // namespace kernels
} // namespace mmops

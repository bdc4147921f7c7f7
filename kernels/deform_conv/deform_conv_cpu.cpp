// CPU column kernels of deform_conv2d / modulated_deform_conv2d.
//
// im2col: parallel over output pixels; for each (deform group, tap) the
// bilinear neighbours are found once and applied to the group's channels,
// which are contiguous in both the channels-last input and the column row.
// col2im: parallel over (image, deform group): the input-gradient channels a
// task adds into belong to it alone (no atomics, deterministic), and it owns
// the offset / mask gradients of its taps, which it reduces over its channels.

#include "deform_conv/deform_conv_kernels.h"
#include "deform_conv/deform_conv_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using deform_conv_math::column;
using deform_conv_math::tap_sample;
using deform_conv_math::touches;

// Calls fn(c_begin, c_end, column_of_c_begin) for the runs of channels of
// [c_begin, c_end) that lie in one conv group (contiguous in a column row).
template <typename Fn>
void for_each_run(int64_t c_begin, int64_t c_end, int64_t k, const ColumnSizes& s, Fn&& fn) {
  for (int64_t c = c_begin; c < c_end;) {
    const int64_t g = c / s.per_group;
    const int64_t end = std::min(c_end, (g + 1) * s.per_group);
    fn(c, end, column(c, g, k, s.taps, s.per_group));
    c = end;
  }
}

template <typename scalar_t>
void im2col_impl(const ColumnArgs& a, at::Tensor& cols, const DeformConvParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const ColumnSizes s = column_sizes(a, p);
  const scalar_t* input = a.input.const_data_ptr<scalar_t>();
  const scalar_t* offset = a.offset.const_data_ptr<scalar_t>();
  const scalar_t* mask = a.mask.defined() ? a.mask.const_data_ptr<scalar_t>() : nullptr;
  scalar_t* out = cols.mutable_data_ptr<scalar_t>();
  // Neighbours with weight 0 (outside the map) read this row instead.
  const std::vector<scalar_t> zeros(s.channels, scalar_t(0));
  const int64_t pixels = a.n_count * s.plane;
  at::parallel_for(0, pixels, 16, [&](int64_t begin, int64_t end) {
    for (int64_t q = begin; q < end; ++q) {
      const int64_t n = a.n_begin + q / s.plane, hw = q % s.plane;
      const int64_t ho = hw / p.out_w, wo = hw % p.out_w;
      const scalar_t* image = input + n * s.height * s.width * s.channels;
      scalar_t* row = out + q * s.columns;
      for (int64_t dg = 0; dg < p.deform_groups; ++dg) {
        for (int64_t k = 0; k < s.taps; ++k) {
          const auto t = tap_sample<acc_t>(offset, mask, n, dg, k, ho, wo, p, s.height, s.width);
          const scalar_t* nb[4];
          acc_t w[4];
          for (int i = 0; i < 4; ++i) {
            const bool use = t.taps.weight[i] != acc_t(0);
            nb[i] = use ? image + t.taps.offset[i] * s.channels : zeros.data();
            w[i] = t.taps.weight[i] * t.mask;
          }
          const int64_t c0 = dg * s.per_deform_group;
          for_each_run(c0, c0 + s.per_deform_group, k, s, [&](int64_t cb, int64_t ce, int64_t col) {
            scalar_t* dst = row + col - cb;
            for (int64_t c = cb; c < ce; ++c) {
              const acc_t v = w[0] * static_cast<acc_t>(nb[0][c]) + w[1] * static_cast<acc_t>(nb[1][c]) +
                              w[2] * static_cast<acc_t>(nb[2][c]) + w[3] * static_cast<acc_t>(nb[3][c]);
              dst[c] = static_cast<scalar_t>(v);
            }
          });
        }
      }
    }
  });
}

template <typename scalar_t>
void col2im_impl(const ColumnArgs& a, const at::Tensor& grad_cols_, at::Tensor& grad_input_, at::Tensor& grad_offset_,
                 at::Tensor& grad_mask_, const DeformConvParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const ColumnSizes s = column_sizes(a, p);
  const scalar_t* input = a.input.const_data_ptr<scalar_t>();
  const scalar_t* offset = a.offset.const_data_ptr<scalar_t>();
  const scalar_t* mask = a.mask.defined() ? a.mask.const_data_ptr<scalar_t>() : nullptr;
  const scalar_t* grad_cols = grad_cols_.const_data_ptr<scalar_t>();
  acc_t* grad_input = grad_input_.defined() ? grad_input_.mutable_data_ptr<acc_t>() : nullptr;
  scalar_t* grad_offset = grad_offset_.defined() ? grad_offset_.mutable_data_ptr<scalar_t>() : nullptr;
  scalar_t* grad_mask = grad_mask_.defined() ? grad_mask_.mutable_data_ptr<scalar_t>() : nullptr;
  const bool coordinates = grad_offset != nullptr || grad_mask != nullptr;
  const std::vector<scalar_t> zeros(s.channels, scalar_t(0));
  at::parallel_for(0, a.n_count * p.deform_groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t local = task / p.deform_groups, dg = task % p.deform_groups;
      const int64_t n = a.n_begin + local;
      const int64_t image_offset = n * s.height * s.width * s.channels;
      const int64_t c0 = dg * s.per_deform_group;
      for (int64_t k = 0; k < s.taps; ++k) {
        for (int64_t hw = 0; hw < s.plane; ++hw) {
          const int64_t ho = hw / p.out_w, wo = hw % p.out_w;
          const auto t = tap_sample<acc_t>(offset, mask, n, dg, k, ho, wo, p, s.height, s.width);
          acc_t sum_dy = 0, sum_dx = 0, sum_mask = 0;
          if (t.taps.any) {
            const scalar_t* grad_row = grad_cols + (local * s.plane + hw) * s.columns;
            const scalar_t* values[4];
            acc_t* scatter[4];
            for (int i = 0; i < 4; ++i) {
              values[i] = touches(t.taps, i) ? input + image_offset + t.taps.offset[i] * s.channels : zeros.data();
              scatter[i] = grad_input != nullptr && t.taps.weight[i] != acc_t(0)
                               ? grad_input + image_offset + t.taps.offset[i] * s.channels
                               : nullptr;
            }
            for_each_run(c0, c0 + s.per_deform_group, k, s, [&](int64_t cb, int64_t ce, int64_t col) {
              const scalar_t* src = grad_row + col - cb;
              for (int i = 0; i < 4; ++i) {
                if (scatter[i] != nullptr) {
                  const acc_t scale = t.mask * t.taps.weight[i];
                  for (int64_t c = cb; c < ce; ++c) {
                    scatter[i][c] += scale * static_cast<acc_t>(src[c]);
                  }
                }
              }
              if (coordinates) {
                for (int64_t c = cb; c < ce; ++c) {
                  const acc_t g = static_cast<acc_t>(src[c]);
                  acc_t value = 0, dy = 0, dx = 0;
                  for (int i = 0; i < 4; ++i) {
                    const acc_t v = static_cast<acc_t>(values[i][c]);
                    value += t.taps.weight[i] * v;
                    dy += t.taps.d_dy[i] * v;
                    dx += t.taps.d_dx[i] * v;
                  }
                  sum_dy += g * dy;
                  sum_dx += g * dx;
                  sum_mask += g * value;
                }
              }
            });
          }
          const int64_t taps = s.taps, plane = s.plane;
          if (grad_offset != nullptr) {
            const int64_t o = deform_conv_math::offset_index(n, dg, k, hw, p.deform_groups, taps, plane);
            grad_offset[o] = static_cast<scalar_t>(sum_dy * t.mask);
            grad_offset[o + plane] = static_cast<scalar_t>(sum_dx * t.mask);
          }
          if (grad_mask != nullptr) {
            grad_mask[deform_conv_math::mask_index(n, dg, k, hw, p.deform_groups, taps, plane)] =
                static_cast<scalar_t>(sum_mask);
          }
        }
      }
    }
  });
}

void im2col(const ColumnArgs& a, at::Tensor& cols, const DeformConvParams& p) {
  if (cols.numel() == 0) {
    return;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.input.scalar_type(), "mmops::deform_conv2d im2col (CPU)",
                                  [&] { im2col_impl<scalar_t>(a, cols, p); });
}

void col2im(const ColumnArgs& a, const at::Tensor& grad_cols, at::Tensor& grad_input, at::Tensor& grad_offset,
            at::Tensor& grad_mask, const DeformConvParams& p) {
  if (a.n_count == 0) {
    return;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.input.scalar_type(), "mmops::deform_conv2d col2im (CPU)",
                                  [&] { col2im_impl<scalar_t>(a, grad_cols, grad_input, grad_offset, grad_mask, p); });
}

at::Tensor channels_last(const at::Tensor& t) {
  return t.contiguous(at::MemoryFormat::ChannelsLast);
}

// col2im owns its grad_input channels per task: deterministic.
constexpr ColumnKernels kCpu{&im2col, &col2im, &channels_last, /*nondeterministic_grad_input=*/nullptr};

} // namespace

at::Tensor deform_conv2d_forward_cpu(const at::Tensor& input, const at::Tensor& offset, const at::Tensor& mask,
                                     const at::Tensor& weight, const at::Tensor& bias, const DeformConvParams& p) {
  return deform_conv2d_forward_gemm(kCpu, input, offset, mask, weight, bias, p);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> deform_conv2d_backward_cpu(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& offset, const at::Tensor& mask,
    const at::Tensor& weight, const DeformConvParams& p, std::array<bool, 5> output_mask) {
  return deform_conv2d_backward_gemm(kCpu, grad_output, input, offset, mask, weight, p, output_mask);
}

} // namespace kernels
} // namespace mmops

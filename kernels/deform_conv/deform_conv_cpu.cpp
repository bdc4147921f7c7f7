// CPU column kernels of deform_conv2d / modulated_deform_conv2d.
//
// im2col: parallel over output pixels; for each (deform group, tap) the
// bilinear neighbours are found once and applied to the group's channels,
// which are contiguous in both the channels-last input and the column row.
// col2im: parallel over (image, deform group): the input-gradient channels a
// task adds into belong to it alone (no atomics, deterministic), and it owns
// the offset / mask gradients of its taps, which it reduces over its channels.

#include "common/layout.h"
#include "deform_conv/deform_conv_kernels.h"
#include "deform_conv/deform_conv_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

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
          const acc_t* w = t.taps.weight;
          for (int i = 0; i < 4; ++i) {
            nb[i] = w[i] != acc_t(0) ? image + t.taps.offset[i] * s.channels : zeros.data();
          }
          // mask * (the bilinear sample), as on CUDA: an infinite mask gives
          // NaN where the sample is 0 (outside the map), IEEE arithmetic.
          const acc_t m = t.mask;
          const int64_t c0 = dg * s.per_deform_group;
          for_each_run(c0, c0 + s.per_deform_group, k, s, [&](int64_t cb, int64_t ce, int64_t col) {
            scalar_t* dst = row + col - cb;
            for (int64_t c = cb; c < ce; ++c) {
              const acc_t v = w[0] * static_cast<acc_t>(nb[0][c]) + w[1] * static_cast<acc_t>(nb[1][c]) +
                              w[2] * static_cast<acc_t>(nb[2][c]) + w[3] * static_cast<acc_t>(nb[3][c]);
              dst[c] = static_cast<scalar_t>(v * m);
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

// The weight gradient of a chunk, added into acc ([C_out, K / groups] in the
// accumulation dtype): acc[o, k] += sum over the chunk's output pixels r of
// grad_output[r, o] * cols[r, g * K / groups + k] (g: the group of o). Every
// element is reduced by one task, over the rows in their order, in blocks of
// kWeightGradRows rows whose partial sums add up in order: the result does not
// depend on the thread count (BLAS / oneDNN split this reduction over threads).
constexpr int64_t kWeightGradTileO = 4;  // output channels per tile
constexpr int64_t kWeightGradTileK = 64; // columns per tile
constexpr int64_t kWeightGradRows = 256; // rows per partial sum

template <typename scalar_t>
void weight_grad_impl(const at::Tensor& grad_output, const at::Tensor& cols, at::Tensor& acc, int64_t groups) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t out_channels = grad_output.size(1);
  const int64_t rows = cols.size(0) * cols.size(1) * cols.size(2);
  const int64_t columns = cols.size(3);
  const int64_t group_columns = columns / groups, group_outputs = out_channels / groups;
  const scalar_t* go = grad_output.const_data_ptr<scalar_t>(); // [rows, C_out] (channels-last)
  const scalar_t* cv = cols.const_data_ptr<scalar_t>();        // [rows, K]
  acc_t* out = acc.mutable_data_ptr<acc_t>();                  // [C_out, K / groups]
  const int64_t tiles_o = (group_outputs + kWeightGradTileO - 1) / kWeightGradTileO;
  const int64_t tiles_k = (group_columns + kWeightGradTileK - 1) / kWeightGradTileK;
  at::parallel_for(0, groups * tiles_o * tiles_k, 1, [&](int64_t begin, int64_t end) {
    acc_t total[kWeightGradTileO][kWeightGradTileK];
    acc_t part[kWeightGradTileO][kWeightGradTileK];
    acc_t row[kWeightGradTileK];
    for (int64_t task = begin; task < end; ++task) {
      const int64_t g = task / (tiles_o * tiles_k), rest = task % (tiles_o * tiles_k);
      const int64_t o0 = g * group_outputs + (rest / tiles_k) * kWeightGradTileO;
      const int64_t k0 = (rest % tiles_k) * kWeightGradTileK;
      const int64_t no = std::min(kWeightGradTileO, (g + 1) * group_outputs - o0);
      const int64_t nk = std::min(kWeightGradTileK, group_columns - k0);
      const scalar_t* col_base = cv + g * group_columns + k0;
      for (int64_t o = 0; o < kWeightGradTileO; ++o) {
        std::fill(total[o], total[o] + kWeightGradTileK, acc_t(0));
      }
      for (int64_t r0 = 0; r0 < rows; r0 += kWeightGradRows) {
        const int64_t r1 = std::min(rows, r0 + kWeightGradRows);
        for (int64_t o = 0; o < kWeightGradTileO; ++o) {
          std::fill(part[o], part[o] + kWeightGradTileK, acc_t(0));
        }
        for (int64_t r = r0; r < r1; ++r) {
          const scalar_t* c = col_base + r * columns;
          for (int64_t k = 0; k < nk; ++k) {
            row[k] = static_cast<acc_t>(c[k]);
          }
          const scalar_t* gr = go + r * out_channels + o0;
          for (int64_t o = 0; o < no; ++o) {
            const acc_t a = static_cast<acc_t>(gr[o]);
            acc_t* __restrict__ po = part[o];
            for (int64_t k = 0; k < nk; ++k) {
              po[k] += a * row[k];
            }
          }
        }
        for (int64_t o = 0; o < no; ++o) {
          for (int64_t k = 0; k < nk; ++k) {
            total[o][k] += part[o][k];
          }
        }
      }
      for (int64_t o = 0; o < no; ++o) {
        acc_t* dst = out + (o0 + o) * group_columns + k0;
        for (int64_t k = 0; k < nk; ++k) {
          dst[k] += total[o][k];
        }
      }
    }
  });
}

void weight_grad(const at::Tensor& grad_output, const at::Tensor& cols, at::Tensor& acc, int64_t groups) {
  TORCH_INTERNAL_ASSERT(grad_output.is_contiguous(at::MemoryFormat::ChannelsLast) && cols.is_contiguous() &&
                        acc.is_contiguous());
  if (cols.numel() == 0 || acc.numel() == 0) {
    return;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, cols.scalar_type(),
                                  "mmops::deform_conv2d weight gradient (CPU)",
                                  [&] { weight_grad_impl<scalar_t>(grad_output, cols, acc, groups); });
}

// The bias gradient: sum over (n, h, w) of grad_output per channel, from its
// channels-last copy [rows, C_out], in blocks of kWeightGradRows rows added in
// order (one task per block of channels): independent of the thread count and
// of grad_output's strides.
template <typename scalar_t>
void bias_grad_impl(const at::Tensor& grad_output, at::Tensor& out) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t channels = grad_output.size(1);
  const int64_t rows = grad_output.numel() / std::max<int64_t>(channels, 1);
  const scalar_t* go = grad_output.const_data_ptr<scalar_t>();
  scalar_t* dst = out.mutable_data_ptr<scalar_t>();
  constexpr int64_t kTile = 64;
  at::parallel_for(0, (channels + kTile - 1) / kTile, 1, [&](int64_t begin, int64_t end) {
    acc_t total[kTile], part[kTile];
    for (int64_t tile = begin; tile < end; ++tile) {
      const int64_t c0 = tile * kTile, nc = std::min(kTile, channels - c0);
      std::fill(total, total + kTile, acc_t(0));
      for (int64_t r0 = 0; r0 < rows; r0 += kWeightGradRows) {
        std::fill(part, part + kTile, acc_t(0));
        for (int64_t r = r0; r < std::min(rows, r0 + kWeightGradRows); ++r) {
          const scalar_t* g = go + r * channels + c0;
          for (int64_t c = 0; c < nc; ++c) {
            part[c] += static_cast<acc_t>(g[c]);
          }
        }
        for (int64_t c = 0; c < nc; ++c) {
          total[c] += part[c];
        }
      }
      for (int64_t c = 0; c < nc; ++c) {
        dst[c0 + c] = static_cast<scalar_t>(total[c]);
      }
    }
  });
}

at::Tensor bias_grad(const at::Tensor& grad_output) {
  const at::Tensor go = contiguous_cpu(grad_output, at::MemoryFormat::ChannelsLast);
  at::Tensor out = at::empty({go.size(1)}, go.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, go.scalar_type(),
                                  "mmops::deform_conv2d bias gradient (CPU)",
                                  [&] { bias_grad_impl<scalar_t>(go, out); });
  return out;
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
  return contiguous_cpu(t, at::MemoryFormat::ChannelsLast);
}

// col2im owns its grad_input channels per task, the weight and bias gradients
// reduce in a fixed order: deterministic whatever the thread count.
constexpr ColumnKernels kCpu{&im2col,
                             &col2im,
                             &channels_last,
                             &weight_grad,
                             &bias_grad,
                             /*nondeterministic_grad_input=*/nullptr};

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

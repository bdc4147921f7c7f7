// CPU kernels of ms_deform_attn.
//
// Forward: parallel over (batch, query); each (batch, query, head) sums, over
// levels and points, the attention weight times the bilinear sample of its
// level (bilinear_zero_pad::taps) for the head's D channels, in float (double
// for double): the sample first, then times the weight, as on CUDA (an
// infinite weight gives NaN where the sample is 0, outside samples included).
// Backward: parallel over (batch, head), so that no two threads add into the
// same grad_value row (no atomics, deterministic). For each sample the dot
// products of grad_output with its four neighbours give the attention weight's
// gradient (with the bilinear weights) and the location's (with the weights'
// derivatives); grad_value receives grad_output * weight * bilinear weight.
// Half/bfloat16 accumulate grad_value in a float buffer, cast at the end.

#include "ms_deform_attn/ms_deform_attn_kernels.h"
#include "ms_deform_attn/ms_deform_attn_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <type_traits>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using ms_deform_attn_math::Level;
using ms_deform_attn_math::make_level;
using ms_deform_attn_math::pixel_coordinate;
using ms_deform_attn_math::used;

struct Sizes {
  int64_t batch, rows, heads, channels, queries, levels, points;
};

Sizes sizes_of(const at::Tensor& value, const at::Tensor& sampling_locations) {
  return {value.size(0),
          value.size(1),
          value.size(2),
          value.size(3),
          sampling_locations.size(1),
          sampling_locations.size(3),
          sampling_locations.size(4)};
}

// The levels as the kernels use them (guarded by make_level: the callers have
// already rejected inconsistent shapes and starts on CPU).
std::vector<Level> level_table(const at::Tensor& spatial_shapes, const at::Tensor& level_start_index, int64_t rows) {
  const at::Tensor shapes = spatial_shapes.contiguous();
  const at::Tensor starts = level_start_index.contiguous();
  const int64_t* hw = shapes.const_data_ptr<int64_t>();
  const int64_t* st = starts.const_data_ptr<int64_t>();
  std::vector<Level> levels(shapes.size(0));
  for (size_t l = 0; l < levels.size(); ++l) {
    levels[l] = make_level(hw[2 * l], hw[2 * l + 1], st[l], rows);
  }
  return levels;
}

// Work items per parallel_for chunk: about 16k multiply-adds.
int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, work_per_item));
}

template <typename scalar_t>
void forward_kernel(const at::Tensor& value, const std::vector<Level>& levels, const at::Tensor& loc,
                    const at::Tensor& attn, at::Tensor& output, const Sizes& n) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* v = value.const_data_ptr<scalar_t>();
  const scalar_t* loc_data = loc.const_data_ptr<scalar_t>();
  const scalar_t* attn_data = attn.const_data_ptr<scalar_t>();
  scalar_t* out = output.mutable_data_ptr<scalar_t>();
  const int64_t row_stride = n.heads * n.channels; // between value rows
  const int64_t lp = n.levels * n.points;

  // Unused neighbours (weight 0, never read) read this row instead.
  const std::vector<scalar_t> zeros(n.channels, scalar_t(0));
  at::parallel_for(0, n.batch * n.queries, grain_for(n.heads * lp * 4 * n.channels), [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(n.channels);
    for (int64_t bq = begin; bq < end; ++bq) {
      const int64_t b = bq / n.queries;
      for (int64_t m = 0; m < n.heads; ++m) {
        const int64_t tuple = bq * n.heads + m; // (b, q, m)
        const scalar_t* tl = loc_data + tuple * lp * 2;
        const scalar_t* ta = attn_data + tuple * lp;
        std::fill(acc.begin(), acc.end(), acc_t(0));
        for (int64_t l = 0; l < n.levels; ++l) {
          const Level& lv = levels[l];
          const scalar_t* base = v + (b * n.rows + lv.start) * row_stride + m * n.channels;
          for (int64_t p = 0; p < n.points; ++p) {
            const int64_t k = l * n.points + p;
            const acc_t x = pixel_coordinate(static_cast<acc_t>(tl[2 * k]), lv.width);
            const acc_t y = pixel_coordinate(static_cast<acc_t>(tl[2 * k + 1]), lv.height);
            const auto t = bilinear_zero_pad::taps<acc_t>(y, x, lv.height, lv.width);
            const acc_t a = static_cast<acc_t>(ta[k]);
            if (!t.any) { // outside the map or not finite: the sample is 0
              if (!host_device_math::is_finite(a)) {
                for (int64_t c = 0; c < n.channels; ++c) {
                  acc[c] += a * acc_t(0); // inf * 0: NaN, as a * sample below
                }
              }
              continue;
            }
            // a * (the bilinear sample): the sample first, then the weight.
            const scalar_t* row[4];
            for (int i = 0; i < 4; ++i) {
              row[i] = used(t, i) ? base + t.offset[i] * row_stride : zeros.data();
            }
            const acc_t* w = t.weight;
            for (int64_t c = 0; c < n.channels; ++c) {
              const acc_t sample = w[0] * static_cast<acc_t>(row[0][c]) + w[1] * static_cast<acc_t>(row[1][c]) +
                                   w[2] * static_cast<acc_t>(row[2][c]) + w[3] * static_cast<acc_t>(row[3][c]);
              acc[c] += a * sample;
            }
          }
        }
        scalar_t* o = out + tuple * n.channels;
        for (int64_t c = 0; c < n.channels; ++c) {
          o[c] = static_cast<scalar_t>(acc[c]);
        }
      }
    }
  });
}

// sum_c g[c] * v[c], with four partial sums (a single running sum would be one
// long chain of dependent additions).
template <typename scalar_t, typename acc_t>
acc_t channel_dot(const acc_t* __restrict__ g, const scalar_t* __restrict__ v, int64_t channels) {
  acc_t part[4] = {0, 0, 0, 0};
  int64_t c = 0;
  for (; c + 4 <= channels; c += 4) {
    for (int i = 0; i < 4; ++i) {
      part[i] += g[c + i] * static_cast<acc_t>(v[c + i]);
    }
  }
  for (; c < channels; ++c) {
    part[0] += g[c] * static_cast<acc_t>(v[c]);
  }
  return (part[0] + part[1]) + (part[2] + part[3]);
}

// grad_value_acc: [B, S, M, D] in acc_t (the gradient itself for float/double).
template <typename scalar_t, typename acc_t>
void backward_kernel(const at::Tensor& grad_output, const at::Tensor& value, const std::vector<Level>& levels,
                     const at::Tensor& loc, const at::Tensor& attn, acc_t* grad_value, at::Tensor& grad_loc,
                     at::Tensor& grad_attn, const Sizes& n) {
  const scalar_t* go = grad_output.const_data_ptr<scalar_t>();
  const scalar_t* v = value.const_data_ptr<scalar_t>();
  const scalar_t* loc_data = loc.const_data_ptr<scalar_t>();
  const scalar_t* attn_data = attn.const_data_ptr<scalar_t>();
  scalar_t* gl = grad_loc.mutable_data_ptr<scalar_t>();
  scalar_t* ga = grad_attn.mutable_data_ptr<scalar_t>();
  const int64_t row_stride = n.heads * n.channels;
  const int64_t lp = n.levels * n.points;

  // (b, m) owns grad_value[b, :, m, :]: no two threads write the same value.
  at::parallel_for(0, n.batch * n.heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> g(n.channels);
    for (int64_t bm = begin; bm < end; ++bm) {
      const int64_t b = bm / n.heads, m = bm % n.heads;
      for (int64_t q = 0; q < n.queries; ++q) {
        const int64_t tuple = (b * n.queries + q) * n.heads + m;
        const scalar_t* tl = loc_data + tuple * lp * 2;
        const scalar_t* ta = attn_data + tuple * lp;
        for (int64_t c = 0; c < n.channels; ++c) {
          g[c] = static_cast<acc_t>(go[tuple * n.channels + c]);
        }
        for (int64_t l = 0; l < n.levels; ++l) {
          const Level& lv = levels[l];
          const int64_t base = (b * n.rows + lv.start) * row_stride + m * n.channels;
          for (int64_t p = 0; p < n.points; ++p) {
            const int64_t k = l * n.points + p;
            const acc_t x = pixel_coordinate(static_cast<acc_t>(tl[2 * k]), lv.width);
            const acc_t y = pixel_coordinate(static_cast<acc_t>(tl[2 * k + 1]), lv.height);
            const auto t = bilinear_zero_pad::taps<acc_t>(y, x, lv.height, lv.width);
            const acc_t a = static_cast<acc_t>(ta[k]);
            acc_t sum_w = 0, sum_dx = 0, sum_dy = 0;
            for (int i = 0; t.any && i < 4; ++i) {
              if (!used(t, i)) {
                continue;
              }
              const int64_t row = base + t.offset[i] * row_stride;
              const acc_t dot = channel_dot(g.data(), v + row, n.channels); // grad_output . neighbour i
              const acc_t scale = a * t.weight[i];
              acc_t* __restrict__ gv = grad_value + row;
              for (int64_t c = 0; c < n.channels; ++c) {
                gv[c] += scale * g[c];
              }
              sum_w += t.weight[i] * dot;
              sum_dx += t.d_dx[i] * dot;
              sum_dy += t.d_dy[i] * dot;
            }
            ga[tuple * lp + k] = static_cast<scalar_t>(sum_w);
            // x = u * W - 0.5: d/du = W. A sample worth 0 has no location gradient.
            gl[(tuple * lp + k) * 2] =
                static_cast<scalar_t>(t.any ? a * sum_dx * static_cast<acc_t>(lv.width) : acc_t(0));
            gl[(tuple * lp + k) * 2 + 1] =
                static_cast<scalar_t>(t.any ? a * sum_dy * static_cast<acc_t>(lv.height) : acc_t(0));
          }
        }
      }
    }
  });
}

#define MMOPS_MSDA_DISPATCH(dtype, name, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, name, __VA_ARGS__)

} // namespace

at::Tensor ms_deform_attn_forward_cpu(const at::Tensor& value_, const at::Tensor& spatial_shapes,
                                      const at::Tensor& level_start_index, const at::Tensor& sampling_locations_,
                                      const at::Tensor& attention_weights_) {
  const at::Tensor value = value_.contiguous();
  const at::Tensor loc = sampling_locations_.contiguous();
  const at::Tensor attn = attention_weights_.contiguous();
  const Sizes n = sizes_of(value, loc);
  at::Tensor output = at::empty({n.batch, n.queries, n.heads * n.channels}, value.options());
  if (output.numel() == 0) {
    return output;
  }
  const std::vector<Level> levels = level_table(spatial_shapes, level_start_index, n.rows);
  MMOPS_MSDA_DISPATCH(value.scalar_type(), "mmops::ms_deform_attn (CPU)",
                      [&] { forward_kernel<scalar_t>(value, levels, loc, attn, output, n); });
  return output;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> ms_deform_attn_backward_cpu(
    const at::Tensor& grad_output_, const at::Tensor& value_, const at::Tensor& spatial_shapes,
    const at::Tensor& level_start_index, const at::Tensor& sampling_locations_, const at::Tensor& attention_weights_) {
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor value = value_.contiguous();
  const at::Tensor loc = sampling_locations_.contiguous();
  const at::Tensor attn = attention_weights_.contiguous();
  const Sizes n = sizes_of(value, loc);
  at::Tensor grad_loc = at::zeros(loc.sizes(), loc.options());
  at::Tensor grad_attn = at::zeros(attn.sizes(), attn.options());
  const bool low_precision = value.scalar_type() == at::kHalf || value.scalar_type() == at::kBFloat16;
  at::Tensor grad_value =
      at::zeros(value.sizes(), value.options().dtype(low_precision ? at::kFloat : value.scalar_type()));
  if (attn.numel() > 0 && value.numel() > 0) {
    const std::vector<Level> levels = level_table(spatial_shapes, level_start_index, n.rows);
    MMOPS_MSDA_DISPATCH(value.scalar_type(), "mmops::_ms_deform_attn_backward (CPU)", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      backward_kernel<scalar_t, acc_t>(grad_output, value, levels, loc, attn, grad_value.mutable_data_ptr<acc_t>(),
                                       grad_loc, grad_attn, n);
    });
  }
  if (low_precision) {
    grad_value = grad_value.to(value.scalar_type());
  }
  return {grad_value, grad_loc, grad_attn};
}

} // namespace kernels
} // namespace mmops

// CPU kernels of ps_roi_align and ps_roi_pool (geometry: ps_roi_math.h).
//
// Forward: parallel over (roi, bin) pairs; a pair's sample taps (align) or
// pixel ranges (pool) are computed once and applied to every output channel.
// Backward: parallel over (bin, output channel) pairs. Each pair owns input
// channel (c * PH + ph) * PW + pw of every image, which no other pair touches,
// and adds the rois into it in roi order: deterministic, whatever the thread
// count. Half / bfloat16 accumulate in float.

#include "ps_roi/ps_roi_kernels.h"
#include "ps_roi/ps_roi_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using ps_roi_math::Box;
using ps_roi_math::Range;
using roi_bilinear::AxisTap;
using roi_bilinear::Corners;

// The shapes every kernel needs.
struct Shape {
  int64_t batch, channels, height, width, bins, channels_out;
};

// The valid samples of one align bin: four offsets into a plane and weights.
template <typename acc_t>
void align_bin_corners(std::vector<Corners<acc_t>>& out, const Box<acc_t>& box, int64_t ph, int64_t pw,
                       const Shape& s) {
  out.clear();
  for (int iy = 0; iy < box.y.grid; ++iy) {
    const AxisTap<acc_t> ty = roi_bilinear::axis_tap(ps_roi_math::sample_coord(box.y, ph, iy), s.height);
    if (!ty.valid) {
      continue;
    }
    for (int ix = 0; ix < box.x.grid; ++ix) {
      const AxisTap<acc_t> tx = roi_bilinear::axis_tap(ps_roi_math::sample_coord(box.x, pw, ix), s.width);
      if (tx.valid) {
        out.push_back(roi_bilinear::corners(ty, tx, s.width));
      }
    }
  }
}

template <typename scalar_t, typename acc_t>
Box<acc_t> locate(bool align, const scalar_t* roi, const Shape& s, const PSRoIParams& p) {
  const acc_t r[5] = {static_cast<acc_t>(roi[0]), static_cast<acc_t>(roi[1]), static_cast<acc_t>(roi[2]),
                      static_cast<acc_t>(roi[3]), static_cast<acc_t>(roi[4])};
  const acc_t scale = static_cast<acc_t>(p.spatial_scale);
  return align ? ps_roi_math::align_box(r, s.batch, scale, p.pooled_height, p.pooled_width, p.sampling_ratio)
               : ps_roi_math::pool_box(r, s.batch, scale, p.pooled_height, p.pooled_width);
}

template <bool kAlign, typename scalar_t>
void forward_kernel(const scalar_t* input, const scalar_t* rois, scalar_t* out, int64_t num_rois, const Shape& s,
                    const PSRoIParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t plane = s.height * s.width;
  at::parallel_for(0, num_rois * s.bins, 1, [&](int64_t begin, int64_t end) {
    std::vector<Corners<acc_t>> taps;
    for (int64_t i = begin; i < end; ++i) {
      const int64_t k = i / s.bins, b = i % s.bins;
      const int64_t ph = b / p.pooled_width, pw = b % p.pooled_width;
      scalar_t* out_kb = out + k * s.channels_out * s.bins + b; // stride bins per output channel
      const Box<acc_t> box = locate<scalar_t, acc_t>(kAlign, rois + k * 5, s, p);
      const scalar_t* image = input + (box.batch >= 0 ? box.batch : 0) * s.channels * plane;
      if (kAlign) {
        const int64_t count = static_cast<int64_t>(box.y.grid) * box.x.grid;
        if (box.batch >= 0 && count > 0) {
          align_bin_corners(taps, box, ph, pw, s);
        }
        for (int64_t c = 0; c < s.channels_out; ++c) {
          acc_t sum = acc_t(0);
          if (box.batch >= 0 && count > 0) {
            const scalar_t* x = image + (c * s.bins + b) * plane;
            for (const Corners<acc_t>& t : taps) {
              sum +=
                  t.weight[0] * static_cast<acc_t>(x[t.offset[0]]) + t.weight[1] * static_cast<acc_t>(x[t.offset[1]]) +
                  t.weight[2] * static_cast<acc_t>(x[t.offset[2]]) + t.weight[3] * static_cast<acc_t>(x[t.offset[3]]);
            }
            sum /= static_cast<acc_t>(count);
          }
          out_kb[c * s.bins] = static_cast<scalar_t>(sum);
        }
      } else {
        const Range ry = ps_roi_math::pool_range(box.y, ph, s.height);
        const Range rx = ps_roi_math::pool_range(box.x, pw, s.width);
        const bool empty = box.batch < 0 || ry.empty() || rx.empty();
        const acc_t area = static_cast<acc_t>((ry.end - ry.begin) * (rx.end - rx.begin));
        for (int64_t c = 0; c < s.channels_out; ++c) {
          acc_t sum = acc_t(0);
          if (!empty) {
            const scalar_t* x = image + (c * s.bins + b) * plane;
            for (int64_t h = ry.begin; h < ry.end; ++h) {
              for (int64_t w = rx.begin; w < rx.end; ++w) {
                sum += static_cast<acc_t>(x[h * s.width + w]);
              }
            }
            sum /= area;
          }
          out_kb[c * s.bins] = static_cast<scalar_t>(sum);
        }
      }
    }
  });
}

template <bool kAlign, typename scalar_t, typename acc_t>
void backward_kernel(const scalar_t* grad_out, const scalar_t* rois, acc_t* grad, int64_t num_rois, const Shape& s,
                     const PSRoIParams& p) {
  const int64_t plane = s.height * s.width;
  at::parallel_for(0, s.bins * s.channels_out, 1, [&](int64_t begin, int64_t end) {
    std::vector<Corners<acc_t>> taps;
    for (int64_t b = begin / s.channels_out; b * s.channels_out < end; ++b) {
      const int64_t c0 = std::max(begin, b * s.channels_out) - b * s.channels_out;
      const int64_t c1 = std::min(end, (b + 1) * s.channels_out) - b * s.channels_out;
      const int64_t ph = b / p.pooled_width, pw = b % p.pooled_width;
      for (int64_t k = 0; k < num_rois; ++k) {
        const Box<acc_t> box = locate<scalar_t, acc_t>(kAlign, rois + k * 5, s, p);
        if (box.batch < 0) {
          continue;
        }
        const scalar_t* g_kb = grad_out + k * s.channels_out * s.bins + b;
        acc_t* image = grad + box.batch * s.channels * plane;
        if (kAlign) {
          const int64_t count = static_cast<int64_t>(box.y.grid) * box.x.grid;
          if (count == 0) {
            continue;
          }
          align_bin_corners(taps, box, ph, pw, s);
          for (int64_t c = c0; c < c1; ++c) {
            const acc_t g = static_cast<acc_t>(g_kb[c * s.bins]) / static_cast<acc_t>(count);
            acc_t* x = image + (c * s.bins + b) * plane;
            for (const Corners<acc_t>& t : taps) {
              for (int j = 0; j < 4; ++j) {
                x[t.offset[j]] += g * t.weight[j];
              }
            }
          }
        } else {
          const Range ry = ps_roi_math::pool_range(box.y, ph, s.height);
          const Range rx = ps_roi_math::pool_range(box.x, pw, s.width);
          if (ry.empty() || rx.empty()) {
            continue;
          }
          const acc_t area = static_cast<acc_t>((ry.end - ry.begin) * (rx.end - rx.begin));
          for (int64_t c = c0; c < c1; ++c) {
            const acc_t g = static_cast<acc_t>(g_kb[c * s.bins]) / area;
            acc_t* x = image + (c * s.bins + b) * plane;
            for (int64_t h = ry.begin; h < ry.end; ++h) {
              for (int64_t w = rx.begin; w < rx.end; ++w) {
                x[h * s.width + w] += g;
              }
            }
          }
        }
      }
    }
  });
}

template <bool kAlign>
at::Tensor forward(const at::Tensor& input_, const at::Tensor& rois_, const PSRoIParams& p) {
  const at::Tensor input = input_.contiguous();
  const at::Tensor rois = rois_.contiguous();
  const int64_t num_rois = rois.size(0);
  at::Tensor output = at::empty({num_rois, p.channels_out, p.pooled_height, p.pooled_width}, input.options());
  if (output.numel() == 0) {
    return output;
  }
  const Shape s{input.size(0), input.size(1), input.size(2), input.size(3), p.pooled_height * p.pooled_width,
                p.channels_out};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::ps_roi forward (CPU)", [&] {
    forward_kernel<kAlign, scalar_t>(input.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(),
                                     output.mutable_data_ptr<scalar_t>(), num_rois, s, p);
  });
  return output;
}

template <bool kAlign>
at::Tensor backward(const at::Tensor& grad_output_, const at::Tensor& rois_, const std::vector<int64_t>& shape,
                    const PSRoIParams& p) {
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor rois = rois_.contiguous();
  const auto dtype = grad_output.scalar_type();
  // Reduced-precision gradients accumulate in float, then round once.
  const bool reduced = dtype == at::kHalf || dtype == at::kBFloat16;
  at::Tensor grad = at::zeros(shape, grad_output.options().dtype(reduced ? at::kFloat : dtype));
  if (grad_output.numel() > 0 && grad.numel() > 0) {
    const Shape s{shape[0], shape[1], shape[2], shape[3], p.pooled_height * p.pooled_width, p.channels_out};
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mmops::ps_roi backward (CPU)", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      backward_kernel<kAlign, scalar_t, acc_t>(grad_output.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(),
                                               grad.mutable_data_ptr<acc_t>(), rois.size(0), s, p);
    });
  }
  return reduced ? grad.to(dtype) : grad;
}

} // namespace

at::Tensor ps_roi_align_forward_cpu(const at::Tensor& input, const at::Tensor& rois, const PSRoIParams& params) {
  return forward<true>(input, rois, params);
}

at::Tensor ps_roi_pool_forward_cpu(const at::Tensor& input, const at::Tensor& rois, const PSRoIParams& params) {
  return forward<false>(input, rois, params);
}

at::Tensor ps_roi_align_backward_cpu(const at::Tensor& grad_output, const at::Tensor& rois,
                                     const std::vector<int64_t>& input_shape, const PSRoIParams& params) {
  return backward<true>(grad_output, rois, input_shape, params);
}

at::Tensor ps_roi_pool_backward_cpu(const at::Tensor& grad_output, const at::Tensor& rois,
                                    const std::vector<int64_t>& input_shape, const PSRoIParams& params) {
  return backward<false>(grad_output, rois, input_shape, params);
}

} // namespace kernels
} // namespace mmops

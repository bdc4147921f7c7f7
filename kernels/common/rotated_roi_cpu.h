#pragma once
// CPU kernels of rotated RoIAlign (roi_align_rotated, riroi_align_rotated):
// the forward runs in parallel over (roi, bin), the backward over input
// channels (each gathers from the output channels that read it, so no two
// threads write one gradient value: no atomics, deterministic). Both read an
// NCHW-contiguous map and accumulate in at::opmath_type.

#include "common/rotated_roi.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <cstdint>
#include <vector>

namespace mmops {
namespace kernels {
namespace rotated_roi_cpu {

using rotated_roi::Corners;

// The taps of every sample of bin (ph, pw), appended to `taps`.
template <typename T>
void bin_taps(const rotated_roi::Roi<T>& r, int64_t ph, int64_t pw, int64_t height, int64_t width,
              std::vector<Corners<T>>& taps) {
  taps.clear();
  for (int iy = 0; iy < r.grid_h; ++iy) {
    for (int ix = 0; ix < r.grid_w; ++ix) {
      taps.push_back(rotated_roi::sample_taps(r, ph, pw, iy, ix, height, width));
    }
  }
}

template <typename acc_t, typename scalar_t>
acc_t bin_value(const scalar_t* plane, const std::vector<Corners<acc_t>>& taps) {
  acc_t sum = acc_t(0);
  for (const Corners<acc_t>& c : taps) {
    for (int j = 0; j < 4; ++j) {
      sum += c.weight[j] * static_cast<acc_t>(plane[c.offset[j]]);
    }
  }
  return sum;
}

template <typename scalar_t>
void forward_typed(const at::Tensor& input, const at::Tensor& rois, at::Tensor& output, const RotatedRoiParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t batch = input.size(0), channels = input.size(1), height = input.size(2), width = input.size(3);
  const int64_t bins = p.pooled_height * p.pooled_width;
  const scalar_t* in = input.const_data_ptr<scalar_t>();
  const scalar_t* roi_data = rois.const_data_ptr<scalar_t>();
  scalar_t* out = output.mutable_data_ptr<scalar_t>();
  const int64_t plane = height * width;
  at::parallel_for(0, rois.size(0) * bins, 1, [&](int64_t begin, int64_t end) {
    std::vector<Corners<acc_t>> taps;
    acc_t roi_values[6];
    for (int64_t i = begin; i < end; ++i) {
      const int64_t k = i / bins, bin = i - k * bins;
      for (int j = 0; j < 6; ++j) {
        roi_values[j] = static_cast<acc_t>(roi_data[k * 6 + j]);
      }
      const auto r = rotated_roi::make_roi(roi_values, batch, p);
      scalar_t* dst = out + k * channels * bins + bin;
      if (r.batch < 0 || r.inv_count == acc_t(0) || plane == 0) { // an empty map reads nothing
        for (int64_t c = 0; c < channels; ++c) {
          dst[c * bins] = scalar_t(0);
        }
        continue;
      }
      bin_taps(r, bin / p.pooled_width, bin % p.pooled_width, height, width, taps);
      const scalar_t* image = in + r.batch * channels * plane;
      for (int64_t c = 0; c < channels; ++c) {
        const auto src = rotated_roi::source_channels(c, r, p);
        acc_t v = r.w_lo * bin_value(image + src.lo * plane, taps);
        if (r.w_hi != acc_t(0)) {
          v += r.w_hi * bin_value(image + src.hi * plane, taps);
        }
        dst[c * bins] = static_cast<scalar_t>(v * r.inv_count);
      }
    }
  });
}

template <typename acc_t>
void scatter(acc_t* plane, const std::vector<Corners<acc_t>>& taps, acc_t g) {
  for (const Corners<acc_t>& c : taps) {
    for (int j = 0; j < 4; ++j) {
      plane[c.offset[j]] += g * c.weight[j];
    }
  }
}

template <typename scalar_t>
void backward_typed(const at::Tensor& grad_output, const at::Tensor& rois, at::Tensor& grad,
                    const RotatedRoiParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t batch = grad.size(0), channels = grad.size(1), height = grad.size(2), width = grad.size(3);
  const int64_t bins = p.pooled_height * p.pooled_width, plane = height * width;
  const scalar_t* go = grad_output.const_data_ptr<scalar_t>();
  const scalar_t* roi_data = rois.const_data_ptr<scalar_t>();
  acc_t* g_data = grad.mutable_data_ptr<acc_t>();
  const int64_t num_rois = rois.size(0);
  // Each thread owns a range of input channels and gathers their gradient from
  // the output channels that read them (output_channels): one writer per value.
  at::parallel_for(0, channels, 1, [&](int64_t c_begin, int64_t c_end) {
    std::vector<Corners<acc_t>> taps;
    acc_t roi_values[6];
    for (int64_t k = 0; k < num_rois; ++k) {
      for (int j = 0; j < 6; ++j) {
        roi_values[j] = static_cast<acc_t>(roi_data[k * 6 + j]);
      }
      const auto r = rotated_roi::make_roi(roi_values, batch, p);
      if (r.batch < 0 || r.inv_count == acc_t(0)) {
        continue;
      }
      acc_t* image = g_data + r.batch * channels * plane;
      const scalar_t* roi_go = go + k * channels * bins;
      for (int64_t bin = 0; bin < bins; ++bin) {
        bin_taps(r, bin / p.pooled_width, bin % p.pooled_width, height, width, taps);
        for (int64_t c = c_begin; c < c_end; ++c) {
          const auto from = rotated_roi::output_channels(c, r, p);
          acc_t g = r.w_lo * static_cast<acc_t>(roi_go[from.lo * bins + bin]);
          if (r.w_hi != acc_t(0)) {
            g += r.w_hi * static_cast<acc_t>(roi_go[from.hi * bins + bin]);
          }
          scatter(image + c * plane, taps, g * r.inv_count);
        }
      }
    }
  });
}

// output [K, C, PH, PW] (NCHW-contiguous) of input [N, C, H, W].
inline at::Tensor forward(const at::Tensor& input_, const at::Tensor& rois_, const RotatedRoiParams& p) {
  const at::Tensor input = input_.contiguous();
  const at::Tensor rois = rois_.contiguous();
  at::Tensor output = at::empty({rois.size(0), input.size(1), p.pooled_height, p.pooled_width}, input.options());
  if (output.numel() == 0) {
    return output;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops rotated RoIAlign forward",
                                  [&] { forward_typed<scalar_t>(input, rois, output, p); });
  return output;
}

// Gradient [N, C, H, W] (input_shape) of the input, summed in opmath precision.
inline at::Tensor backward(const at::Tensor& grad_output_, const at::Tensor& rois_,
                           const std::vector<int64_t>& input_shape, const RotatedRoiParams& p) {
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor rois = rois_.contiguous();
  const auto acc_dtype = at::toOpMathType(grad_output.scalar_type());
  at::Tensor grad = at::zeros(input_shape, grad_output.options().dtype(acc_dtype));
  if (grad_output.numel() != 0 && grad.numel() != 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad_output.scalar_type(),
                                    "mmops rotated RoIAlign backward",
                                    [&] { backward_typed<scalar_t>(grad_output, rois, grad, p); });
  }
  return acc_dtype == grad_output.scalar_type() ? grad : grad.to(grad_output.scalar_type());
}

} // namespace rotated_roi_cpu
} // namespace kernels
} // namespace mmops

// CPU kernels of bezier_align.
//
// Forward: parallel over rois, on the input made channels-last (a
// channels_last input is used as it is). For each bin, the taps of its samples
// are computed once and applied to all channels at a time (contiguous runs).
// Backward: parallel over channels, so that no two threads ever add into the
// same gradient value (no atomics, deterministic); each thread walks all rois.

#include "bezier_align/bezier_align_kernels.h"
#include "bezier_align/bezier_align_math.h"
#include "common/layout.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using namespace bezier_align_math;

// One sample with its four neighbours resolved (weights include 1 / samples).
template <typename T>
struct SampleTap {
  int64_t offset[4];
  T weight[4];
};

// The samples of bin (ph, pw) of roi r that lie in the map (the others add 0).
template <typename T>
void bin_samples(std::vector<SampleTap<T>>& taps, std::vector<AxisTap<T>>& ytaps, std::vector<AxisTap<T>>& xtaps,
                 const BezierRoi<T>& r, int64_t ph, int64_t pw, const BezierAlignParams& p, int64_t height,
                 int64_t width, T weight_scale) {
  taps.clear();
  const BinCenter<T> c = bin_center(r, ph, pw, p.pooled_height, p.pooled_width);
  ytaps.resize(r.grid_h);
  xtaps.resize(r.grid_w);
  for (int iy = 0; iy < r.grid_h; ++iy) {
    ytaps[iy] = axis_tap(sample_coord(c.y, r.bin_h, iy, r.grid_h), height);
  }
  for (int ix = 0; ix < r.grid_w; ++ix) {
    xtaps[ix] = axis_tap(sample_coord(c.x, r.bin_w, ix, r.grid_w), width);
  }
  for (int iy = 0; iy < r.grid_h; ++iy) {
    if (!ytaps[iy].valid) {
      continue;
    }
    for (int ix = 0; ix < r.grid_w; ++ix) {
      if (!xtaps[ix].valid) {
        continue;
      }
      const Corners<T> cr = corners(ytaps[iy], xtaps[ix], width);
      SampleTap<T> t;
      for (int j = 0; j < 4; ++j) {
        t.offset[j] = cr.offset[j];
        t.weight[j] = cr.weight[j] * weight_scale;
      }
      taps.push_back(t);
    }
  }
}

template <typename T>
T inverse_count(const BezierRoi<T>& r) {
  const int64_t samples = static_cast<int64_t>(r.grid_h) * r.grid_w; // <= kMaxGridSide^2
  return samples > 0 ? T(1) / static_cast<T>(samples) : T(0);
}

template <typename scalar_t>
void forward_kernel(const at::Tensor& input, const at::Tensor& rois, at::Tensor& output, const BezierAlignParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t batch = input.size(0), channels = input.size(1), height = input.size(2), width = input.size(3);
  const int64_t bins = p.pooled_height * p.pooled_width;
  const scalar_t* pixels_all = input.const_data_ptr<scalar_t>(); // [N, H, W, C] in memory
  const scalar_t* roi_data = rois.const_data_ptr<scalar_t>();
  scalar_t* out = output.mutable_data_ptr<scalar_t>();
  at::parallel_for(0, rois.size(0), 1, [&](int64_t begin, int64_t end) {
    std::vector<SampleTap<acc_t>> taps;
    std::vector<AxisTap<acc_t>> ytaps, xtaps;
    std::vector<acc_t> values(channels);
    for (int64_t k = begin; k < end; ++k) {
      scalar_t* out_k = out + k * channels * bins;
      const scalar_t* roi = roi_data + k * kRoiColumns;
      const BezierRoi<acc_t> r = make_bezier_roi<acc_t>(roi, static_cast<acc_t>(p.spatial_scale), p.aligned,
                                                        p.pooled_height, p.pooled_width, p.sampling_ratio);
      const int64_t b = batch_index(static_cast<acc_t>(roi[0]), batch);
      if (b < 0 || !r.valid) {
        std::fill(out_k, out_k + channels * bins, scalar_t(0));
        continue;
      }
      const scalar_t* pixels = pixels_all + b * height * width * channels;
      const acc_t inv_count = inverse_count(r);
      for (int64_t ph = 0; ph < p.pooled_height; ++ph) {
        for (int64_t pw = 0; pw < p.pooled_width; ++pw) {
          bin_samples(taps, ytaps, xtaps, r, ph, pw, p, height, width, inv_count);
          std::fill(values.begin(), values.end(), acc_t(0));
          acc_t* __restrict__ value = values.data();
          for (const SampleTap<acc_t>& t : taps) {
            const scalar_t* __restrict__ p0 = pixels + t.offset[0] * channels;
            const scalar_t* __restrict__ p1 = pixels + t.offset[1] * channels;
            const scalar_t* __restrict__ p2 = pixels + t.offset[2] * channels;
            const scalar_t* __restrict__ p3 = pixels + t.offset[3] * channels;
            const acc_t w0 = t.weight[0], w1 = t.weight[1], w2 = t.weight[2], w3 = t.weight[3];
            for (int64_t c = 0; c < channels; ++c) {
              value[c] += w0 * static_cast<acc_t>(p0[c]) + w1 * static_cast<acc_t>(p1[c]) +
                          w2 * static_cast<acc_t>(p2[c]) + w3 * static_cast<acc_t>(p3[c]);
            }
          }
          const int64_t bin = ph * p.pooled_width + pw;
          for (int64_t c = 0; c < channels; ++c) {
            out_k[c * bins + bin] = static_cast<scalar_t>(value[c]);
          }
        }
      }
    }
  });
}

// grad: the accumulation buffer [N, C, H, W] (acc_t).
template <typename scalar_t, typename acc_t>
void backward_kernel(const at::Tensor& grad_output, const at::Tensor& rois, acc_t* grad, int64_t batch,
                     int64_t channels, int64_t height, int64_t width, const BezierAlignParams& p) {
  const int64_t bins = p.pooled_height * p.pooled_width;
  const int64_t plane = height * width;
  const scalar_t* grad_out = grad_output.const_data_ptr<scalar_t>();
  const scalar_t* roi_data = rois.const_data_ptr<scalar_t>();
  const int64_t num_rois = rois.size(0);
  // Parallel over channels: no two threads add into the same value.
  at::parallel_for(0, channels, 1, [&](int64_t c_begin, int64_t c_end) {
    std::vector<SampleTap<acc_t>> taps;
    std::vector<AxisTap<acc_t>> ytaps, xtaps;
    for (int64_t k = 0; k < num_rois; ++k) {
      const scalar_t* roi = roi_data + k * kRoiColumns;
      const BezierRoi<acc_t> r = make_bezier_roi<acc_t>(roi, static_cast<acc_t>(p.spatial_scale), p.aligned,
                                                        p.pooled_height, p.pooled_width, p.sampling_ratio);
      const int64_t b = batch_index(static_cast<acc_t>(roi[0]), batch);
      if (b < 0 || !r.valid || r.grid_h * r.grid_w == 0) {
        continue;
      }
      const acc_t inv_count = inverse_count(r);
      for (int64_t ph = 0; ph < p.pooled_height; ++ph) {
        for (int64_t pw = 0; pw < p.pooled_width; ++pw) {
          bin_samples(taps, ytaps, xtaps, r, ph, pw, p, height, width, inv_count);
          const int64_t bin = ph * p.pooled_width + pw;
          for (int64_t c = c_begin; c < c_end; ++c) {
            const acc_t g = static_cast<acc_t>(grad_out[(k * channels + c) * bins + bin]);
            acc_t* target = grad + (b * channels + c) * plane;
            for (const SampleTap<acc_t>& t : taps) {
              for (int j = 0; j < 4; ++j) {
                target[t.offset[j]] += g * t.weight[j];
              }
            }
          }
        }
      }
    }
  });
}

} // namespace

at::Tensor bezier_align_forward_cpu(const at::Tensor& input_, const at::Tensor& rois_,
                                    const BezierAlignParams& params) {
  // Channels-last: a sample's taps are then contiguous runs of channels.
  const at::Tensor input = contiguous_cpu(input_, at::MemoryFormat::ChannelsLast);
  const at::Tensor rois = rois_.contiguous();
  at::Tensor output =
      at::empty({rois.size(0), input.size(1), params.pooled_height, params.pooled_width}, input.options());
  if (output.numel() == 0) {
    return output;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::bezier_align (CPU)",
                                  [&] { forward_kernel<scalar_t>(input, rois, output, params); });
  return output;
}

at::Tensor bezier_align_backward_cpu(const at::Tensor& grad_output_, const at::Tensor& rois_,
                                     const std::vector<int64_t>& input_shape, const BezierAlignParams& params) {
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor rois = rois_.contiguous();
  const auto dtype = grad_output.scalar_type();
  // Reduced-precision gradients accumulate in float, then round once.
  const bool reduced = dtype == at::kHalf || dtype == at::kBFloat16;
  at::Tensor grad = at::zeros(input_shape, grad_output.options().dtype(reduced ? at::kFloat : dtype));
  if (grad_output.numel() > 0 && grad.numel() > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mmops::bezier_align backward (CPU)", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      backward_kernel<scalar_t, acc_t>(grad_output, rois, grad.mutable_data_ptr<acc_t>(), input_shape[0],
                                       input_shape[1], input_shape[2], input_shape[3], params);
    });
  }
  return reduced ? grad.to(dtype) : grad;
}

} // namespace kernels
} // namespace mmops

// CPU kernels of roi_align.
//
// Forward: parallel over rois. For each roi the per-axis bilinear taps of all
// samples are computed once (the weights are separable) and reused for every
// channel.
// Backward: parallel over channels, so that no two threads ever add into the
// same gradient value (no atomics, deterministic); each thread walks all rois.

#include "roi_align/roi_align_kernels.h"
#include "roi_align/roi_align_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <vector>

namespace mmops {
namespace kernels {
namespace {

using namespace roi_align_math;

// Per-axis taps of every sample of one roi: taps[p * grid + i] for bin p, sample i.
template <typename T>
void axis_taps(std::vector<AxisTap<T>>& taps, T start, T bin_size, int64_t pooled, int grid,
               int64_t size) {
  taps.resize(pooled * grid);
  for (int64_t p = 0; p < pooled; ++p) {
    for (int i = 0; i < grid; ++i) {
      taps[p * grid + i] = axis_tap(sample_coord(start, bin_size, p, i, grid), size);
    }
  }
}

template <typename scalar_t>
void forward_kernel(const at::Tensor& input, const at::Tensor& rois, at::Tensor& output,
                    int32_t* argmax, const RoIAlignParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t batch = input.size(0), channels = input.size(1);
  const int64_t height = input.size(2), width = input.size(3);
  const int64_t num_rois = rois.size(0);
  const int64_t ph_count = p.pooled_height, pw_count = p.pooled_width;
  const int64_t bins = ph_count * pw_count;
  const scalar_t* in = input.const_data_ptr<scalar_t>();
  const scalar_t* roi_data = rois.const_data_ptr<scalar_t>();
  scalar_t* out = output.mutable_data_ptr<scalar_t>();
  const bool max_mode = p.pool_mode == PoolMode::Max;

  at::parallel_for(0, num_rois, 1, [&](int64_t begin, int64_t end) {
    std::vector<AxisTap<acc_t>> ytaps, xtaps;
    for (int64_t k = begin; k < end; ++k) {
      const scalar_t* roi = roi_data + k * 5;
      scalar_t* out_k = out + k * channels * bins;
      int32_t* argmax_k = argmax ? argmax + k * channels * bins : nullptr;
      const int64_t b = batch_index(static_cast<acc_t>(roi[0]), batch);
      const RoiBox<acc_t> box = make_roi_box<acc_t>(
          roi[1], roi[2], roi[3], roi[4], static_cast<acc_t>(p.spatial_scale), p.aligned,
          ph_count, pw_count, p.sampling_ratio);
      if (b < 0 || !box.valid) {
        std::fill(out_k, out_k + channels * bins, scalar_t(0));
        if (argmax_k) {
          std::fill(argmax_k, argmax_k + channels * bins, -1);
        }
        continue;
      }
      const int gh = box.grid_h, gw = box.grid_w;
      axis_taps(ytaps, box.start_y, box.bin_h, ph_count, gh, height);
      axis_taps(xtaps, box.start_x, box.bin_w, pw_count, gw, width);
      const acc_t inv_count = gh * gw > 0 ? acc_t(1) / static_cast<acc_t>(gh * gw) : acc_t(0);

      for (int64_t c = 0; c < channels; ++c) {
        const scalar_t* plane = in + (b * channels + c) * height * width;
        auto load = [plane](int64_t offset) { return static_cast<acc_t>(plane[offset]); };
        for (int64_t ph = 0; ph < ph_count; ++ph) {
          for (int64_t pw = 0; pw < pw_count; ++pw) {
            const AxisTap<acc_t>* ty = ytaps.data() + ph * gh;
            const AxisTap<acc_t>* tx = xtaps.data() + pw * gw;
            const int64_t o = c * bins + ph * pw_count + pw;
            if (max_mode) {
              MaxTracker<acc_t> tracker;
              for (int iy = 0; iy < gh; ++iy) {
                for (int ix = 0; ix < gw; ++ix) {
                  tracker.update(interpolate(ty[iy], tx[ix], width, load), iy * gw + ix);
                }
              }
              out_k[o] = static_cast<scalar_t>(tracker.result());
              if (argmax_k) {
                argmax_k[o] = tracker.index;
              }
            } else {
              acc_t sum = 0;
              for (int iy = 0; iy < gh; ++iy) {
                for (int ix = 0; ix < gw; ++ix) {
                  sum += interpolate(ty[iy], tx[ix], width, load);
                }
              }
              out_k[o] = static_cast<scalar_t>(sum * inv_count);
            }
          }
        }
      }
    }
  });
}

// grad_in is the accumulation buffer (acc_t), [N, C, H, W] contiguous.
template <typename scalar_t, typename acc_t>
void backward_kernel(const at::Tensor& grad_output, const at::Tensor& rois, const int32_t* argmax,
                     acc_t* grad_in, int64_t batch, int64_t channels, int64_t height,
                     int64_t width, const RoIAlignParams& p) {
  const int64_t num_rois = rois.size(0);
  const int64_t ph_count = p.pooled_height, pw_count = p.pooled_width;
  const int64_t bins = ph_count * pw_count;
  const scalar_t* grad_out = grad_output.const_data_ptr<scalar_t>();
  const scalar_t* roi_data = rois.const_data_ptr<scalar_t>();
  const bool max_mode = p.pool_mode == PoolMode::Max;

  // Enough channels per task to amortise recomputing the taps of every roi.
  at::parallel_for(0, channels, 1, [&](int64_t c_begin, int64_t c_end) {
    std::vector<AxisTap<acc_t>> ytaps, xtaps;
    for (int64_t k = 0; k < num_rois; ++k) {
      const scalar_t* roi = roi_data + k * 5;
      const int64_t b = batch_index(static_cast<acc_t>(roi[0]), batch);
      const RoiBox<acc_t> box = make_roi_box<acc_t>(
          roi[1], roi[2], roi[3], roi[4], static_cast<acc_t>(p.spatial_scale), p.aligned,
          ph_count, pw_count, p.sampling_ratio);
      const int gh = box.grid_h, gw = box.grid_w;
      if (b < 0 || gh * gw == 0) {
        continue;
      }
      axis_taps(ytaps, box.start_y, box.bin_h, ph_count, gh, height);
      axis_taps(xtaps, box.start_x, box.bin_w, pw_count, gw, width);
      const acc_t inv_count = acc_t(1) / static_cast<acc_t>(gh * gw);

      for (int64_t c = c_begin; c < c_end; ++c) {
        acc_t* plane = grad_in + (b * channels + c) * height * width;
        const scalar_t* g_kc = grad_out + (k * channels + c) * bins;
        const int32_t* a_kc = argmax ? argmax + (k * channels + c) * bins : nullptr;
        auto scatter = [plane, width](const AxisTap<acc_t>& ty, const AxisTap<acc_t>& tx, acc_t g) {
          if (!(ty.valid && tx.valid)) {
            return;
          }
          const Corners<acc_t> cr = corners(ty, tx, width);
          for (int j = 0; j < 4; ++j) {
            plane[cr.offset[j]] += g * cr.weight[j];
          }
        };
        for (int64_t ph = 0; ph < ph_count; ++ph) {
          for (int64_t pw = 0; pw < pw_count; ++pw) {
            const int64_t bin = ph * pw_count + pw;
            const acc_t g = static_cast<acc_t>(g_kc[bin]);
            const AxisTap<acc_t>* ty = ytaps.data() + ph * gh;
            const AxisTap<acc_t>* tx = xtaps.data() + pw * gw;
            if (max_mode) {
              const int s = a_kc[bin];
              if (s >= 0 && s < gh * gw) {
                scatter(ty[s / gw], tx[s % gw], g);
              }
            } else {
              const acc_t g_sample = g * inv_count;
              for (int iy = 0; iy < gh; ++iy) {
                for (int ix = 0; ix < gw; ++ix) {
                  scatter(ty[iy], tx[ix], g_sample);
                }
              }
            }
          }
        }
      }
    }
  });
}

} // namespace

std::tuple<at::Tensor, at::Tensor> roi_align_forward_cpu(
    const at::Tensor& input_, const at::Tensor& rois_, const RoIAlignParams& params,
    bool with_argmax) {
  const at::Tensor input = input_.contiguous();
  const at::Tensor rois = rois_.contiguous();
  at::Tensor output = at::empty(
      {rois.size(0), input.size(1), params.pooled_height, params.pooled_width}, input.options());
  const bool store_argmax = with_argmax && params.pool_mode == PoolMode::Max;
  at::Tensor argmax = at::empty(store_argmax ? output.sizes() : at::IntArrayRef{0},
                                input.options().dtype(at::kInt));
  if (output.numel() == 0) {
    return {output, argmax};
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::roi_align (CPU)", [&] {
    forward_kernel<scalar_t>(input, rois, output,
                             store_argmax ? argmax.mutable_data_ptr<int32_t>() : nullptr, params);
  });
  return {output, argmax};
}

at::Tensor roi_align_backward_cpu(
    const at::Tensor& grad_output_, const at::Tensor& rois_, const at::Tensor& argmax_,
    at::IntArrayRef input_shape, const RoIAlignParams& params) {
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor rois = rois_.contiguous();
  const at::Tensor argmax = argmax_.contiguous();
  const auto dtype = grad_output.scalar_type();
  // Reduced-precision gradients accumulate in float, then round once.
  const bool reduced = dtype == at::kHalf || dtype == at::kBFloat16;
  at::Tensor grad_acc = at::zeros(input_shape, grad_output.options().dtype(reduced ? at::kFloat : dtype));
  if (grad_acc.numel() > 0 && grad_output.numel() > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mmops::roi_align backward (CPU)", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      backward_kernel<scalar_t, acc_t>(
          grad_output, rois,
          params.pool_mode == PoolMode::Max ? argmax.const_data_ptr<int32_t>() : nullptr,
          grad_acc.mutable_data_ptr<acc_t>(), input_shape[0], input_shape[1], input_shape[2],
          input_shape[3], params);
    });
  }
  return reduced ? grad_acc.to(dtype) : grad_acc;
}

} // namespace kernels
} // namespace mmops

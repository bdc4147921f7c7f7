// CPU kernels of roi_align.
//
// Forward: parallel over rois, on the input made channels-last (ATen's copy;
// a channels_last input is used as it is). For each roi a
// table of its samples (four neighbour offsets and weights each) is built once
// and applied to all channels at a time (contiguous, vectorised).
// Backward: parallel over channels, so that no two threads ever add into the
// same gradient value (no atomics, deterministic); each thread walks all rois.

#include "common/layout.h"
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
void axis_taps(std::vector<AxisTap<T>>& taps, T start, T bin_size, int64_t pooled, int grid, int64_t size) {
  taps.resize(static_cast<size_t>(pooled) * grid);
  for (int64_t p = 0; p < pooled; ++p) {
    for (int i = 0; i < grid; ++i) {
      taps[p * grid + i] = axis_tap(sample_coord(start, bin_size, p, i, grid), size);
    }
  }
}

// One sample of a roi with its four neighbours resolved: applies to any channel.
template <typename T>
struct SampleTap {
  int64_t offset[4];
  T weight[4];
  int32_t index; // iy * grid_w + ix within its bin
  bool valid;    // false: outside the map, worth 0
};

// Table entries built at a time: bounds memory for huge adaptive grids.
constexpr int64_t kMaxTableEntries = int64_t(1) << 16;

// The samples of bins [bin_begin, bin_end) of one roi (bins numbered row-major),
// bin after bin; the i-th of them owns entries [bin_start[i], bin_start[i + 1]).
// With `keep_invalid` false, samples outside the map are left out (they add
// nothing to an average) and `weight_scale` (1 / samples per bin) is folded in.
template <typename T>
void build_sample_table(std::vector<SampleTap<T>>& table, std::vector<int32_t>& bin_start,
                        const std::vector<AxisTap<T>>& ytaps, const std::vector<AxisTap<T>>& xtaps, int64_t bin_begin,
                        int64_t bin_end, int64_t pw_count, int gh, int gw, int64_t width, bool keep_invalid,
                        T weight_scale) {
  table.clear();
  bin_start.assign(1, 0);
  for (int64_t bin = bin_begin; bin < bin_end; ++bin) {
    const int64_t ph = bin / pw_count, pw = bin % pw_count;
    for (int iy = 0; iy < gh; ++iy) {
      for (int ix = 0; ix < gw; ++ix) {
        const AxisTap<T>& ty = ytaps[ph * gh + iy];
        const AxisTap<T>& tx = xtaps[pw * gw + ix];
        SampleTap<T> tap{};
        tap.index = iy * gw + ix;
        tap.valid = ty.valid && tx.valid;
        if (tap.valid) {
          const Corners<T> cr = corners(ty, tx, width);
          for (int j = 0; j < 4; ++j) {
            tap.offset[j] = cr.offset[j];
            tap.weight[j] = cr.weight[j] * weight_scale;
          }
        }
        if (tap.valid || keep_invalid) {
          table.push_back(tap);
        }
      }
    }
    bin_start.push_back(static_cast<int32_t>(table.size()));
  }
}

// Pools all channels of one roi for the bins in the table, reading the image
// channels-last (`pixels` = its pixel (0, 0)): each table entry is applied to
// a contiguous run of channels, which the compiler vectorises. `bins` is the
// output's channel stride (all bins of the roi).
template <bool kMax, typename scalar_t, typename acc_t>
void pool_channels_last(const scalar_t* pixels, int64_t channels, scalar_t* out, int32_t* argmax, int64_t bins,
                        const std::vector<SampleTap<acc_t>>& table, const std::vector<int32_t>& bin_start,
                        std::vector<acc_t>& values, std::vector<MaxTracker<acc_t>>& trackers) {
  values.resize(channels);
  trackers.resize(kMax ? channels : 0);
  acc_t* __restrict__ value = values.data();
  const int64_t table_bins = static_cast<int64_t>(bin_start.size()) - 1;
  for (int64_t bin = 0; bin < table_bins; ++bin) {
    std::fill(values.begin(), values.end(), acc_t(0));
    std::fill(trackers.begin(), trackers.end(), MaxTracker<acc_t>{});
    for (int32_t s = bin_start[bin]; s < bin_start[bin + 1]; ++s) {
      const SampleTap<acc_t>& t = table[s];
      const scalar_t* __restrict__ p0 = pixels + t.offset[0] * channels;
      const scalar_t* __restrict__ p1 = pixels + t.offset[1] * channels;
      const scalar_t* __restrict__ p2 = pixels + t.offset[2] * channels;
      const scalar_t* __restrict__ p3 = pixels + t.offset[3] * channels;
      const acc_t w0 = t.weight[0], w1 = t.weight[1], w2 = t.weight[2], w3 = t.weight[3];
      if constexpr (kMax) {
        for (int64_t c = 0; c < channels; ++c) {
          const acc_t v = t.valid ? w0 * static_cast<acc_t>(p0[c]) + w1 * static_cast<acc_t>(p1[c]) +
                                        w2 * static_cast<acc_t>(p2[c]) + w3 * static_cast<acc_t>(p3[c])
                                  : acc_t(0);
          trackers[c].update(v, t.index);
        }
      } else {
        for (int64_t c = 0; c < channels; ++c) {
          value[c] += w0 * static_cast<acc_t>(p0[c]) + w1 * static_cast<acc_t>(p1[c]) + w2 * static_cast<acc_t>(p2[c]) +
                      w3 * static_cast<acc_t>(p3[c]);
        }
      }
    }
    for (int64_t c = 0; c < channels; ++c) {
      out[c * bins + bin] = static_cast<scalar_t>(kMax ? trackers[c].result() : value[c]);
      if (kMax && argmax) {
        argmax[c * bins + bin] = trackers[c].index;
      }
    }
  }
}

// Pixel data and size of each feature map.
template <typename T>
struct Levels {
  std::vector<T*> data;
  std::vector<int64_t> height, width;
};

template <typename scalar_t, typename acc_t>
RoiSource<acc_t> locate(const scalar_t* roi, int64_t batch, const RoIAlignParams& p) {
  return locate_roi<acc_t>(roi[0], roi[1], roi[2], roi[3], roi[4], batch, p.spatial_scale, p.num_levels, p.finest_scale,
                           p.aligned, p.pooled_height, p.pooled_width, p.sampling_ratio);
}

template <typename scalar_t>
void forward_kernel(const Levels<const scalar_t>& levels, int64_t batch, int64_t channels, const at::Tensor& rois,
                    at::Tensor& output, int32_t* argmax, const RoIAlignParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t num_rois = rois.size(0);
  const int64_t ph_count = p.pooled_height, pw_count = p.pooled_width;
  const int64_t bins = ph_count * pw_count;
  const scalar_t* roi_data = rois.const_data_ptr<scalar_t>();
  scalar_t* out = output.mutable_data_ptr<scalar_t>();
  const bool max_mode = p.pool_mode == PoolMode::Max;

  at::parallel_for(0, num_rois, 1, [&](int64_t begin, int64_t end) {
    std::vector<AxisTap<acc_t>> ytaps, xtaps;
    std::vector<SampleTap<acc_t>> table;
    std::vector<int32_t> bin_start;
    std::vector<acc_t> values;
    std::vector<MaxTracker<acc_t>> trackers;
    for (int64_t k = begin; k < end; ++k) {
      scalar_t* out_k = out + k * channels * bins;
      int32_t* argmax_k = argmax ? argmax + k * channels * bins : nullptr;
      const RoiSource<acc_t> src = locate<scalar_t, acc_t>(roi_data + k * 5, batch, p);
      if (src.batch < 0) {
        std::fill(out_k, out_k + channels * bins, scalar_t(0));
        if (argmax_k) {
          std::fill(argmax_k, argmax_k + channels * bins, -1);
        }
        continue;
      }
      const RoiBox<acc_t>& box = src.box;
      const int64_t height = levels.height[src.level], width = levels.width[src.level];
      const int gh = box.grid_h, gw = box.grid_w;
      axis_taps(ytaps, box.start_y, box.bin_h, ph_count, gh, height);
      axis_taps(xtaps, box.start_x, box.bin_w, pw_count, gw, width);
      const int64_t samples = static_cast<int64_t>(gh) * gw; // per bin, <= kMaxGridSide^2
      const acc_t inv_count = samples > 0 ? acc_t(1) / static_cast<acc_t>(samples) : acc_t(0);
      const scalar_t* pixels = levels.data[src.level] + src.batch * height * width * channels;
      const int64_t bins_per_pass = std::max<int64_t>(1, kMaxTableEntries / std::max<int64_t>(samples, 1));
      for (int64_t bin0 = 0; bin0 < bins; bin0 += bins_per_pass) {
        const int64_t bin1 = std::min(bins, bin0 + bins_per_pass);
        build_sample_table(table, bin_start, ytaps, xtaps, bin0, bin1, pw_count, gh, gw, width,
                           /*keep_invalid=*/max_mode, max_mode ? acc_t(1) : inv_count);
        if (max_mode) {
          pool_channels_last<true>(pixels, channels, out_k + bin0, argmax_k ? argmax_k + bin0 : nullptr, bins, table,
                                   bin_start, values, trackers);
        } else {
          pool_channels_last<false>(pixels, channels, out_k + bin0, nullptr, bins, table, bin_start, values, trackers);
        }
      }
    }
  });
}

// `grads` are the accumulation buffers (acc_t), one [N, C, H_l, W_l] per level.
template <typename scalar_t, typename acc_t>
void backward_kernel(const at::Tensor& grad_output, const at::Tensor& rois, const int32_t* argmax,
                     const Levels<acc_t>& grads, int64_t batch, int64_t channels, const RoIAlignParams& p) {
  const int64_t num_rois = rois.size(0);
  const int64_t ph_count = p.pooled_height, pw_count = p.pooled_width;
  const int64_t bins = ph_count * pw_count;
  const scalar_t* grad_out = grad_output.const_data_ptr<scalar_t>();
  const scalar_t* roi_data = rois.const_data_ptr<scalar_t>();
  const bool max_mode = p.pool_mode == PoolMode::Max;

  // Parallel over channels: no two threads add into the same value.
  at::parallel_for(0, channels, 1, [&](int64_t c_begin, int64_t c_end) {
    std::vector<AxisTap<acc_t>> ytaps, xtaps;
    for (int64_t k = 0; k < num_rois; ++k) {
      const RoiSource<acc_t> src = locate<scalar_t, acc_t>(roi_data + k * 5, batch, p);
      const RoiBox<acc_t>& box = src.box;
      const int gh = box.grid_h, gw = box.grid_w;
      const int64_t samples = static_cast<int64_t>(gh) * gw; // per bin, <= kMaxGridSide^2
      if (src.batch < 0 || samples == 0) {
        continue;
      }
      const int64_t height = grads.height[src.level], width = grads.width[src.level];
      axis_taps(ytaps, box.start_y, box.bin_h, ph_count, gh, height);
      axis_taps(xtaps, box.start_x, box.bin_w, pw_count, gw, width);
      const acc_t inv_count = acc_t(1) / static_cast<acc_t>(samples);

      for (int64_t c = c_begin; c < c_end; ++c) {
        acc_t* plane = grads.data[src.level] + (src.batch * channels + c) * height * width;
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
              if (s >= 0 && s < samples) {
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

std::tuple<at::Tensor, at::Tensor> roi_align_forward_cpu(at::TensorList features_, const at::Tensor& rois_,
                                                         const RoIAlignParams& params, bool with_argmax) {
  // Channels-last: a sample's taps are then contiguous runs of channels.
  std::vector<at::Tensor> features;
  for (const at::Tensor& f : features_) {
    features.push_back(contiguous_cpu(f, at::MemoryFormat::ChannelsLast));
  }
  const at::Tensor& first = features.front();
  const at::Tensor rois = rois_.contiguous();
  at::Tensor output =
      at::empty({rois.size(0), first.size(1), params.pooled_height, params.pooled_width}, first.options());
  const bool store_argmax = with_argmax && params.pool_mode == PoolMode::Max;
  at::Tensor argmax = at::empty(store_argmax ? output.sizes() : at::IntArrayRef{0}, first.options().dtype(at::kInt));
  if (output.numel() == 0) {
    return {output, argmax};
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, first.scalar_type(), "mmops::roi_align (CPU)", [&] {
    Levels<const scalar_t> levels;
    for (const at::Tensor& f : features) {
      levels.data.push_back(f.const_data_ptr<scalar_t>());
      levels.height.push_back(f.size(2));
      levels.width.push_back(f.size(3));
    }
    forward_kernel<scalar_t>(levels, first.size(0), first.size(1), rois, output,
                             store_argmax ? argmax.mutable_data_ptr<int32_t>() : nullptr, params);
  });
  return {output, argmax};
}

std::vector<at::Tensor> roi_align_backward_cpu(const at::Tensor& grad_output_, const at::Tensor& rois_,
                                               const at::Tensor& argmax_,
                                               const std::vector<std::vector<int64_t>>& feature_shapes,
                                               const RoIAlignParams& params) {
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor rois = rois_.contiguous();
  const at::Tensor argmax = argmax_.contiguous();
  const auto dtype = grad_output.scalar_type();
  // Reduced-precision gradients accumulate in float, then round once.
  const bool reduced = dtype == at::kHalf || dtype == at::kBFloat16;
  std::vector<at::Tensor> grads;
  for (const auto& shape : feature_shapes) {
    grads.push_back(at::zeros(shape, grad_output.options().dtype(reduced ? at::kFloat : dtype)));
  }
  const int64_t batch = feature_shapes.front()[0], channels = feature_shapes.front()[1];
  if (grad_output.numel() > 0 && batch * channels > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mmops::roi_align backward (CPU)", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      Levels<acc_t> levels;
      for (at::Tensor& g : grads) {
        levels.data.push_back(g.mutable_data_ptr<acc_t>());
        levels.height.push_back(g.size(2));
        levels.width.push_back(g.size(3));
      }
      backward_kernel<scalar_t, acc_t>(grad_output, rois,
                                       params.pool_mode == PoolMode::Max ? argmax.const_data_ptr<int32_t>() : nullptr,
                                       levels, batch, channels, params);
    });
  }
  if (reduced) {
    for (at::Tensor& g : grads) {
      g = g.to(dtype);
    }
  }
  return grads;
}

} // namespace kernels
} // namespace mmops

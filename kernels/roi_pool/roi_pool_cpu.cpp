// CPU kernels of roi_pool.
//
// Forward: parallel over rois; the bins of a roi are computed once and applied
// to every channel, over a channels-last copy of the input when the rois cover
// the map (vectorised over channels), else plane by plane. Backward: parallel over channels, so that no two
// threads add into the same gradient value (no atomics, deterministic).
// argmax is stored channels-last ([K, PH, PW, C] in memory), as on CUDA.

#include "common/layout.h"
#include "roi_pool/roi_pool_kernels.h"
#include "roi_pool/roi_pool_math.h"

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

using namespace roi_pool_math;

// Image of roi k, or -1 when it pools zeros; fills the bins' ranges.
template <typename scalar_t, typename acc_t>
int64_t locate(const scalar_t* roi, int64_t batch, int64_t height, int64_t width, const RoIPoolParams& p,
               std::vector<Range>& hr, std::vector<Range>& wr) {
  const PoolBox<acc_t> box = make_pool_box<acc_t>(static_cast<acc_t>(roi[1]), static_cast<acc_t>(roi[2]),
                                                  static_cast<acc_t>(roi[3]), static_cast<acc_t>(roi[4]),
                                                  static_cast<acc_t>(p.spatial_scale), p.pooled_height, p.pooled_width);
  const int64_t b = box.valid ? batch_index(static_cast<acc_t>(roi[0]), batch) : -1;
  if (b < 0) {
    return -1;
  }
  hr.resize(p.pooled_height);
  wr.resize(p.pooled_width);
  for (int64_t ph = 0; ph < p.pooled_height; ++ph) {
    hr[ph] = bin_range(box.start_h, box.bin_h, ph, height);
  }
  for (int64_t pw = 0; pw < p.pooled_width; ++pw) {
    wr[pw] = bin_range(box.start_w, box.bin_w, pw, width);
  }
  return b;
}

// A roi that pools nothing: zeros, argmax -1.
template <typename scalar_t>
void pool_zeros(scalar_t* out, int32_t* argmax, int64_t count) {
  std::fill(out, out + count, scalar_t(0));
  if (argmax) {
    std::fill(argmax, argmax + count, -1);
  }
}

template <typename scalar_t>
void forward_kernel(const at::Tensor& input, const at::Tensor& rois, at::Tensor& output, int32_t* argmax,
                    const RoIPoolParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t batch = input.size(0), channels = input.size(1);
  const int64_t height = input.size(2), width = input.size(3);
  const int64_t plane = height * width;
  const int64_t bins = p.pooled_height * p.pooled_width;
  const scalar_t* in = input.const_data_ptr<scalar_t>();
  const scalar_t* roi_data = rois.const_data_ptr<scalar_t>();
  scalar_t* out = output.mutable_data_ptr<scalar_t>();

  at::parallel_for(0, rois.size(0), 1, [&](int64_t begin, int64_t end) {
    std::vector<Range> hr, wr;
    for (int64_t k = begin; k < end; ++k) {
      scalar_t* out_k = out + k * channels * bins;
      int32_t* arg_k = argmax ? argmax + k * channels * bins : nullptr; // [bins, C]
      const int64_t b = locate<scalar_t, acc_t>(roi_data + k * 5, batch, height, width, p, hr, wr);
      if (b < 0) {
        pool_zeros(out_k, arg_k, channels * bins);
        continue;
      }
      for (int64_t c = 0; c < channels; ++c) {
        const scalar_t* src = in + (b * channels + c) * plane;
        for (int64_t ph = 0; ph < p.pooled_height; ++ph) {
          for (int64_t pw = 0; pw < p.pooled_width; ++pw) {
            // MaxTracker's rule (first maximum wins, a NaN wins and sticks) with a
            // branch: after the first pixels a new maximum is rare, so it predicts well.
            const int64_t h0 = hr[ph].begin, h1 = hr[ph].end;
            const int64_t w0 = wr[pw].begin, w1 = wr[pw].end;
            acc_t best = acc_t(0);
            int32_t index = -1;
            if (h0 < h1 && w0 < w1) {
              best = static_cast<acc_t>(src[h0 * width + w0]);
              index = static_cast<int32_t>(h0 * width + w0);
              for (int64_t h = h0; h < h1; ++h) {
                const scalar_t* row = src + h * width;
                for (int64_t w = (h == h0 ? w0 + 1 : w0); w < w1; ++w) {
                  const acc_t v = static_cast<acc_t>(row[w]);
                  if (v > best || (v != v && best == best)) {
                    best = v;
                    index = static_cast<int32_t>(h * width + w);
                  }
                }
              }
            }
            const int64_t bin = ph * p.pooled_width + pw;
            out_k[c * bins + bin] = static_cast<scalar_t>(best);
            if (arg_k) {
              arg_k[bin * channels + c] = index;
            }
          }
        }
      }
    }
  });
}

// One pixel's channel vector into the running maxima of a bin, every channel
// an independent lane (vectorised): MaxTracker's rule, branch-free.
template <typename scalar_t, typename acc_t>
inline void max_step(const scalar_t* __restrict__ pixel, acc_t* __restrict__ best, int32_t* __restrict__ index,
                     int32_t at, int64_t channels) {
  for (int64_t c = 0; c < channels; ++c) {
    const acc_t v = static_cast<acc_t>(pixel[c]);
    const acc_t b = best[c];
    const bool take = (v > b) | ((v != v) & (b == b));
    best[c] = take ? v : b;
    index[c] = take ? at : index[c];
  }
}

// The forward over a channels-last input ([N, H, W, C] memory): a bin's pixels
// are contiguous channel vectors, so the max runs over all channels at once
// and argmax ([bins, C] per roi) is written in order.
template <typename scalar_t>
void forward_channels_last_kernel(const at::Tensor& input, const at::Tensor& rois, at::Tensor& output, int32_t* argmax,
                                  const RoIPoolParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t batch = input.size(0), channels = input.size(1);
  const int64_t height = input.size(2), width = input.size(3);
  const int64_t bins = p.pooled_height * p.pooled_width;
  const scalar_t* in = input.const_data_ptr<scalar_t>();
  const scalar_t* roi_data = rois.const_data_ptr<scalar_t>();
  scalar_t* out = output.mutable_data_ptr<scalar_t>();

  at::parallel_for(0, rois.size(0), 1, [&](int64_t begin, int64_t end) {
    std::vector<Range> hr, wr;
    std::vector<acc_t> best(channels);
    std::vector<int32_t> index(channels);
    for (int64_t k = begin; k < end; ++k) {
      scalar_t* out_k = out + k * channels * bins;
      int32_t* arg_k = argmax ? argmax + k * channels * bins : nullptr;
      const int64_t b = locate<scalar_t, acc_t>(roi_data + k * 5, batch, height, width, p, hr, wr);
      if (b < 0) {
        pool_zeros(out_k, arg_k, channels * bins);
        continue;
      }
      const scalar_t* image = in + b * height * width * channels;
      for (int64_t ph = 0; ph < p.pooled_height; ++ph) {
        for (int64_t pw = 0; pw < p.pooled_width; ++pw) {
          const int64_t h0 = hr[ph].begin, h1 = hr[ph].end;
          const int64_t w0 = wr[pw].begin, w1 = wr[pw].end;
          if (h0 < h1 && w0 < w1) {
            const scalar_t* first = image + (h0 * width + w0) * channels;
            for (int64_t c = 0; c < channels; ++c) {
              best[c] = static_cast<acc_t>(first[c]);
            }
            std::fill(index.begin(), index.end(), static_cast<int32_t>(h0 * width + w0));
            for (int64_t h = h0; h < h1; ++h) {
              for (int64_t w = (h == h0 ? w0 + 1 : w0); w < w1; ++w) {
                max_step(image + (h * width + w) * channels, best.data(), index.data(),
                         static_cast<int32_t>(h * width + w), channels);
              }
            }
          } else {
            std::fill(best.begin(), best.end(), acc_t(0));
            std::fill(index.begin(), index.end(), -1);
          }
          const int64_t bin = ph * p.pooled_width + pw;
          for (int64_t c = 0; c < channels; ++c) {
            out_k[c * bins + bin] = static_cast<scalar_t>(best[c]);
          }
          if (arg_k) {
            std::copy(index.begin(), index.end(), arg_k + bin * channels);
          }
        }
      }
    }
  });
}

// Whether the rois read at least as many input values as the map holds: then
// one channels-last copy of an NCHW input costs less than scanning the rois'
// planes channel by channel (strided, one lane).
template <typename scalar_t>
bool rois_cover_the_map(const at::Tensor& input, const at::Tensor& rois, const RoIPoolParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t plane = input.size(2) * input.size(3);
  const scalar_t* roi_data = rois.const_data_ptr<scalar_t>();
  std::vector<Range> hr, wr;
  int64_t pixels = 0;
  for (int64_t k = 0; k < rois.size(0) && pixels < input.size(0) * plane; ++k) {
    if (locate<scalar_t, acc_t>(roi_data + k * 5, input.size(0), input.size(2), input.size(3), p, hr, wr) >= 0) {
      pixels += (hr.back().end - hr.front().begin) * (wr.back().end - wr.front().begin);
    }
  }
  return pixels >= input.size(0) * plane;
}

template <typename scalar_t, typename acc_t>
void backward_kernel(const at::Tensor& grad_output, const at::Tensor& rois, const int32_t* argmax, acc_t* grad,
                     int64_t batch, int64_t channels, int64_t plane) {
  const int64_t num_rois = rois.size(0);
  const int64_t bins = grad_output.size(2) * grad_output.size(3);
  const scalar_t* go = grad_output.const_data_ptr<scalar_t>();
  const scalar_t* roi_data = rois.const_data_ptr<scalar_t>();
  // Parallel over channels: no two threads add into the same value.
  at::parallel_for(0, channels, 1, [&](int64_t c_begin, int64_t c_end) {
    for (int64_t k = 0; k < num_rois; ++k) {
      const int64_t b = batch_index(static_cast<acc_t>(roi_data[k * 5]), batch);
      if (b < 0) {
        continue; // pooled zeros (argmax is -1 everywhere anyway)
      }
      for (int64_t c = c_begin; c < c_end; ++c) {
        acc_t* g = grad + (b * channels + c) * plane;
        const int64_t base = (k * channels + c) * bins;
        const int32_t* arg = argmax + k * bins * channels + c; // [bins, C] of roi k
        for (int64_t i = 0; i < bins; ++i) {
          const int32_t a = arg[i * channels];
          if (a >= 0 && a < plane) {
            g[a] += static_cast<acc_t>(go[base + i]);
          }
        }
      }
    }
  });
}

} // namespace

std::tuple<at::Tensor, at::Tensor> roi_pool_forward_cpu(const at::Tensor& input_, const at::Tensor& rois_,
                                                        const RoIPoolParams& params, bool with_argmax) {
  const at::Tensor rois = rois_.contiguous();
  at::Tensor output =
      at::empty({rois.size(0), input_.size(1), params.pooled_height, params.pooled_width}, input_.options());
  at::Tensor argmax = with_argmax
                          ? at::empty(output.sizes(), input_.options().dtype(at::kInt), at::MemoryFormat::ChannelsLast)
                          : at::empty({0}, input_.options().dtype(at::kInt));
  if (output.numel() == 0) {
    return {output, argmax};
  }
  int32_t* arg = with_argmax ? argmax.mutable_data_ptr<int32_t>() : nullptr;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input_.scalar_type(), "mmops::roi_pool (CPU)", [&] {
    // channels-last: a channels_last input as it is, an NCHW one copied when
    // the rois cover the map; NCHW otherwise (a few small rois on a big map).
    if (input_.is_contiguous(at::MemoryFormat::ChannelsLast) || rois_cover_the_map<scalar_t>(input_, rois, params)) {
      const at::Tensor input = contiguous_cpu(input_, at::MemoryFormat::ChannelsLast);
      forward_channels_last_kernel<scalar_t>(input, rois, output, arg, params);
    } else {
      forward_kernel<scalar_t>(input_.contiguous(), rois, output, arg, params);
    }
  });
  return {output, argmax};
}

at::Tensor roi_pool_backward_cpu(const at::Tensor& grad_output_, const at::Tensor& rois_, const at::Tensor& argmax_,
                                 const std::vector<int64_t>& input_shape, const RoIPoolParams& params) {
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor rois = rois_.contiguous();
  const at::Tensor argmax = contiguous_cpu(argmax_, at::MemoryFormat::ChannelsLast);
  const auto dtype = grad_output.scalar_type();
  // Reduced-precision gradients accumulate in float, then round once.
  const bool reduced = dtype == at::kHalf || dtype == at::kBFloat16;
  at::Tensor grad = at::zeros(input_shape, grad_output.options().dtype(reduced ? at::kFloat : dtype));
  const int64_t batch = input_shape[0], channels = input_shape[1];
  const int64_t plane = input_shape[2] * input_shape[3];
  if (grad_output.numel() > 0 && grad.numel() > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mmops::roi_pool backward (CPU)", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      backward_kernel<scalar_t, acc_t>(grad_output, rois, argmax.const_data_ptr<int32_t>(),
                                       grad.mutable_data_ptr<acc_t>(), batch, channels, plane);
    });
  }
  return reduced ? grad.to(dtype) : grad;
}

} // namespace kernels
} // namespace mmops

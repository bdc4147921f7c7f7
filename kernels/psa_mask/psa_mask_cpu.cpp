// CPU kernels of psa_mask: both directions are gathers (psa_mask_math.h),
// parallel over output planes; every value has one writer. A plane's own
// coordinates are split once per plane (the *_split rules), so no element
// pays a division. The forward fills each output row with zeros and gathers
// only its columns inside the mask window (a 9x9 mask covers 9 of 24 columns
// of 9 of 24 rows).

#include "psa_mask/psa_mask_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>

namespace mmops {
namespace kernels {

using namespace psa_mask_math;

namespace {

// The columns c of an output row whose j (source_of_split) lies inside the
// mask: one run [first, last], clipped to the map (empty when first > last).
struct Columns {
  int64_t first, last;
};

Columns window_columns(bool collect, int64_t ax, int64_t width, int64_t mask_w) {
  const int64_t half = (mask_w - 1) / 2;
  // collect: j = ax - c + half; distribute: j = c - ax + half; 0 <= j < mask_w
  const int64_t first = collect ? ax + half - (mask_w - 1) : ax - half;
  return {std::max<int64_t>(first, 0), std::min<int64_t>(first + mask_w - 1, width - 1)};
}

} // namespace

at::Tensor psa_mask_forward_cpu(const at::Tensor& input, const PsaMaskParams& p) {
  const at::Tensor in = input.contiguous();
  const int64_t plane = p.height * p.width;
  at::Tensor out = at::empty({p.batch, plane, p.height, p.width}, in.options());
  if (out.numel() == 0) {
    return out;
  }
  const bool collect = p.type == PsaType::Collect;
  const int64_t channels = p.mask_h * p.mask_w;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, in.scalar_type(), "mmops::psa_mask (CPU)", [&] {
    const scalar_t* src = in.const_data_ptr<scalar_t>();
    scalar_t* dst = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, p.batch * plane, 16, [&](int64_t begin, int64_t end) {
      for (int64_t na = begin; na < end; ++na) {
        const int64_t n = na / plane, a = na - n * plane;
        const int64_t ay = a / p.width, ax = a - ay * p.width;
        const scalar_t* image = src + n * channels * plane;
        const Columns cols = window_columns(collect, ax, p.width, p.mask_w);
        for (int64_t b = 0; b < p.height; ++b) {
          scalar_t* row = dst + na * plane + b * p.width;
          std::fill(row, row + p.width, scalar_t(0));
          for (int64_t c = cols.first; c <= cols.last; ++c) {
            int64_t pixel = 0;
            const int64_t k = source_of_split(ay, ax, b, c, p.width, p.mask_h, p.mask_w, collect, &pixel);
            if (k < 0) {
              break; // the row's i is outside the mask: every column is
            }
            row[c] = image[k * plane + pixel];
          }
        }
      }
    });
  });
  return out;
}

at::Tensor psa_mask_backward_cpu(const at::Tensor& grad_output, const PsaMaskParams& p) {
  const at::Tensor go = grad_output.contiguous();
  const int64_t plane = p.height * p.width;
  const int64_t channels = p.mask_h * p.mask_w;
  at::Tensor grad = at::empty({p.batch, channels, p.height, p.width}, go.options());
  if (grad.numel() == 0) {
    return grad;
  }
  const bool collect = p.type == PsaType::Collect;
  const int64_t half_h = (p.mask_h - 1) / 2, half_w = (p.mask_w - 1) / 2;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, go.scalar_type(), "mmops::psa_mask backward (CPU)", [&] {
    const scalar_t* g = go.const_data_ptr<scalar_t>();
    scalar_t* dst = grad.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, p.batch * channels, 16, [&](int64_t begin, int64_t end) {
      for (int64_t nk = begin; nk < end; ++nk) {
        const int64_t n = nk / channels, k = nk - n * channels;
        const int64_t i = k / p.mask_w, j = k - i * p.mask_w;
        const scalar_t* image = g + n * plane * plane;
        for (int64_t h = 0; h < p.height; ++h) {
          for (int64_t w = 0; w < p.width; ++w) {
            const int64_t t = target_of_split(i, j, h, w, p.height, p.width, half_h, half_w, collect);
            dst[nk * plane + h * p.width + w] = t < 0 ? scalar_t(0) : image[t];
          }
        }
      }
    });
  });
  return grad;
}

} // namespace kernels
} // namespace mmops

// CPU kernels of psa_mask: both directions are gathers (psa_mask_math.h),
// parallel over output planes; every value has one writer.

#include "psa_mask/psa_mask_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

namespace mmops {
namespace kernels {

using namespace psa_mask_math;

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
        const scalar_t* image = src + n * channels * plane;
        scalar_t* row = dst + na * plane;
        for (int64_t b = 0; b < p.height; ++b) {
          for (int64_t c = 0; c < p.width; ++c) {
            int64_t pixel = 0;
            const int64_t k = source_of(a, b, c, p.height, p.width, p.mask_h, p.mask_w, collect, &pixel);
            row[b * p.width + c] = k < 0 ? scalar_t(0) : image[k * plane + pixel];
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
        const scalar_t* image = g + n * plane * plane;
        for (int64_t h = 0; h < p.height; ++h) {
          for (int64_t w = 0; w < p.width; ++w) {
            const int64_t t = target_of(k, h, w, p.height, p.width, p.mask_w, half_h, half_w, collect);
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

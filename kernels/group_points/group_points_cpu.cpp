// CPU kernels of gather_points / group_points: at::parallel_for over the
// (batch, channel) rows. The backward adds a row's gradients in increasing k
// into that row only (no two threads share a value: deterministic).

#include "group_points/group_points_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>

namespace mmops {
namespace kernels {

at::Tensor gather_points_forward_cpu(const at::Tensor& features_, const at::Tensor& indices_) {
  const at::Tensor features = features_.contiguous();
  const at::Tensor indices = indices_.contiguous();
  const int64_t batch = features.size(0), channels = features.size(1), n = features.size(2);
  const int64_t k_count = indices.size(1);
  at::Tensor out = at::empty({batch, channels, k_count}, features.options());
  if (out.numel() == 0) {
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, features.scalar_type(), "mmops::gather_points (CPU)", [&] {
    const scalar_t* f = features.const_data_ptr<scalar_t>();
    const int32_t* idx = indices.const_data_ptr<int32_t>();
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(k_count, 1));
    at::parallel_for(0, batch * channels, grain, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int32_t* ib = idx + (row / channels) * k_count;
        const scalar_t* src = f + row * n;
        scalar_t* dst = o + row * k_count;
        for (int64_t k = 0; k < k_count; ++k) {
          const int32_t i = ib[k];
          dst[k] = (i >= 0 && i < n) ? src[i] : scalar_t(0);
        }
      }
    });
  });
  return out;
}

at::Tensor gather_points_backward_cpu(const at::Tensor& grad_output_, const at::Tensor& indices_, int64_t n) {
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor indices = indices_.contiguous();
  const int64_t batch = grad_output.size(0), channels = grad_output.size(1);
  const int64_t k_count = indices.size(1);
  const auto dtype = grad_output.scalar_type();
  const bool reduced = dtype == at::kHalf || dtype == at::kBFloat16; // accumulate in float, round once
  at::Tensor grad = at::zeros({batch, channels, n}, grad_output.options().dtype(reduced ? at::kFloat : dtype));
  if (grad.numel() == 0 || k_count == 0) {
    return reduced ? grad.to(dtype) : grad;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mmops::gather_points backward (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* go = grad_output.const_data_ptr<scalar_t>();
    const int32_t* idx = indices.const_data_ptr<int32_t>();
    acc_t* g = grad.mutable_data_ptr<acc_t>();
    const int64_t grain = std::max<int64_t>(1, 32768 / k_count);
    at::parallel_for(0, batch * channels, grain, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int32_t* ib = idx + (row / channels) * k_count;
        const scalar_t* src = go + row * k_count;
        acc_t* dst = g + row * n;
        for (int64_t k = 0; k < k_count; ++k) {
          const int32_t i = ib[k];
          if (i >= 0 && i < n) {
            dst[i] += static_cast<acc_t>(src[k]);
          }
        }
      }
    });
  });
  return reduced ? grad.to(dtype) : grad;
}

} // namespace kernels
} // namespace mmops

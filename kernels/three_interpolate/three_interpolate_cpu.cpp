// CPU kernels of three_interpolate: at::parallel_for over (batch, channel)
// rows (forward, grad_features) or over batches (grad_weight); sums in the
// order the CUDA kernels use.

#include "three_interpolate/three_interpolate_kernels.h"
#include "three_interpolate/three_interpolate_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <vector>

namespace mmops {
namespace kernels {

using three_interpolate_math::valid_index;

at::Tensor three_interpolate_forward_cpu(const at::Tensor& features, const at::Tensor& indices,
                                         const at::Tensor& weight) {
  const at::Tensor f = features.contiguous();
  const at::Tensor idx = indices.contiguous();
  const at::Tensor w = weight.contiguous();
  const int64_t b = f.size(0), c = f.size(1), m = f.size(2), n = idx.size(1);
  at::Tensor out = at::empty({b, c, n}, f.options());
  if (out.numel() == 0) {
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, f.scalar_type(), "mmops::three_interpolate (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* fp = f.const_data_ptr<scalar_t>();
    const int32_t* ip = idx.const_data_ptr<int32_t>();
    const scalar_t* wp = w.const_data_ptr<scalar_t>();
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, b * c, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t bi = row / c;
        for (int64_t t = 0; t < n; ++t) {
          const int64_t e = (bi * n + t) * 3;
          o[row * n + t] =
              static_cast<scalar_t>(three_interpolate_math::interpolate3<acc_t>(fp + row * m, m, ip + e, wp + e));
        }
      }
    });
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor> three_interpolate_backward_cpu(const at::Tensor& grad_output,
                                                                  const at::Tensor& features, const at::Tensor& indices,
                                                                  const at::Tensor& weight) {
  const at::Tensor g = grad_output.contiguous();
  const at::Tensor f = features.contiguous();
  const at::Tensor idx = indices.contiguous();
  const at::Tensor w = weight.contiguous();
  const int64_t b = f.size(0), c = f.size(1), m = f.size(2), n = idx.size(1);
  at::Tensor grad_features = at::empty({b, c, m}, f.options());
  at::Tensor grad_weight = at::empty({b, n, 3}, w.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, f.scalar_type(), "mmops::three_interpolate (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* gp = g.const_data_ptr<scalar_t>();
    const scalar_t* fp = f.const_data_ptr<scalar_t>();
    const int32_t* ip = idx.const_data_ptr<int32_t>();
    const scalar_t* wp = w.const_data_ptr<scalar_t>();
    scalar_t* gf = grad_features.mutable_data_ptr<scalar_t>();
    scalar_t* gw = grad_weight.mutable_data_ptr<scalar_t>();
    // grad_features[b, c, :]: each row sums its targets in order (n, then j)
    at::parallel_for(0, b * c, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](int64_t begin, int64_t end) {
      std::vector<acc_t> acc(static_cast<size_t>(m));
      for (int64_t row = begin; row < end; ++row) {
        std::fill(acc.begin(), acc.end(), acc_t(0));
        const int64_t bi = row / c;
        for (int64_t e = bi * n * 3; e < (bi + 1) * n * 3; ++e) {
          if (valid_index(ip[e], m)) {
            const acc_t go = static_cast<acc_t>(gp[row * n + (e / 3) % n]);
            acc[ip[e]] += host_device_math::mul_rn(go, static_cast<acc_t>(wp[e]));
          }
        }
        std::copy(acc.begin(), acc.end(), gf + row * m);
      }
    });
    // grad_weight[b, t, j] = sum over channels (ascending) of grad_output * feature
    at::parallel_for(0, b * n, std::max<int64_t>(1, 4096 / std::max<int64_t>(c, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t bt = begin; bt < end; ++bt) {
        const int64_t bi = bt / n, t = bt % n;
        acc_t acc[3] = {0, 0, 0};
        for (int64_t ch = 0; ch < c; ++ch) {
          const int64_t row = bi * c + ch;
          const acc_t go = static_cast<acc_t>(gp[row * n + t]);
          for (int j = 0; j < 3; ++j) {
            const int32_t k = ip[bt * 3 + j];
            if (valid_index(k, m)) {
              acc[j] += host_device_math::mul_rn(go, static_cast<acc_t>(fp[row * m + k]));
            }
          }
        }
        for (int j = 0; j < 3; ++j) {
          gw[bt * 3 + j] = static_cast<scalar_t>(acc[j]);
        }
      }
    });
  });
  return {grad_features, grad_weight};
}

} // namespace kernels
} // namespace mmops

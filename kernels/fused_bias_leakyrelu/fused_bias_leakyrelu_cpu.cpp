// CPU kernels of fused_bias_leakyrelu (fused_bias_leakyrelu_math.h): forward
// parallel over (image, channel) rows of `inner` contiguous values, one bias
// per row; backward elementwise over contiguous grad_output / output. Each
// value is computed alone: the result does not depend on the thread count.

#include "fused_bias_leakyrelu/fused_bias_leakyrelu_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>

namespace mmops {
namespace kernels {
namespace {

using namespace fused_bias_leakyrelu_math;

constexpr int64_t kGrain = 32768; // values per task

} // namespace

at::Tensor fused_bias_leakyrelu_forward_cpu(const at::Tensor& input_, const at::Tensor& bias_,
                                            const FusedBiasLeakyReLUParams& p) {
  const at::Tensor input = input_.contiguous();
  const at::Tensor bias = bias_.contiguous();
  at::Tensor output = at::empty(input.sizes(), input.options());
  if (output.numel() == 0) {
    return output;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::fused_bias_leakyrelu (CPU)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* in = input.const_data_ptr<scalar_t>();
        const scalar_t* b = bias.const_data_ptr<scalar_t>();
        scalar_t* out = output.mutable_data_ptr<scalar_t>();
        const acc_t slope = static_cast<acc_t>(p.negative_slope);
        const acc_t scale = static_cast<acc_t>(p.scale);
        const int64_t rows = input.numel() / p.inner;
        const int64_t grain = std::max<int64_t>(1, kGrain / p.inner);
        at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) {
            const acc_t bc = static_cast<acc_t>(b[r % p.channels]);
            const scalar_t* x = in + r * p.inner;
            scalar_t* y = out + r * p.inner;
            for (int64_t i = 0; i < p.inner; ++i) {
              y[i] = static_cast<scalar_t>(activate<acc_t>(static_cast<acc_t>(x[i]), bc, slope, scale));
            }
          }
        });
      });
  return output;
}

at::Tensor fused_bias_leakyrelu_backward_cpu(const at::Tensor& grad_output_, const at::Tensor& output_,
                                             const FusedBiasLeakyReLUParams& p) {
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor output = output_.contiguous();
  at::Tensor grad_input = at::empty(grad_output.sizes(), grad_output.options());
  if (grad_input.numel() == 0) {
    return grad_input;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad_output.scalar_type(), "mmops::fused_bias_leakyrelu backward (CPU)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* g = grad_output.const_data_ptr<scalar_t>();
        const scalar_t* o = output.const_data_ptr<scalar_t>();
        scalar_t* gi = grad_input.mutable_data_ptr<scalar_t>();
        const acc_t slope = static_cast<acc_t>(p.negative_slope);
        const acc_t scale = static_cast<acc_t>(p.scale);
        at::parallel_for(0, grad_input.numel(), kGrain, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            gi[i] = static_cast<scalar_t>(
                gradient<acc_t>(static_cast<acc_t>(g[i]), static_cast<acc_t>(o[i]), slope, scale));
          }
        });
      });
  return grad_input;
}

} // namespace kernels
} // namespace mmops

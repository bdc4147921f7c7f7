// CPU kernels of bias_act (bias_act_math.h): elementwise over the storage of
// dense tensors (bias_act_kernels.h), parallel over chunks of values; within a
// chunk, runs of `step` values share one bias (one division per chunk). Each
// value is computed alone: the result does not depend on the thread count.

#include "bias_act/bias_act_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>

namespace mmops {
namespace kernels {
namespace {

using namespace bias_act_math;

constexpr int64_t kGrain = 32768; // values per task

// Calls body(i, n, c) for the runs [i, i + n) of [begin, end) in which every
// value has bias index c = (i / step) % channels.
template <typename Body>
void for_each_run(int64_t begin, int64_t end, int64_t step, int64_t channels, Body&& body) {
  const int64_t q = begin / step;
  int64_t c = q % channels;
  int64_t r = begin - q * step;
  for (int64_t i = begin; i < end;) {
    const int64_t n = std::min(step - r, end - i);
    body(i, n, c);
    i += n;
    r = 0;
    c = c + 1 == channels ? 0 : c + 1;
  }
}

// The bias layout of a call: step and C, or one run of everything without a bias.
struct BiasLayout {
  int64_t step;
  int64_t channels;
};

BiasLayout bias_layout(const at::Tensor& dense, const std::optional<at::Tensor>& bias, int64_t dim) {
  if (!bias.has_value()) {
    return {std::max<int64_t>(dense.numel(), 1), 1};
  }
  return {bias_step(dense, dim), std::max<int64_t>(dense.size(dim), 1)};
}

} // namespace

at::Tensor bias_act_forward_cpu(const at::Tensor& input_, const std::optional<at::Tensor>& bias_,
                                const BiasActParams& p) {
  const at::MemoryFormat format = input_.suggest_memory_format();
  const at::Tensor input = input_.contiguous(format);
  const std::optional<at::Tensor> bias =
      bias_.has_value() ? std::optional<at::Tensor>(bias_->contiguous()) : std::nullopt;
  at::Tensor output = at::empty(input.sizes(), input.options().memory_format(format));
  if (output.numel() == 0) {
    return output;
  }
  const BiasLayout layout = bias_layout(input, bias, p.dim);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::bias_act (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* x = input.const_data_ptr<scalar_t>();
    const scalar_t* b = bias.has_value() ? bias->const_data_ptr<scalar_t>() : nullptr;
    scalar_t* y = output.mutable_data_ptr<scalar_t>();
    const acc_t alpha = static_cast<acc_t>(p.alpha);
    const acc_t gain = static_cast<acc_t>(p.gain);
    const acc_t clamp = static_cast<acc_t>(p.clamp);
    with_act(p.act, [&](auto act) {
      constexpr BiasAct A = decltype(act)::value;
      at::parallel_for(0, output.numel(), kGrain, [&](int64_t begin, int64_t end) {
        for_each_run(begin, end, layout.step, layout.channels, [&](int64_t i0, int64_t n, int64_t c) {
          const acc_t bc = b != nullptr ? static_cast<acc_t>(b[c]) : acc_t(0);
          for (int64_t i = i0; i < i0 + n; ++i) {
            y[i] = static_cast<scalar_t>(forward_value<A, acc_t>(static_cast<acc_t>(x[i]), bc, alpha, gain, clamp));
          }
        });
      });
    });
  });
  return output;
}

at::Tensor bias_act_backward_cpu(const at::Tensor& grad_output_, const std::optional<at::Tensor>& input_,
                                 const std::optional<at::Tensor>& bias_, const std::optional<at::Tensor>& output_,
                                 const BiasActParams& p) {
  const at::MemoryFormat format = backward_memory_format(grad_output_, input_, output_);
  const at::Tensor grad_output = grad_output_.contiguous(format);
  // What the act reads (the validation made sure it is there); the rest stays unread.
  const bool read_x = uses_x(p.act);
  const bool read_y = uses_y(p.act) || (p.act == BiasAct::Linear && p.clamp >= 0);
  const at::Tensor input = read_x ? input_->contiguous(format) : at::Tensor();
  const std::optional<at::Tensor> bias =
      read_x && bias_.has_value() ? std::optional<at::Tensor>(bias_->contiguous()) : std::nullopt;
  const at::Tensor output = read_y ? output_->contiguous(format) : at::Tensor();
  at::Tensor grad_input = at::empty(grad_output.sizes(), grad_output.options().memory_format(format));
  if (grad_input.numel() == 0) {
    return grad_input;
  }
  const BiasLayout layout = bias_layout(grad_output, bias, p.dim);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad_output.scalar_type(), "mmops::bias_act backward (CPU)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* g = grad_output.const_data_ptr<scalar_t>();
        const scalar_t* x = read_x ? input.const_data_ptr<scalar_t>() : nullptr;
        const scalar_t* b = bias.has_value() ? bias->const_data_ptr<scalar_t>() : nullptr;
        const scalar_t* y = read_y ? output.const_data_ptr<scalar_t>() : nullptr;
        scalar_t* gi = grad_input.mutable_data_ptr<scalar_t>();
        const acc_t alpha = static_cast<acc_t>(p.alpha);
        const acc_t gain = static_cast<acc_t>(p.gain);
        const acc_t clamp = static_cast<acc_t>(p.clamp);
        const acc_t clamp_y = static_cast<acc_t>(static_cast<scalar_t>(p.clamp)); // as the output stores it
        const auto run = [&](auto act, auto order) {
          constexpr BiasAct A = decltype(act)::value;
          constexpr int O = decltype(order)::value;
          at::parallel_for(0, grad_input.numel(), kGrain, [&](int64_t begin, int64_t end) {
            for_each_run(begin, end, layout.step, layout.channels, [&](int64_t i0, int64_t n, int64_t c) {
              const acc_t bc = b != nullptr ? static_cast<acc_t>(b[c]) : acc_t(0);
              for (int64_t i = i0; i < i0 + n; ++i) {
                const acc_t xi = x != nullptr ? static_cast<acc_t>(x[i]) : acc_t(0);
                const acc_t yi = y != nullptr ? static_cast<acc_t>(y[i]) : acc_t(0);
                gi[i] = static_cast<scalar_t>(
                    backward_value<A, O, acc_t>(static_cast<acc_t>(g[i]), xi, bc, yi, alpha, gain, clamp, clamp_y));
              }
            });
          });
        };
        with_act(p.act, [&](auto act) {
          p.order == 1 ? run(act, std::integral_constant<int, 1>{}) : run(act, std::integral_constant<int, 2>{});
        });
      });
  return grad_input;
}

} // namespace kernels
} // namespace mmops

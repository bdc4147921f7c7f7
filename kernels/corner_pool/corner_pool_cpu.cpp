// CPU kernels of corner_pool: one walk per line in scan order
// (corner_pool_math.h), parallel over lines. Where lines are interleaved
// (inner > 1: the H axis of NCHW, both axes of channels_last) a task walks a
// block of adjacent lines together, so every step reads and writes a
// contiguous run (the forward's loop over the block vectorises); where a line
// is contiguous (the W axis of NCHW) a task walks whole lines.

#include "corner_pool/corner_pool_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <array>
#include <type_traits>

namespace mmops {
namespace kernels {
namespace {

using namespace corner_pool_math;

// Adjacent lines walked together when lines are interleaved.
constexpr int64_t kBlock = 256;

// Elements of work below which a task is not split further.
constexpr int64_t kGrainElements = 1 << 15;

// The position (in elements) of step `step` of the scan along a line of
// `length` elements: scan order runs backwards for top / left.
inline int64_t step_index(const Lines& l, int64_t step) {
  return l.backwards ? l.length - 1 - step : step;
}

template <typename scalar_t>
void forward_contiguous_lines(const scalar_t* x, scalar_t* out, const Lines& l) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t grain = std::max<int64_t>(1, kGrainElements / std::max<int64_t>(l.length, 1));
  at::parallel_for(0, l.outer, grain, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const scalar_t* xl = x + o * l.length;
      scalar_t* ol = out + o * l.length;
      RunningMax<scalar_t, acc_t> best;
      best.start(xl[step_index(l, 0)]);
      for (int64_t s = 0; s < l.length; ++s) {
        const int64_t k = step_index(l, s);
        best.offer(xl[k]);
        ol[k] = best.value;
      }
    }
  });
}

template <typename scalar_t>
void forward_interleaved_lines(const scalar_t* x, scalar_t* out, const Lines& l) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t blocks = (l.inner + kBlock - 1) / kBlock;
  const int64_t grain =
      std::max<int64_t>(1, kGrainElements / std::max<int64_t>(l.length * std::min(l.inner, kBlock), 1));
  at::parallel_for(0, l.outer * blocks, grain, [&](int64_t begin, int64_t end) {
    std::array<scalar_t, kBlock> value;
    std::array<acc_t, kBlock> key;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t o = item / blocks, i0 = (item - o * blocks) * kBlock;
      const int64_t n = std::min(kBlock, l.inner - i0);
      const scalar_t* xo = x + o * l.length * l.inner + i0;
      scalar_t* oo = out + o * l.length * l.inner + i0;
      const scalar_t* first = xo + step_index(l, 0) * l.inner;
      for (int64_t j = 0; j < n; ++j) {
        value[j] = first[j];
        key[j] = static_cast<acc_t>(first[j]);
      }
      for (int64_t s = 0; s < l.length; ++s) {
        const int64_t k = step_index(l, s);
        const scalar_t* __restrict__ xr = xo + k * l.inner;
        scalar_t* __restrict__ orow = oo + k * l.inner;
        for (int64_t j = 0; j < n; ++j) {
          // RunningMax::offer on the block's arrays (branch-free: vectorises)
          const acc_t v = static_cast<acc_t>(xr[j]);
          const bool take = takes_over(v, key[j]);
          key[j] = take ? v : key[j];
          if constexpr (std::is_same_v<scalar_t, acc_t>) {
            orow[j] = key[j];
          } else {
            value[j] = take ? xr[j] : value[j];
            orow[j] = value[j];
          }
        }
      }
    }
  });
}

// The backward of one line: walks the scan, summing the output gradients of
// the current argmax's run in `acc`; when another position takes over, the
// finished run's sum goes to its argmax. Every other position gets 0, so every
// element of the gradient is written exactly once.
template <typename scalar_t>
void backward_contiguous_lines(const scalar_t* x, const scalar_t* go, scalar_t* grad, const Lines& l) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t grain = std::max<int64_t>(1, kGrainElements / std::max<int64_t>(l.length, 1));
  at::parallel_for(0, l.outer, grain, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const scalar_t* xl = x + o * l.length;
      const scalar_t* gl = go + o * l.length;
      scalar_t* dl = grad + o * l.length;
      RunningMax<scalar_t, acc_t> best;
      int64_t head = step_index(l, 0);
      best.start(xl[head]);
      acc_t acc = 0;
      for (int64_t s = 0; s < l.length; ++s) {
        const int64_t k = step_index(l, s);
        if (best.offer(xl[k])) {
          if (s > 0) {
            dl[head] = static_cast<scalar_t>(acc);
          }
          head = k;
          acc = 0;
        } else {
          dl[k] = scalar_t(0);
        }
        acc += static_cast<acc_t>(gl[k]);
      }
      dl[head] = static_cast<scalar_t>(acc);
    }
  });
}

template <typename scalar_t>
void backward_interleaved_lines(const scalar_t* x, const scalar_t* go, scalar_t* grad, const Lines& l) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t blocks = (l.inner + kBlock - 1) / kBlock;
  const int64_t grain =
      std::max<int64_t>(1, kGrainElements / std::max<int64_t>(l.length * std::min(l.inner, kBlock), 1));
  at::parallel_for(0, l.outer * blocks, grain, [&](int64_t begin, int64_t end) {
    std::array<acc_t, kBlock> key, acc;
    std::array<int64_t, kBlock> head;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t o = item / blocks, i0 = (item - o * blocks) * kBlock;
      const int64_t n = std::min(kBlock, l.inner - i0);
      const int64_t offset = o * l.length * l.inner + i0;
      const scalar_t* xo = x + offset;
      const scalar_t* go_o = go + offset;
      scalar_t* dg = grad + offset;
      const int64_t k0 = step_index(l, 0);
      for (int64_t j = 0; j < n; ++j) {
        key[j] = static_cast<acc_t>(xo[k0 * l.inner + j]);
        acc[j] = 0;
        head[j] = k0;
      }
      for (int64_t s = 0; s < l.length; ++s) {
        const int64_t k = step_index(l, s);
        const scalar_t* xr = xo + k * l.inner;
        const scalar_t* gr = go_o + k * l.inner;
        scalar_t* dr = dg + k * l.inner;
        for (int64_t j = 0; j < n; ++j) {
          const acc_t v = static_cast<acc_t>(xr[j]);
          if (takes_over(v, key[j])) {
            if (s > 0) {
              dg[head[j] * l.inner + j] = static_cast<scalar_t>(acc[j]);
            }
            key[j] = v;
            head[j] = k;
            acc[j] = 0;
          } else {
            dr[j] = scalar_t(0);
          }
          acc[j] += static_cast<acc_t>(gr[j]);
        }
      }
      for (int64_t j = 0; j < n; ++j) {
        dg[head[j] * l.inner + j] = static_cast<scalar_t>(acc[j]);
      }
    }
  });
}

} // namespace

at::Tensor corner_pool_forward_cpu(const at::Tensor& input, const CornerPoolParams& p) {
  const at::MemoryFormat format = input.suggest_memory_format();
  const at::Tensor x = input.contiguous(format);
  at::Tensor out = at::empty(x.sizes(), x.options(), format);
  if (out.numel() == 0) {
    return out;
  }
  const Lines l = lines_of(p, format == at::MemoryFormat::ChannelsLast);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "mmops::corner_pool (CPU)", [&] {
    const scalar_t* src = x.const_data_ptr<scalar_t>();
    scalar_t* dst = out.mutable_data_ptr<scalar_t>();
    if (l.inner == 1) {
      forward_contiguous_lines(src, dst, l);
    } else {
      forward_interleaved_lines(src, dst, l);
    }
  });
  return out;
}

at::Tensor corner_pool_backward_cpu(const at::Tensor& grad_output, const at::Tensor& input, const CornerPoolParams& p) {
  const at::MemoryFormat format = input.suggest_memory_format();
  const at::Tensor x = input.contiguous(format);
  const at::Tensor go = grad_output.contiguous(format);
  at::Tensor grad = at::empty(x.sizes(), x.options(), format);
  if (grad.numel() == 0) {
    return grad;
  }
  const Lines l = lines_of(p, format == at::MemoryFormat::ChannelsLast);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "mmops::corner_pool backward (CPU)", [&] {
    const scalar_t* xs = x.const_data_ptr<scalar_t>();
    const scalar_t* gs = go.const_data_ptr<scalar_t>();
    scalar_t* dst = grad.mutable_data_ptr<scalar_t>();
    if (l.inner == 1) {
      backward_contiguous_lines(xs, gs, dst, l);
    } else {
      backward_interleaved_lines(xs, gs, dst, l);
    }
  });
  return grad;
}

} // namespace kernels
} // namespace mmops

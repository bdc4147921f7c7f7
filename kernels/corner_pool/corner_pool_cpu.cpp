// CPU kernels of corner_pool: every line is walked in scan order with the rule
// of corner_pool_math.h (the CUDA kernels' rule and summation order, so the two
// devices agree bit for bit), parallel over groups of lines. A task walks a
// group of lines step by step together:
//   - interleaved lines (inner > 1: the H axis of NCHW, both axes of
//     channels_last): up to kBlock adjacent lines, so every step reads and
//     writes one contiguous run and the loops over the group vectorise;
//   - contiguous lines (inner == 1: the W axis of NCHW): kRowGroup rows, whose
//     independent dependency chains overlap (the scan along one row is serial).

#include "corner_pool/corner_pool_kernels.h"

#include "common/layout.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

namespace mmops {
namespace kernels {
namespace {

using namespace corner_pool_math;

constexpr int64_t kBlock = 256;             // interleaved lines walked together
constexpr int64_t kRowGroup = 8;            // contiguous lines walked together
constexpr int64_t kGrainElements = 1 << 15; // work below which a task is not split

// A group of lines: element (line j, step k) at base + k * step_stride + j * line_stride,
// with line_stride 1 (interleaved lines, known at compile time: the loops
// vectorise) or length (contiguous lines).
template <bool kInterleaved>
struct Groups {
  Lines l;
  int64_t per_outer; // groups of one outer index (interleaved), else 1

  explicit Groups(const Lines& lines) : l(lines) { per_outer = kInterleaved ? (l.inner + kBlock - 1) / kBlock : 1; }
  int64_t count() const { return kInterleaved ? l.outer * per_outer : (l.outer + kRowGroup - 1) / kRowGroup; }
  int64_t grain() const {
    const int64_t size = kInterleaved ? std::min(l.inner, kBlock) : kRowGroup;
    return std::max<int64_t>(1, kGrainElements / std::max<int64_t>(l.length * size, 1));
  }
  // The first element of group g and its number of lines.
  int64_t base(int64_t g, int64_t* lines) const {
    if (kInterleaved) {
      const int64_t o = g / per_outer, i0 = (g - o * per_outer) * kBlock;
      *lines = std::min(kBlock, l.inner - i0);
      return o * l.length * l.inner + i0;
    }
    const int64_t o0 = g * kRowGroup;
    *lines = std::min(kRowGroup, l.outer - o0);
    return o0 * l.length;
  }
  int64_t step_stride() const { return kInterleaved ? l.inner : 1; }
  int64_t line_stride() const { return kInterleaved ? 1 : l.length; }
  // The position along the line of scan step s (backwards for top / left).
  int64_t at(int64_t s) const { return l.backwards ? l.length - 1 - s : s; }
};

template <typename scalar_t, bool kInterleaved>
void forward_lines(const scalar_t* x, scalar_t* out, const Lines& lines) {
  using acc_t = at::opmath_type<scalar_t>;
  const Groups<kInterleaved> groups(lines);
  at::parallel_for(0, groups.count(), groups.grain(), [&](int64_t begin, int64_t end) {
    std::array<scalar_t, kBlock> value;
    std::array<acc_t, kBlock> key;
    const int64_t ks = groups.step_stride(), js = groups.line_stride();
    for (int64_t g = begin; g < end; ++g) {
      int64_t n = 0;
      const int64_t base = groups.base(g, &n);
      const scalar_t* first = x + base + groups.at(0) * ks;
      for (int64_t j = 0; j < n; ++j) {
        value[j] = first[j * js];
        key[j] = static_cast<acc_t>(first[j * js]);
      }
      for (int64_t s = 0; s < lines.length; ++s) {
        const int64_t k = groups.at(s);
        const scalar_t* __restrict__ xr = x + base + k * ks;
        scalar_t* __restrict__ orow = out + base + k * ks;
        for (int64_t j = 0; j < n; ++j) {
          // RunningMax::offer on the group's arrays, branch-free
          const acc_t v = static_cast<acc_t>(xr[j * js]);
          const bool take = takes_over(v, key[j]);
          key[j] = take ? v : key[j];
          if constexpr (std::is_same_v<scalar_t, acc_t>) {
            orow[j * js] = key[j];
          } else {
            value[j] = take ? xr[j * js] : value[j];
            orow[j * js] = value[j];
          }
        }
      }
    }
  });
}

// The backward walks the same scan, summing the output gradients of each
// line's current argmax run in acc; when another position takes over, the
// finished run's sum goes to its argmax. Every other element gets 0 (the row
// of the step, written whole), so every element is written exactly once: the
// step's own row before any later run's sum lands in it. Takeovers (rare
// after the first steps) are handled in a separate, scalar loop, so the
// per-step loops stay branch-free (and vectorise for interleaved lines).
template <typename scalar_t, bool kInterleaved>
void backward_lines(const scalar_t* x, const scalar_t* go, scalar_t* grad, const Lines& lines) {
  using acc_t = at::opmath_type<scalar_t>;
  const Groups<kInterleaved> groups(lines);
  at::parallel_for(0, groups.count(), groups.grain(), [&](int64_t begin, int64_t end) {
    std::array<acc_t, kBlock> key, acc;
    std::array<int64_t, kBlock> head;
    std::array<unsigned char, kBlock> taken;
    std::array<int64_t, kBlock> which;
    const int64_t ks = groups.step_stride(), js = groups.line_stride();
    for (int64_t g = begin; g < end; ++g) {
      int64_t n = 0;
      const int64_t base = groups.base(g, &n);
      const int64_t k0 = groups.at(0);
      for (int64_t j = 0; j < n; ++j) {
        key[j] = static_cast<acc_t>(x[base + k0 * ks + j * js]);
        acc[j] = 0;
        head[j] = k0;
      }
      for (int64_t s = 0; s < lines.length; ++s) {
        const int64_t k = groups.at(s);
        const scalar_t* __restrict__ xr = x + base + k * ks;
        const scalar_t* __restrict__ gr = go + base + k * ks;
        scalar_t* __restrict__ dr = grad + base + k * ks;
        unsigned char any = 0;
        for (int64_t j = 0; j < n; ++j) {
          const acc_t v = static_cast<acc_t>(xr[j * js]);
          const bool take = takes_over(v, key[j]);
          key[j] = take ? v : key[j];
          taken[j] = take;
          any |= take;
        }
        if (any) {
          // the lines that took over, compacted without branches (after the
          // first steps a handful of a group's lines), then their runs' sums
          int64_t count = 0;
          for (int64_t j = 0; j < n; ++j) {
            which[count] = j;
            count += taken[j];
          }
          for (int64_t t = 0; t < count; ++t) {
            const int64_t j = which[t];
            if (s > 0) {
              grad[base + head[j] * ks + j * js] = static_cast<scalar_t>(acc[j]);
            }
            head[j] = k;
            acc[j] = 0;
          }
        }
        for (int64_t j = 0; j < n; ++j) {
          dr[j * js] = scalar_t(0); // the new argmaxes' too: their sums come when their runs end
          acc[j] += static_cast<acc_t>(gr[j * js]);
        }
      }
      for (int64_t j = 0; j < n; ++j) {
        grad[base + head[j] * ks + j * js] = static_cast<scalar_t>(acc[j]);
      }
    }
  });
}

} // namespace

at::Tensor corner_pool_forward_cpu(const at::Tensor& input, const CornerPoolParams& p) {
  const at::MemoryFormat format = input.suggest_memory_format();
  const at::Tensor x = contiguous_cpu(input, format);
  at::Tensor out = at::empty(x.sizes(), x.options(), format);
  if (out.numel() == 0) {
    return out;
  }
  const Lines l = lines_of(p, format == at::MemoryFormat::ChannelsLast);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "mmops::corner_pool (CPU)", [&] {
    const scalar_t* src = x.const_data_ptr<scalar_t>();
    scalar_t* dst = out.mutable_data_ptr<scalar_t>();
    if (l.inner == 1) {
      forward_lines<scalar_t, false>(src, dst, l);
    } else {
      forward_lines<scalar_t, true>(src, dst, l);
    }
  });
  return out;
}

at::Tensor corner_pool_backward_cpu(const at::Tensor& grad_output, const at::Tensor& input, const CornerPoolParams& p) {
  const at::MemoryFormat format = input.suggest_memory_format();
  const at::Tensor x = contiguous_cpu(input, format);
  const at::Tensor go = contiguous_cpu(grad_output, format); // often NCHW for a channels_last x
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
      backward_lines<scalar_t, false>(xs, gs, dst, l);
    } else {
      backward_lines<scalar_t, true>(xs, gs, dst, l);
    }
  });
  return grad;
}

} // namespace kernels
} // namespace mmops

// CPU kernels of filtered_lrelu (filtered_lrelu_math.h), row by row with the
// building blocks of common/fir_rows_cpu.h. Every pass (the forward, the
// gradient of input, its adjoint) runs each plane (N * C, in parallel) as a
// stream of rows: an intermediate row is computed from the input rows it reads
// (kept in a ring), goes through the pointwise step (and the mask), is staged
// for stage 2 (split by the x down factor), and an output row is computed as
// soon as the intermediate rows it reads are there. The buffers are a few rows
// per task, allocated once per task. Accumulation in float (float64 for
// float64).
//
// Each stage's filter is applied in two 1-D passes when it is separable
// (separate_filter: filter = col x row, as StyleGAN3's 1-D filters give):
// the rows read are filtered along x (filter_row, polyphase taps of `row`),
// then combined along y (combine_rows, taps of `col`), so a sample is
// sum_ky col[ky] * (sum_kx row[kx] * signal[..]). Any other filter: the sum
// over ky of the staged rows filtered along x by filter row ky (ky, then kx:
// the order of a direct 2-D sum). ky and kx run over the flipped filter's taps
// that read the signal, ascending. Planes are independent: the result does not
// depend on the thread count. The pointwise step and the mask (one code per
// intermediate sample, every one of them written by the forward) are as in
// filtered_lrelu_math.h, computed without branches on a whole row (it
// vectorises; the codes go through an int32 row). The dense loops run as AVX2
// + FMA where the CPU and ATen's CPU capability allow (fir_rows_cpu.h).

#include "filtered_lrelu/filtered_lrelu_kernels.h"

#include "common/fir_rows_cpu.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/flip.h>

#include <algorithm>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using namespace filtered_lrelu_math;
using fir::cpu::RowKernels;
using fir::cpu::RowPlan;
using fir::cpu::RowRing;

enum class Pointwise {
  kActivate,          // the forward
  kActivateAndRecord, // the forward, writing the mask
  kMasked,            // the backward passes: times the recorded derivative
};

template <typename scalar_t>
struct Pass {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* z = nullptr;
  const scalar_t* bias = nullptr; // [C] or null
  const acc_t* k1 = nullptr;      // [ay.k1, ax.k1]
  const acc_t* k2 = nullptr;      // [ay.k2, ax.k2]
  uint8_t* mask = nullptr;        // [planes, ay.mid, ax.mid]: written or read
  scalar_t* out = nullptr;
  PassAxis ax, ay;
  int64_t planes = 0, channels = 1;
  Pointwise mode = Pointwise::kActivate;
  acc_t gain = 1, slope = 0, clamp = -1;
};

// One stage's filter [kh, kw] and its plan along x.
template <typename acc_t>
struct StageFilter {
  const acc_t* k = nullptr;
  int64_t kh = 1, kw = 1;
  RowPlan px;
  bool separable = false;
  std::vector<acc_t> col, row; // when separable: k = col x row

  StageFilter(const acc_t* k_, int64_t kh_, int64_t kw_, RowPlan px_) : k(k_), kh(kh_), kw(kw_), px(std::move(px_)) {
    separable = fir::cpu::separate_filter(k, kh, kw, col, row);
  }
  // the flipped filter's tap ky: filter row kh - 1 - ky
  const acc_t* filter_row(int64_t ky) const { return k + (kh - 1 - ky) * kw; }
  acc_t col_tap(int64_t ky) const { return col[kh - 1 - ky]; }
  // the ring's rows: separable, the rows filtered along x; else the staged rows
  int64_t ring_width() const { return separable ? px.out : px.staged_size(); }
};

// The pointwise step over a row of n intermediate samples, in place, without
// branches (it vectorises): the forward (lrelu_gain_clamp, its code per sample
// into code) and the backward passes (times mask_factor of the recorded code).
template <typename acc_t>
MMOPS_FIR_INLINE void activate_body(acc_t* MMOPS_FIR_RESTRICT v, int32_t* MMOPS_FIR_RESTRICT code, int64_t n,
                                    acc_t gain, acc_t slope, acc_t clamp) {
  if (clamp >= acc_t(0)) {
    for (int64_t i = 0; i < n; ++i) {
      const acc_t x = v[i];
      const bool negative = x < acc_t(0);
      const acc_t y = (negative ? x * slope : x) * gain;
      const bool clamped = y > clamp || y < -clamp;
      v[i] = clamped ? (y > acc_t(0) ? clamp : -clamp) : y;
      code[i] = clamped ? kClamped : (negative ? kNegative : kPositive);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const acc_t x = v[i];
      const bool negative = x < acc_t(0);
      v[i] = (negative ? x * slope : x) * gain;
      code[i] = negative ? kNegative : kPositive;
    }
  }
}

template <typename acc_t>
MMOPS_FIR_INLINE void masked_body(acc_t* MMOPS_FIR_RESTRICT v, const int32_t* MMOPS_FIR_RESTRICT code, int64_t n,
                                  acc_t gain, acc_t slope) {
  const acc_t negative = gain * slope; // mask_factor's values
  for (int64_t i = 0; i < n; ++i) {
    const int32_t c = code[i];
    v[i] *= c == kPositive ? gain : (c == kNegative ? negative : acc_t(0));
  }
}

template <typename acc_t>
void activate_base(acc_t* v, int32_t* code, int64_t n, acc_t gain, acc_t slope, acc_t clamp) {
  activate_body(v, code, n, gain, slope, clamp);
}
template <typename acc_t>
void masked_base(acc_t* v, const int32_t* code, int64_t n, acc_t gain, acc_t slope) {
  masked_body(v, code, n, gain, slope);
}
#if MMOPS_FIR_HAVE_AVX2
template <typename acc_t>
MMOPS_FIR_AVX2_TARGET void activate_avx2(acc_t* v, int32_t* code, int64_t n, acc_t gain, acc_t slope, acc_t clamp) {
  activate_body(v, code, n, gain, slope, clamp);
}
template <typename acc_t>
MMOPS_FIR_AVX2_TARGET void masked_avx2(acc_t* v, const int32_t* code, int64_t n, acc_t gain, acc_t slope) {
  masked_body(v, code, n, gain, slope);
}
#endif

template <typename acc_t>
struct PointwiseKernels {
  void (*activate)(acc_t* v, int32_t* code, int64_t n, acc_t gain, acc_t slope, acc_t clamp) = &activate_base<acc_t>;
  void (*masked)(acc_t* v, const int32_t* code, int64_t n, acc_t gain, acc_t slope) = &masked_base<acc_t>;
  PointwiseKernels() {
#if MMOPS_FIR_HAVE_AVX2
    if (fir::cpu::use_avx2()) {
      activate = &activate_avx2<acc_t>;
      masked = &masked_avx2<acc_t>;
    }
#endif
  }
};

// Everything a pass shares between its tasks. An intermediate row is computed split by
// output phase of stage 1 (PhaseSplit{mid, P}: phase p holds x = p + t * P); to_stage
// moves it into a staged row of stage 2 (stage_step[p] > 0: phase p's samples land
// stage_step[p] apart from to_stage[out_begin[p]]).
template <typename scalar_t>
struct Plan {
  using acc_t = at::opmath_type<scalar_t>;
  StageFilter<acc_t> s1, s2;
  int64_t slots1, slots2;        // the most rows an intermediate / output row reads
  std::vector<int64_t> to_stage; // split index -> its place in a stage-2 staged row
  std::vector<int64_t> stage_step;
  std::vector<fir::FirTaps<int64_t>> windows1, windows2; // the rows an intermediate / output row reads
  RowKernels<acc_t> kern;
  PointwiseKernels<acc_t> pointwise;

  explicit Plan(const Pass<scalar_t>& p)
      : s1(p.k1, p.ay.k1, p.ax.k1, fir::cpu::make_row_plan(p.ax.in, p.ax.mid, p.ax.up, 1, p.ax.off1, p.ax.k1)),
        s2(p.k2, p.ay.k2, p.ax.k2,
           fir::cpu::make_row_plan(p.ax.mid, p.ax.out, 1, p.ax.down, p.ax.off2, p.ax.k2, /*whole_input=*/true)),
        slots1((p.ay.k1 + p.ay.up - 1) / p.ay.up),
        slots2(p.ay.k2),
        kern(fir::cpu::row_kernels<acc_t>()) {
    for (int64_t my = 0; my < p.ay.mid; ++my) {
      windows1.push_back(axis_taps<int64_t>(my + p.ay.off1, p.ay.up, p.ay.k1, p.ay.in));
    }
    for (int64_t oy = 0; oy < p.ay.out; ++oy) {
      windows2.push_back(axis_taps<int64_t>(oy * p.ay.down + p.ay.off2, 1, p.ay.k2, p.ay.mid));
    }
    const RowPlan& px = s1.px;
    to_stage.resize(p.ax.mid);
    for (int64_t mx = 0; mx < p.ax.mid; ++mx) {
      to_stage[px.split_index(mx)] = s2.px.staged_index(mx);
    }
    for (int64_t q = 0; q < px.phases; ++q) {
      const int64_t* run = to_stage.data() + px.out_begin[q];
      int64_t step = px.out_count[q] > 1 ? run[1] - run[0] : 1;
      for (int64_t t = 1; t < px.out_count[q] && step > 0; ++t) {
        step = run[t] - run[t - 1] == step ? step : 0;
      }
      stage_step.push_back(step);
    }
  }
};

// A task's buffers.
template <typename acc_t>
struct Workspace {
  RowRing<acc_t> ring1, ring2;
  std::vector<acc_t> staged1, staged2, mid, out, scratch, weights;
  std::vector<int32_t> codes; // an intermediate row's mask codes, split as mid (int32: the
                              // pointwise loop vectorises with the float width)
  std::vector<const acc_t*> sources, filters;

  template <typename scalar_t>
  Workspace(const Plan<scalar_t>& plan) {
    ring1.reset(plan.slots1, plan.s1.ring_width());
    ring2.reset(plan.slots2, plan.s2.ring_width());
    staged1.assign(plan.s1.separable ? plan.s1.px.staged_size() : 0, acc_t(0));
    staged2.assign(plan.s2.separable ? plan.s2.px.staged_size() : 0, acc_t(0));
    mid.resize(plan.s1.px.out);
    codes.resize(plan.s1.px.out);
    out.resize(plan.s2.px.out);
    scratch.resize(plan.s2.px.out);
    weights.resize(std::max(plan.slots1, plan.slots2));
    sources.resize(weights.size());
    filters.resize(weights.size());
  }
};

// dst (a row split by s.px) = the rows [w.i0, + w.count) of ring (read through the
// flipped filter's taps w.k0 + j * up along y), filtered along x.
template <typename acc_t>
void filter_rows(const StageFilter<acc_t>& s, const RowKernels<acc_t>& kern, const fir::FirTaps<int64_t>& w, int64_t up,
                 RowRing<acc_t>& ring, Workspace<acc_t>& ws, acc_t* dst) {
  ring.window(w.i0, w.count, ws.sources.data());
  if (s.separable) {
    for (int64_t j = 0; j < w.count; ++j) {
      ws.weights[j] = s.col_tap(w.k0 + j * up);
    }
    kern.combine_rows(ws.sources.data(), ws.weights.data(), w.count, s.px.out, dst);
  } else {
    for (int64_t j = 0; j < w.count; ++j) {
      ws.filters[j] = s.filter_row(w.k0 + j * up);
    }
    kern.filter_rows(s.px, ws.sources.data(), ws.filters.data(), w.count, dst);
  }
}

// One plane of a pass.
template <typename scalar_t>
void run_plane(const Pass<scalar_t>& p, const Plan<scalar_t>& plan, int64_t plane,
               Workspace<at::opmath_type<scalar_t>>& ws) {
  using acc_t = at::opmath_type<scalar_t>;
  const PassAxis& ax = p.ax;
  const PassAxis& ay = p.ay;
  const StageFilter<acc_t>& s1 = plan.s1;
  const StageFilter<acc_t>& s2 = plan.s2;
  const scalar_t* z = p.z + plane * ay.in * ax.in;
  const acc_t b = p.bias != nullptr ? static_cast<acc_t>(p.bias[plane % p.channels]) : acc_t(0);
  uint8_t* mask = p.mask != nullptr ? p.mask + plane * ay.mid * ax.mid : nullptr;
  scalar_t* out = p.out + plane * ay.out * ax.out;
  const bool record = p.mode == Pointwise::kActivateAndRecord;
  ws.ring1.next = 0;

  // intermediate row my: stage 1, the pointwise step, staged (and filtered along x) for stage 2
  const auto mid_row = [&](int64_t my) {
    const fir::FirTaps<int64_t>& w = plan.windows1[my];
    for (int64_t i = std::max(ws.ring1.next, w.i0); i < w.i0 + w.count; ++i) {
      if (s1.separable) {
        fir::cpu::stage_row(s1.px, z + i * ax.in, b, ws.staged1.data());
        plan.kern.filter_row(s1.px, ws.staged1.data(), s1.row.data(), ws.ring1.row(i), false);
      } else {
        fir::cpu::stage_row(s1.px, z + i * ax.in, b, ws.ring1.row(i));
      }
    }
    ws.ring1.next = std::max(ws.ring1.next, w.i0 + w.count);
    filter_rows(s1, plan.kern, w, ay.up, ws.ring1, ws, ws.mid.data());
    // the pointwise step on the split row; the mask row is in x order (x = q + t * P)
    const RowPlan& px = s1.px;
    uint8_t* m_row = mask != nullptr ? mask + my * ax.mid : nullptr;
    if (p.mode == Pointwise::kMasked) {
      for (int64_t q = 0; q < px.phases; ++q) {
        int32_t* c = ws.codes.data() + px.out_begin[q];
        for (int64_t t = 0; t < px.out_count[q]; ++t) {
          c[t] = m_row[q + t * px.period];
        }
      }
      plan.pointwise.masked(ws.mid.data(), ws.codes.data(), ax.mid, p.gain, p.slope);
    } else {
      plan.pointwise.activate(ws.mid.data(), ws.codes.data(), ax.mid, p.gain, p.slope, p.clamp);
      if (record) {
        for (int64_t q = 0; q < px.phases; ++q) {
          const int32_t* c = ws.codes.data() + px.out_begin[q];
          for (int64_t t = 0; t < px.out_count[q]; ++t) {
            m_row[q + t * px.period] = static_cast<uint8_t>(c[t]);
          }
        }
      }
    }
    // into the staged row of stage 2
    acc_t* staged = s2.separable ? ws.staged2.data() : ws.ring2.row(my);
    for (int64_t q = 0; q < px.phases; ++q) {
      const acc_t* v = ws.mid.data() + px.out_begin[q];
      const int64_t* place = plan.to_stage.data() + px.out_begin[q];
      const int64_t step = plan.stage_step[q];
      if (step > 0) {
        acc_t* dst = staged + place[0];
        for (int64_t t = 0; t < px.out_count[q]; ++t) {
          dst[t * step] = v[t];
        }
      } else {
        for (int64_t t = 0; t < px.out_count[q]; ++t) {
          staged[place[t]] = v[t];
        }
      }
    }
    if (s2.separable) {
      plan.kern.filter_row(s2.px, ws.staged2.data(), s2.row.data(), ws.ring2.row(my), false);
    }
  };

  int64_t next_mid = 0;
  for (int64_t oy = 0; oy < ay.out; ++oy) {
    const fir::FirTaps<int64_t>& w = plan.windows2[oy];
    if (!record) { // the intermediate rows that no output reads are skipped (the forward with a mask writes them)
      next_mid = std::max(next_mid, w.i0);
    }
    for (; next_mid < w.i0 + w.count; ++next_mid) {
      mid_row(next_mid);
    }
    filter_rows(s2, plan.kern, w, 1, ws.ring2, ws, ws.out.data());
    fir::cpu::store_row(s2.px, ws.out.data(), out + oy * ax.out, ws.scratch.data());
  }
  if (record) {
    for (; next_mid < ay.mid; ++next_mid) {
      mid_row(next_mid);
    }
  }
}

template <typename scalar_t>
void run_pass(const Pass<scalar_t>& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const Plan<scalar_t> plan(p);
  at::parallel_for(0, p.planes, 1, [&](int64_t begin, int64_t end) {
    Workspace<acc_t> ws(plan);
    for (int64_t plane = begin; plane < end; ++plane) {
      run_plane(p, plan, plane, ws);
    }
  });
}

} // namespace

std::tuple<at::Tensor, at::Tensor> filtered_lrelu_empty_outputs(const at::Tensor& input, const FilteredLreluParams& p,
                                                                bool write_mask) {
  at::Tensor output = at::empty({p.batch, p.channels, p.out_h, p.out_w}, input.options());
  at::Tensor mask;
  if (write_mask) {
    mask = at::empty({p.batch, p.channels, p.mid_h, p.mid_w}, input.options().dtype(at::kByte));
  }
  return {output, mask};
}

std::tuple<at::Tensor, at::Tensor> filtered_lrelu_pass_filters(const at::Tensor& filter_up,
                                                               const at::Tensor& filter_down, at::ScalarType dtype,
                                                               bool input_gradient) {
  const auto prepare = [&](const at::Tensor& filter) {
    const at::Tensor f = filter.to(at::toOpMathType(dtype));
    return (input_gradient ? at::flip(f, {0, 1}) : f).contiguous();
  };
  return input_gradient ? std::make_tuple(prepare(filter_down), prepare(filter_up))
                        : std::make_tuple(prepare(filter_up), prepare(filter_down));
}

std::tuple<at::Tensor, at::Tensor> filtered_lrelu_forward_cpu(const at::Tensor& input_, const at::Tensor& filter_up,
                                                              const at::Tensor& filter_down,
                                                              const std::optional<at::Tensor>& bias_,
                                                              const FilteredLreluParams& p, bool write_mask) {
  const at::Tensor input = input_.contiguous();
  at::Tensor output, mask;
  std::tie(output, mask) = filtered_lrelu_empty_outputs(input, p, write_mask);
  if (p.planes == 0) {
    return {output, mask};
  }
  const at::Tensor bias = bias_.has_value() ? bias_->contiguous() : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::filtered_lrelu (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const auto [k1, k2] = filtered_lrelu_pass_filters(filter_up, filter_down, input.scalar_type(), false);
    Pass<scalar_t> pass;
    pass.z = input.const_data_ptr<scalar_t>();
    pass.bias = bias.defined() ? bias.const_data_ptr<scalar_t>() : nullptr;
    pass.k1 = k1.const_data_ptr<acc_t>();
    pass.k2 = k2.const_data_ptr<acc_t>();
    pass.mask = write_mask ? mask.mutable_data_ptr<uint8_t>() : nullptr;
    pass.out = output.mutable_data_ptr<scalar_t>();
    pass.ax = forward_axis(p, false);
    pass.ay = forward_axis(p, true);
    pass.planes = p.planes;
    pass.channels = p.channels;
    pass.mode = write_mask ? Pointwise::kActivateAndRecord : Pointwise::kActivate;
    pass.gain = static_cast<acc_t>(p.gain);
    pass.slope = static_cast<acc_t>(p.slope);
    pass.clamp = static_cast<acc_t>(p.clamp);
    run_pass(pass);
  });
  return {output, mask};
}

at::Tensor filtered_lrelu_backward_cpu(const at::Tensor& grad_, const at::Tensor& mask_, const at::Tensor& filter_up,
                                       const at::Tensor& filter_down, const FilteredLreluParams& p, bool transpose) {
  const at::Tensor grad = grad_.contiguous();
  const at::Tensor mask = mask_.contiguous();
  const PassAxis ax = transpose ? forward_axis(p, false) : backward_axis(p, false);
  const PassAxis ay = transpose ? forward_axis(p, true) : backward_axis(p, true);
  at::Tensor result = at::empty({p.batch, p.channels, ay.out, ax.out}, grad.options());
  if (p.planes == 0) {
    return result;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad.scalar_type(), "mmops::_filtered_lrelu_backward (CPU)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const auto [k1, k2] = filtered_lrelu_pass_filters(filter_up, filter_down, grad.scalar_type(), !transpose);
        Pass<scalar_t> pass;
        pass.z = grad.const_data_ptr<scalar_t>();
        pass.k1 = k1.const_data_ptr<acc_t>();
        pass.k2 = k2.const_data_ptr<acc_t>();
        pass.mask = const_cast<uint8_t*>(mask.const_data_ptr<uint8_t>()); // read only (kMasked)
        pass.out = result.mutable_data_ptr<scalar_t>();
        pass.ax = ax;
        pass.ay = ay;
        pass.planes = p.planes;
        pass.channels = p.channels;
        pass.mode = Pointwise::kMasked;
        pass.gain = static_cast<acc_t>(p.gain);
        pass.slope = static_cast<acc_t>(p.slope);
        run_pass(pass);
      });
  return result;
}

} // namespace kernels
} // namespace mmops

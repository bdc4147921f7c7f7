#pragma once
// CPU building blocks of the FIR ops (upfirdn2d, filtered_lrelu; no CUDA): a
// 2-D pass is computed row by row, as dense multiply-adds along rows.
//
// RowPlan: one axis of a polyphase FIR pass. Output o in [0, out) sums the
// taps k in [0, ksize) of the flipped filter over the signal zero-inserted by
// `up` at position o * down + off + k (common/fir_taps.h). With g =
// gcd(up, down), the outputs o = p + t * P (P = up / g, phase p) share their
// taps, and tap j of phase p reads input i0_p + j + t * s (s = down / g). A
// row is "staged" once (converted to the accumulation type, split by input
// phase i mod s, with zeros around it), after which every tap of every phase
// is one dense multiply-add over t: filter_row. Filtered rows are kept split
// by output phase (PhaseSplit{out, P}); store_row writes them in order.
//
// Along the other axis, combine_rows sums rows times weights. A separable
// filter (separate_filter: the 2-D filter is the outer product col x row)
// then costs ~ (taps_x + taps_y) multiply-adds per output instead of
// taps_x * taps_y: filter every input row along x once, combine the filtered
// rows along y. RowRing keeps the last rows a pass needs (outputs in
// ascending order read windows of rows that only move forward).
//
// A filter that is not separable: an output row is the sum over the filter's
// rows of the staged input rows filtered by them (filter_rows).
//
// Order of the sums: filter_row adds the taps of an output in the order of
// the flipped filter's index k ascending (the plan's taps j), starting from
// the destination's value; filter_rows adds its rows in the order given, each
// row's taps as filter_row, starting from 0; combine_rows adds its rows in the
// order given, starting from 0. The zero margins add exact zeros (0 * w, the
// filters being finite), so an output sums the same non-zero terms as a
// gather over the taps that read input. The multiply-adds may be fused (FMA)
// where the CPU has them: the results may differ in the last bits between
// CPUs, never between runs or thread counts on one machine.

#include "common/fir_taps.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstdint>
#include <vector>

// MMOPS_FIR_AVX2_TARGET marks a function to be compiled for AVX2 + FMA (x86-64,
// GCC / Clang; MMOPS_FIR_HAVE_AVX2 says whether it does): call it only where
// use_avx2() holds. MMOPS_FIR_INLINE bodies inlined into such a function are
// compiled (vectorised) for its target.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MMOPS_FIR_HAVE_AVX2 1
#define MMOPS_FIR_AVX2_TARGET __attribute__((target("avx2,fma")))
#else
#define MMOPS_FIR_HAVE_AVX2 0
#define MMOPS_FIR_AVX2_TARGET
#endif
#if defined(__GNUC__) || defined(__clang__)
#define MMOPS_FIR_INLINE inline __attribute__((always_inline))
#define MMOPS_FIR_RESTRICT __restrict__
#else
#define MMOPS_FIR_INLINE inline
#define MMOPS_FIR_RESTRICT
#endif

namespace mmops {
namespace fir {
namespace cpu {

// Whether the AVX2 + FMA variants run: the CPU has them and ATen's CPU
// capability is AVX2 or more (ATEN_CPU_CAPABILITY=default turns them off).
bool use_avx2();

struct RowPlan {
  int64_t in = 0, out = 0, up = 1, down = 1, off = 0, ksize = 1;
  int64_t period = 1, stride = 1; // P and s above
  int64_t phases = 0;             // min(P, out): the output phases that have outputs
  int64_t lo = 0, len = 0;        // a staged row: `stride` runs of len values, input lo * s + r first
  // per output phase p: its outputs at split[out_begin[p], + out_count[p]); its taps
  // [tap_begin[p], tap_begin[p + 1]) read staged[tap_src + t] through filter[tap_k] (the
  // filter as given: the flipped filter's tap k is filter[ksize - 1 - k])
  std::vector<int64_t> out_begin, out_count, tap_begin, tap_src, tap_k;
  // per input phase r: the staged runs hold inputs r + m * s for m in [m_first[r], m_last[r]]
  std::vector<int64_t> m_first, m_last;

  int64_t staged_size() const { return stride * len; }
  // where output o is in a split row
  int64_t split_index(int64_t o) const { return out_begin[o % period] + o / period; }
  // where input i is in a staged row, or -1 when no tap reads it
  int64_t staged_index(int64_t i) const {
    const int64_t r = i % stride, m = i / stride;
    return (m >= m_first[r] && m <= m_last[r]) ? r * len + (m - lo) : -1;
  }
};

// whole_input: stage every input (staged_index(i) >= 0 for i in [0, in)), not only
// those the taps read.
RowPlan make_row_plan(int64_t in, int64_t out, int64_t up, int64_t down, int64_t off, int64_t ksize,
                      bool whole_input = false);

// staged[staged_index(i)] = x[i] + bias for the inputs that the taps read. The
// other values of staged are left as they are: zero them once (RowRing does).
template <typename T, typename acc_t>
inline void stage_row(const RowPlan& plan, const T* x, acc_t bias, acc_t* staged) {
  for (int64_t r = 0; r < plan.stride; ++r) {
    const int64_t n = plan.m_last[r] - plan.m_first[r] + 1;
    if (n <= 0) {
      continue;
    }
    const T* src = x + r + plan.m_first[r] * plan.stride;
    acc_t* dst = staged + r * plan.len + (plan.m_first[r] - plan.lo);
    for (int64_t m = 0; m < n; ++m) {
      dst[m] = static_cast<acc_t>(src[m * plan.stride]) + bias;
    }
  }
}

// out[o] = split[split_index(o)] for o in [0, plan.out), converted to T (T is
// acc_t, or Half / BFloat16 with acc_t float; scratch: plan.out values, used for
// the conversion).
template <typename T, typename acc_t>
void store_row(const RowPlan& plan, const acc_t* split, T* out, acc_t* scratch);

// The dense loops, compiled for the baseline ISA and, on x86-64, for AVX2 + FMA
// (used where use_avx2()).
template <typename acc_t>
struct RowKernels {
  // split (plan.out values, split by output phase) = (accumulate ? split : 0) + the
  // taps of `filter` (plan.ksize values, as given) over the staged row
  void (*filter_row)(const RowPlan& plan, const acc_t* staged, const acc_t* filter, acc_t* split, bool accumulate);
  // split = the sum over j ascending of the staged rows[j] filtered by filters[j] (a 2-D
  // filter: its rows), the taps of each in the order of filter_row
  void (*filter_rows)(const RowPlan& plan, const acc_t* const* rows, const acc_t* const* filters, int64_t count,
                      acc_t* split);
  // dst[x] = sum over j ascending of weights[j] * rows[j][x], x in [0, size)
  void (*combine_rows)(const acc_t* const* rows, const acc_t* weights, int64_t count, int64_t size, acc_t* dst);
};

template <typename acc_t>
RowKernels<acc_t> row_kernels();

// Whether the 2-D filter k [kh, kw] (row-major) is the outer product col x row:
// every tap reproduced by col[y] * row[x] to within 4 units in the last place
// (a zero tap exactly). The factors are chosen to be exact where the filter
// allows (integer ratios, as the binomial filters have); a separable pass then
// computes with taps that differ from k's by at most that rounding.
template <typename acc_t>
bool separate_filter(const acc_t* k, int64_t kh, int64_t kw, std::vector<acc_t>& col, std::vector<acc_t>& row);

// The last `slots` rows of `width` values of a pass, row i in slot i % slots,
// zero-initialised (the staged rows' margins stay zero); next: the first row
// not computed yet.
template <typename acc_t>
struct RowRing {
  std::vector<acc_t> data;
  int64_t slots = 1, width = 0, next = 0;
  void reset(int64_t slots_, int64_t width_) {
    slots = std::max<int64_t>(1, slots_);
    width = width_;
    data.assign(slots * width, acc_t(0));
    next = 0;
  }
  acc_t* row(int64_t i) { return data.data() + (i % slots) * width; }
  // rows[j] = row(i0 + j), j in [0, count) (count <= slots)
  void window(int64_t i0, int64_t count, const acc_t** rows) {
    int64_t slot = i0 % slots;
    for (int64_t j = 0; j < count; ++j) {
      rows[j] = data.data() + slot * width;
      slot = slot + 1 == slots ? 0 : slot + 1;
    }
  }
};

} // namespace cpu
} // namespace fir
} // namespace mmops

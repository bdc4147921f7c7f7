// CPU building blocks of the FIR ops (fir_rows_cpu.h): the row plans, the
// separability test and the dense loops, the latter compiled twice on x86-64
// (baseline and AVX2 + FMA through function attributes: only the functions
// marked so use those instructions, and they run only where the CPU has them).

#include "common/fir_rows_cpu.h"
#include "common/cpu_simd.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>

namespace mmops {
namespace fir {
namespace cpu {

// The AVX2 loops run where ATen's own CPU kernels run AVX2 or AVX-512 (the
// choice of kernels/common/cpu_simd.h, ATEN_CPU_CAPABILITY included).
bool use_avx2() {
#if MMOPS_FIR_HAVE_AVX2
  static const bool use = kernels::cpu_simd() != kernels::CpuSimd::Default && __builtin_cpu_supports("avx2") &&
                          __builtin_cpu_supports("fma");
  return use;
#else
  return false;
#endif
}

RowPlan make_row_plan(int64_t in, int64_t out, int64_t up, int64_t down, int64_t off, int64_t ksize, bool whole_input) {
  RowPlan plan;
  plan.in = in;
  plan.out = out;
  plan.up = up;
  plan.down = down;
  plan.off = off;
  plan.ksize = ksize;
  const int64_t g = std::gcd(up, down);
  plan.period = up / g;
  plan.stride = down / g;
  plan.phases = std::min(plan.period, out);
  const PhaseSplit split{out, plan.period};
  // the taps of each phase: input index i0 + j (the first output of the phase)
  std::vector<int64_t> tap_i;
  plan.tap_begin.push_back(0);
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (int64_t p = 0; p < plan.phases; ++p) {
    const FirPhase<int64_t> phase = fir_phase<int64_t>(p * down + off, up);
    const int64_t count = split.count(p);
    plan.out_begin.push_back(split.begin(p));
    plan.out_count.push_back(count);
    for (int64_t k = phase.k0, j = 0; k < ksize; k += up, ++j) {
      const int64_t i = phase.i0 + j;
      tap_i.push_back(i);
      plan.tap_k.push_back(ksize - 1 - k);
      const int64_t m = floor_div<int64_t>(i, plan.stride);
      lo = std::min(lo, m);
      hi = std::max(hi, m + count - 1);
    }
    plan.tap_begin.push_back(static_cast<int64_t>(tap_i.size()));
  }
  if (tap_i.empty()) { // no taps read anything: every output is 0
    lo = 0;
    hi = -1;
  }
  if (whole_input && in > 0) {
    lo = std::min<int64_t>(lo, 0);
    hi = std::max(hi, floor_div<int64_t>(in - 1, plan.stride));
  }
  plan.lo = lo;
  plan.len = hi - lo + 1;
  for (const int64_t i : tap_i) {
    plan.tap_src.push_back(floor_mod<int64_t>(i, plan.stride) * plan.len + (floor_div<int64_t>(i, plan.stride) - lo));
  }
  // the inputs r + m * s (in [0, in)) with m in [lo, hi]
  for (int64_t r = 0; r < plan.stride; ++r) {
    const int64_t first = std::max(lo, floor_div<int64_t>(-r + plan.stride - 1, plan.stride));
    const int64_t last = std::min(hi, floor_div<int64_t>(in - 1 - r, plan.stride));
    plan.m_first.push_back(first);
    plan.m_last.push_back(std::max(last, first - 1));
  }
  return plan;
}

namespace {

// The dense loops: d[t] = (accumulate ? d[t] : 0) + sum over j ascending of w[j] * src[j][t]
// for t in [0, n). Groups of up to 5 vectors of 32 bytes stay in registers over all the taps
// (GCC / Clang vector extensions, lowered to pairs of 16-byte operations in the baseline
// variant): blocks of 4, then the rest of the row in one group. A row that is not a whole
// number of vectors ends with a vector that overlaps the one before it, in the same group (all
// its loads before its stores): the overlapped lanes get the same operations in the same
// order, so they are written twice with the same values. Rows shorter than a vector: a scalar
// loop.
#if defined(__GNUC__) || defined(__clang__)
#define MMOPS_FIR_VECTORS 1
template <typename T>
struct Vec;
template <>
struct Vec<float> {
  typedef float type __attribute__((vector_size(32), aligned(4), may_alias));
};
template <>
struct Vec<double> {
  typedef double type __attribute__((vector_size(32), aligned(8), may_alias));
};

// The NV vectors of d at offsets at[k].
template <typename T, int NV>
MMOPS_FIR_INLINE void sum_group(T* d, const int64_t* at, const T* const* src, const T* w, int64_t count,
                                bool accumulate) {
  using V = typename Vec<T>::type;
  V a[NV];
  for (int k = 0; k < NV; ++k) {
    a[k] = accumulate ? *reinterpret_cast<const V*>(d + at[k]) : V{};
  }
  for (int64_t j = 0; j < count; ++j) {
    const T* s = src[j];
    const T wj = w[j];
    for (int k = 0; k < NV; ++k) {
      a[k] = a[k] + wj * *reinterpret_cast<const V*>(s + at[k]);
    }
  }
  for (int k = 0; k < NV; ++k) {
    *reinterpret_cast<V*>(d + at[k]) = a[k];
  }
}
#else
#define MMOPS_FIR_VECTORS 0
#endif

template <typename T>
MMOPS_FIR_INLINE void sum_rows(T* d, const T* const* src, const T* w, int64_t count, int64_t n, bool accumulate) {
#if MMOPS_FIR_VECTORS
  constexpr int64_t L = static_cast<int64_t>(sizeof(typename Vec<T>::type) / sizeof(T));
  if (n >= L) {
    const bool ragged = n % L != 0;
    int64_t blocks = n / (4 * L), rest = n - blocks * 4 * L;
    if (ragged && rest < L && blocks > 0) { // the overlapping vector joins the last block
      --blocks;
      rest += 4 * L;
    }
    int64_t at[5];
    for (int64_t b = 0; b < blocks; ++b) {
      for (int k = 0; k < 4; ++k) {
        at[k] = (4 * b + k) * L;
      }
      sum_group<T, 4>(d, at, src, w, count, accumulate);
    }
    int m = 0;
    for (int64_t k = 0; k < rest / L; ++k) {
      at[m++] = blocks * 4 * L + k * L;
    }
    if (ragged) {
      at[m++] = n - L;
    }
    switch (m) {
      case 1:
        sum_group<T, 1>(d, at, src, w, count, accumulate);
        break;
      case 2:
        sum_group<T, 2>(d, at, src, w, count, accumulate);
        break;
      case 3:
        sum_group<T, 3>(d, at, src, w, count, accumulate);
        break;
      case 4:
        sum_group<T, 4>(d, at, src, w, count, accumulate);
        break;
      case 5:
        sum_group<T, 5>(d, at, src, w, count, accumulate);
        break;
      default:
        break;
    }
    return;
  }
#endif
  for (int64_t t = 0; t < n; ++t) {
    T a = accumulate ? d[t] : T(0);
    for (int64_t j = 0; j < count; ++j) {
      a = a + w[j] * src[j][t];
    }
    d[t] = a;
  }
}

// Phase by phase, the taps of `count` staged rows through `count` filter rows (rows[j] with
// filters[j], j ascending, then the taps), in batches that sum_rows keeps in registers.
template <typename T>
MMOPS_FIR_INLINE void filter_rows_body(const RowPlan& plan, const T* const* rows, const T* const* filters,
                                       int64_t count, T* split, bool accumulate) {
  constexpr int64_t kBatch = 32;
  const T* src[kBatch];
  T w[kBatch];
  for (int64_t p = 0; p < plan.phases; ++p) {
    T* d = split + plan.out_begin[p];
    const int64_t n = plan.out_count[p];
    bool add = accumulate;
    int64_t m = 0;
    for (int64_t j = 0; j < count; ++j) {
      for (int64_t b = plan.tap_begin[p]; b < plan.tap_begin[p + 1]; ++b) {
        src[m] = rows[j] + plan.tap_src[b];
        w[m] = filters[j][plan.tap_k[b]];
        if (++m == kBatch) {
          sum_rows(d, src, w, m, n, add);
          add = true;
          m = 0;
        }
      }
    }
    if (m > 0 || !add) {
      sum_rows(d, src, w, m, n, add);
    }
  }
}

template <typename T>
MMOPS_FIR_INLINE void filter_row_body(const RowPlan& plan, const T* staged, const T* filter, T* split,
                                      bool accumulate) {
  filter_rows_body(plan, &staged, &filter, 1, split, accumulate);
}

template <typename T>
MMOPS_FIR_INLINE void combine_rows_body(const T* const* rows, const T* weights, int64_t count, int64_t size, T* dst) {
  constexpr int64_t kBatch = 32;
  for (int64_t j = 0; j < count || j == 0; j += kBatch) {
    sum_rows(dst, rows + j, weights + j, std::min(kBatch, count - j), size, j > 0);
  }
}

template <typename T>
void filter_row_base(const RowPlan& plan, const T* staged, const T* filter, T* split, bool accumulate) {
  filter_row_body(plan, staged, filter, split, accumulate);
}

template <typename T>
void combine_rows_base(const T* const* rows, const T* weights, int64_t count, int64_t size, T* dst) {
  combine_rows_body(rows, weights, count, size, dst);
}

template <typename T>
void filter_rows_base(const RowPlan& plan, const T* const* rows, const T* const* filters, int64_t count, T* split) {
  filter_rows_body(plan, rows, filters, count, split, false);
}

// A split row in order: phase by phase, pairs for the common period 2.
template <typename T>
MMOPS_FIR_INLINE void interleave_body(const RowPlan& plan, const T* MMOPS_FIR_RESTRICT split,
                                      T* MMOPS_FIR_RESTRICT out) {
  if (plan.phases == 1) {
    for (int64_t t = 0; t < plan.out; ++t) {
      out[t] = split[t];
    }
  } else if (plan.period == 2) {
    const T* a = split + plan.out_begin[0];
    const T* b = split + plan.out_begin[1];
    const int64_t pairs = plan.out_count[1];
    for (int64_t t = 0; t < pairs; ++t) {
      out[2 * t] = a[t];
      out[2 * t + 1] = b[t];
    }
    if (plan.out_count[0] > pairs) {
      out[2 * pairs] = a[pairs];
    }
  } else {
    for (int64_t p = 0; p < plan.phases; ++p) {
      const T* src = split + plan.out_begin[p];
      for (int64_t t = 0; t < plan.out_count[p]; ++t) {
        out[p + t * plan.period] = src[t];
      }
    }
  }
}

// float -> Half / BFloat16, rounding to nearest even (as their constructors; the
// BFloat16 one written without a branch so that it vectorises, same bits).
MMOPS_FIR_INLINE void narrow_body(const float* MMOPS_FIR_RESTRICT src, c10::BFloat16* MMOPS_FIR_RESTRICT dst,
                                  int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = src[i];
    uint32_t u;
    std::memcpy(&u, &v, sizeof(u));
    const uint16_t rounded = static_cast<uint16_t>((u + ((u >> 16) & 1) + UINT32_C(0x7FFF)) >> 16);
    dst[i] = c10::BFloat16(v != v ? UINT16_C(0x7FC0) : rounded, c10::BFloat16::from_bits());
  }
}

MMOPS_FIR_INLINE void narrow_body(const float* MMOPS_FIR_RESTRICT src, c10::Half* MMOPS_FIR_RESTRICT dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = static_cast<c10::Half>(src[i]);
  }
}

template <typename T>
void interleave_base(const RowPlan& plan, const T* split, T* out) {
  interleave_body(plan, split, out);
}

template <typename T>
void narrow_base(const float* src, T* dst, int64_t n) {
  narrow_body(src, dst, n);
}

#if MMOPS_FIR_HAVE_AVX2
template <typename T>
MMOPS_FIR_AVX2_TARGET void interleave_avx2(const RowPlan& plan, const T* split, T* out) {
  interleave_body(plan, split, out);
}

template <typename T>
MMOPS_FIR_AVX2_TARGET void narrow_avx2(const float* src, T* dst, int64_t n) {
  narrow_body(src, dst, n);
}

template <typename T>
MMOPS_FIR_AVX2_TARGET void filter_row_avx2(const RowPlan& plan, const T* staged, const T* filter, T* split,
                                           bool accumulate) {
  filter_row_body(plan, staged, filter, split, accumulate);
}

template <typename T>
MMOPS_FIR_AVX2_TARGET void combine_rows_avx2(const T* const* rows, const T* weights, int64_t count, int64_t size,
                                             T* dst) {
  combine_rows_body(rows, weights, count, size, dst);
}

template <typename T>
MMOPS_FIR_AVX2_TARGET void filter_rows_avx2(const RowPlan& plan, const T* const* rows, const T* const* filters,
                                            int64_t count, T* split) {
  filter_rows_body(plan, rows, filters, count, split, false);
}
#endif

} // namespace

template <typename acc_t>
RowKernels<acc_t> row_kernels() {
#if MMOPS_FIR_HAVE_AVX2
  if (use_avx2()) {
    return {&filter_row_avx2<acc_t>, &filter_rows_avx2<acc_t>, &combine_rows_avx2<acc_t>};
  }
#endif
  return {&filter_row_base<acc_t>, &filter_rows_base<acc_t>, &combine_rows_base<acc_t>};
}

template RowKernels<float> row_kernels<float>();
template RowKernels<double> row_kernels<double>();

template <typename T, typename acc_t>
void store_row(const RowPlan& plan, const acc_t* split, T* out, acc_t* scratch) {
  const bool avx2 = use_avx2();
  if constexpr (std::is_same_v<T, acc_t>) {
#if MMOPS_FIR_HAVE_AVX2
    if (avx2) {
      interleave_avx2(plan, split, out);
      return;
    }
#endif
    interleave_base(plan, split, out);
  } else {
#if MMOPS_FIR_HAVE_AVX2
    if (avx2) {
      interleave_avx2(plan, split, scratch);
      narrow_avx2(scratch, out, plan.out);
      return;
    }
#endif
    interleave_base(plan, split, scratch);
    narrow_base(scratch, out, plan.out);
  }
}

template void store_row<float, float>(const RowPlan&, const float*, float*, float*);
template void store_row<double, double>(const RowPlan&, const double*, double*, double*);
template void store_row<c10::Half, float>(const RowPlan&, const float*, c10::Half*, float*);
template void store_row<c10::BFloat16, float>(const RowPlan&, const float*, c10::BFloat16*, float*);

template <typename acc_t>
bool separate_filter(const acc_t* k, int64_t kh, int64_t kw, std::vector<acc_t>& col, std::vector<acc_t>& row) {
  // the row r0 of the largest tap
  int64_t r0 = 0;
  acc_t largest = 0;
  for (int64_t i = 0; i < kh * kw; ++i) {
    if (!std::isfinite(k[i])) {
      return false;
    }
    if (std::abs(k[i]) > largest) {
      largest = std::abs(k[i]);
      r0 = i / kw;
    }
  }
  if (largest == acc_t(0)) {
    return false;
  }
  // pivots: row r0's largest tap and its smallest non-zero one (integer ratios, exact)
  const acc_t* k_row = k + r0 * kw;
  int64_t big = 0, small = -1;
  for (int64_t x = 0; x < kw; ++x) {
    const acc_t a = std::abs(k_row[x]);
    big = a > std::abs(k_row[big]) ? x : big;
    small = a != acc_t(0) && (small < 0 || a < std::abs(k_row[small])) ? x : small;
  }
  const acc_t ulps = 4 * std::numeric_limits<acc_t>::epsilon();
  std::vector<acc_t> c(kh), r(kw);
  double best = -1;
  for (const int64_t c0 : {small, big}) {
    const acc_t pivot = k_row[c0];
    for (int64_t y = 0; y < kh; ++y) {
      c[y] = k[y * kw + c0];
    }
    for (int64_t x = 0; x < kw; ++x) {
      r[x] = k_row[x] / pivot;
    }
    double error = 0; // the sum of the relative errors; -1: a tap is off by more than the bound
    for (int64_t i = 0; i < kh * kw && error >= 0; ++i) {
      const acc_t tap = k[i], product = c[i / kw] * r[i % kw];
      const acc_t diff = std::abs(product - tap);
      if (!(diff <= ulps * std::abs(tap))) {
        error = -1;
      } else if (tap != acc_t(0)) {
        error += static_cast<double>(diff / std::abs(tap));
      }
    }
    if (error >= 0 && (best < 0 || error < best)) {
      best = error;
      col = c;
      row = r;
    }
    if (best == 0) {
      break;
    }
  }
  return best >= 0;
}

template bool separate_filter<float>(const float*, int64_t, int64_t, std::vector<float>&, std::vector<float>&);
template bool separate_filter<double>(const double*, int64_t, int64_t, std::vector<double>&, std::vector<double>&);

} // namespace cpu
} // namespace fir
} // namespace mmops

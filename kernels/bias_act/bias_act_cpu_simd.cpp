// The CPU loops of bias_act, compiled once per instruction set (common/cpu_simd.h;
// its rule: raw pointers in, no inline code from outside this build's namespace).
//
// AVX2 and AVX512 walk the storage [begin, end) in blocks of one
// at::vec::Vectorized<T> (a tail: a partial one) and compute each block's
// values in the compute type with bias_act_vec.h, the bias as a vector: one
// value broadcast within a run of `step` values (a contiguous NCHW plane), the
// bias itself where step is 1 (channels last), else gathered value by value.
// Every value goes through the same vector code whatever the block, the split
// or the layout: the result depends on neither.
//
// DEFAULT (no AVX2, another architecture, or ATEN_CPU_CAPABILITY=default) runs
// the scalar math of bias_act_math.h over the runs: ATen's portable
// Vectorized<T>, arrays and loops, is several times slower than it here.

#include "bias_act/bias_act_cpu_simd.h"

#ifdef CPU_CAPABILITY_DEFAULT
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#else
#include "bias_act/bias_act_vec.h"

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#endif

#include <algorithm>
#include <array>
#include <type_traits>

namespace mmops {
namespace kernels {
namespace CPU_CAPABILITY {
namespace {

// The compute type of the storage type T.
template <typename T>
using acc_of = std::conditional_t<std::is_same_v<T, double>, double, float>;

#ifdef CPU_CAPABILITY_DEFAULT

// Calls body(i, n, c) for the runs [i, i + n) of [begin, end) in which every
// value has bias index c = (i / step) % channels.
template <typename Body>
void for_each_run(const BiasActCpuCall& call, int64_t begin, int64_t end, Body&& body) {
  const int64_t q = begin / call.step;
  int64_t c = q % call.channels;
  int64_t r = begin - q * call.step;
  for (int64_t i = begin; i < end;) {
    const int64_t n = std::min(call.step - r, end - i);
    body(i, n, c);
    i += n;
    r = 0;
    c = c + 1 == call.channels ? 0 : c + 1;
  }
}

template <typename T, BiasAct A>
void forward_range(const BiasActCpuCall& call, int64_t begin, int64_t end) {
  using acc_t = acc_of<T>;
  const T* x = static_cast<const T*>(call.input);
  const acc_t* b = static_cast<const acc_t*>(call.bias);
  T* y = static_cast<T*>(call.result);
  const BiasActParams& p = call.params;
  const auto alpha = static_cast<acc_t>(p.alpha), gain = static_cast<acc_t>(p.gain);
  const auto clamp = static_cast<acc_t>(p.clamp);
  for_each_run(call, begin, end, [&](int64_t i0, int64_t n, int64_t c) {
    const acc_t bc = b != nullptr ? b[c] : acc_t(0);
    for (int64_t i = i0; i < i0 + n; ++i) {
      y[i] = static_cast<T>(bias_act_math::forward_value<A, acc_t>(static_cast<acc_t>(x[i]), bc, alpha, gain, clamp));
    }
  });
}

template <typename T, BiasAct A, int Order>
void backward_range(const BiasActCpuCall& call, int64_t begin, int64_t end) {
  using acc_t = acc_of<T>;
  const T* g = static_cast<const T*>(call.grad);
  const T* x = static_cast<const T*>(call.input);
  const T* y = static_cast<const T*>(call.output);
  const acc_t* b = static_cast<const acc_t*>(call.bias);
  T* gi = static_cast<T*>(call.result);
  const BiasActParams& p = call.params;
  const auto alpha = static_cast<acc_t>(p.alpha), gain = static_cast<acc_t>(p.gain);
  const auto clamp = static_cast<acc_t>(p.clamp), clamp_y = static_cast<acc_t>(call.clamp_y);
  for_each_run(call, begin, end, [&](int64_t i0, int64_t n, int64_t c) {
    const acc_t bc = b != nullptr ? b[c] : acc_t(0);
    for (int64_t i = i0; i < i0 + n; ++i) {
      const acc_t xi = x != nullptr ? static_cast<acc_t>(x[i]) : acc_t(0);
      const acc_t yi = y != nullptr ? static_cast<acc_t>(y[i]) : acc_t(0);
      gi[i] = static_cast<T>(bias_act_math::backward_value<A, Order, acc_t>(static_cast<acc_t>(g[i]), xi, bc, yi, alpha,
                                                                            gain, clamp, clamp_y));
    }
  });
}

#else // AVX2, AVX512

using at::vec::Vectorized;
using namespace bias_act_vec;

// A block of values of storage type T: two vectors of the compute type (for
// float and double two Vectorized<T>, so that the latencies of two exp and
// divisions overlap, as in ATen's loops; for half and bfloat16 one
// Vectorized<T>).
template <typename T>
struct BlockOf {
  using acc_t = acc_of<T>;
  using VecAcc = Vectorized<acc_t>;
  static constexpr int64_t kVecSize = VecAcc::size();
  static constexpr int kVecs = 2;
  static constexpr int64_t kSize = kVecs * kVecSize;
  using Values = std::array<VecAcc, kVecs>;
  static_assert(std::is_same_v<T, acc_t> || Vectorized<T>::size() == kSize, "a reduced vector: two float ones");

  // n (<= kSize) values of p, in the compute type (the lanes past n: unspecified).
  static Values load(const T* p, int64_t n) {
    if constexpr (std::is_same_v<T, acc_t>) {
      if (n == kSize) {
        return {VecAcc::loadu(p), VecAcc::loadu(p + kVecSize)};
      }
      return {VecAcc::loadu(p, std::min(n, kVecSize)),
              n > kVecSize ? VecAcc::loadu(p + kVecSize, n - kVecSize) : VecAcc(0)};
    } else {
      const Vectorized<T> v = n == kSize ? Vectorized<T>::loadu(p) : Vectorized<T>::loadu(p, n);
      auto [lo, hi] = at::vec::convert_to_float<T>(v);
      return {lo, hi};
    }
  }

  // Stores the first n (<= kSize) values of v, rounded to T, at p.
  static void store(T* p, int64_t n, const Values& v) {
    if constexpr (std::is_same_v<T, acc_t>) {
      if (n == kSize) {
        v[0].store(p);
        v[1].store(p + kVecSize);
      } else {
        v[0].store(p, static_cast<int>(std::min(n, kVecSize)));
        if (n > kVecSize) {
          v[1].store(p + kVecSize, static_cast<int>(n - kVecSize));
        }
      }
    } else {
      const Vectorized<T> out = at::vec::convert_from_float<T>(v[0], v[1]);
      n == kSize ? out.store(p) : out.store(p, static_cast<int>(n));
    }
  }

  static Values broadcast(acc_t value) {
    Values v;
    v.fill(VecAcc(value));
    return v;
  }

  // kSize values of bias (p: of the compute type) from p.
  static Values load_acc(const acc_t* p) {
    Values v;
    for (int k = 0; k < kVecs; ++k) {
      v[k] = VecAcc::loadu(p + k * kVecSize);
    }
    return v;
  }
};

// The bias of consecutive blocks, from value `begin` on. Runs of step >=
// kMaxBiasBlock values (>= kSize): a cursor over the runs (channel c, offset r
// in its run); a block lies in one run (its bias broadcast) or spans the end of
// one and the start of the next (the two blended by lane). Shorter runs: the
// bias of every value of a period (step * channels values) laid out, then the
// block's kSize values loaded from the position in the period.
template <typename T>
class BiasBlocks {
 public:
  using B = BlockOf<T>;
  using acc_t = typename B::acc_t;
  using Values = typename B::Values;
  static_assert(B::kSize <= kMaxBiasBlock, "bias_act: a block longer than the bias pattern's margin");

  BiasBlocks(const BiasActCpuCall& call, int64_t begin)
      : bias_(static_cast<const acc_t*>(call.bias)),
        pattern_(static_cast<const acc_t*>(call.bias_pattern)),
        step_(call.step),
        channels_(call.channels),
        period_(call.step * call.channels) {
    const int64_t q = begin / step_;
    c_ = q % channels_;
    r_ = begin - q * step_;
    pos_ = begin % period_;
    for (int k = 0; k < B::kVecs; ++k) {
      lane_[k] = B::VecAcc::arange(static_cast<acc_t>(k * B::kVecSize), 1);
    }
  }

  // The bias of the next n (<= kSize) values (0 without a bias, as the scalar code adds).
  C10_ALWAYS_INLINE Values next(int64_t n) {
    if (bias_ == nullptr) {
      return B::broadcast(acc_t(0));
    }
    if (pattern_ != nullptr) {
      const Values v = B::load_acc(pattern_ + pos_);
      pos_ += n;
      if (pos_ >= period_) {
        pos_ %= period_;
      }
      return v;
    }
    const int64_t left = step_ - r_; // values of the current run
    const acc_t current = bias_[c_];
    if (left > n) {
      r_ += n;
      return B::broadcast(current);
    }
    r_ = n - left;
    c_ = c_ + 1 == channels_ ? 0 : c_ + 1;
    if (left == n) {
      return B::broadcast(current);
    }
    const typename B::VecAcc first(current), second(bias_[c_]), split(static_cast<acc_t>(left));
    Values v;
    for (int k = 0; k < B::kVecs; ++k) {
      v[k] = select(lane_[k] < split, first, second);
    }
    return v;
  }

 private:
  const acc_t* bias_;
  const acc_t* pattern_;
  int64_t step_, channels_, period_;
  int64_t c_ = 0, r_ = 0, pos_ = 0;
  Values lane_; // the lane indices of a block
};

// Calls body(i, n, bias) for the blocks [i, i + n) of [begin, end) (n <= kSize) with their bias.
template <typename T, typename Body>
void for_each_block(const BiasActCpuCall& call, int64_t begin, int64_t end, Body&& body) {
  BiasBlocks<T> bias(call, begin);
  for (int64_t i = begin; i < end;) {
    const int64_t n = std::min<int64_t>(BlockOf<T>::kSize, end - i);
    body(i, n, bias.next(n));
    i += n;
  }
}

template <typename T, BiasAct A>
void forward_range(const BiasActCpuCall& call, int64_t begin, int64_t end) {
  using B = BlockOf<T>;
  const Consts<typename B::VecAcc> k(call.params, call.clamp_y);
  const T* x = static_cast<const T*>(call.input);
  T* y = static_cast<T*>(call.result);
  for_each_block<T>(call, begin, end, [&](int64_t i, int64_t n, const typename B::Values& bias) {
    typename B::Values v = B::load(x + i, n);
    for (int j = 0; j < B::kVecs; ++j) {
      v[j] = forward_value<A>(v[j], bias[j], k);
    }
    B::store(y + i, n, v);
  });
}

template <typename T, BiasAct A, int Order>
void backward_range(const BiasActCpuCall& call, int64_t begin, int64_t end) {
  using B = BlockOf<T>;
  const Consts<typename B::VecAcc> k(call.params, call.clamp_y);
  const T* g = static_cast<const T*>(call.grad);
  const T* x = static_cast<const T*>(call.input);  // read by swish alone
  const T* y = static_cast<const T*>(call.output); // by the others (linear: with a clamp)
  T* gi = static_cast<T*>(call.result);
  const typename B::Values none = B::broadcast(0);
  for_each_block<T>(call, begin, end, [&](int64_t i, int64_t n, const typename B::Values& bias) {
    typename B::Values v = B::load(g + i, n);
    typename B::Values xv = none, yv = none;
    if constexpr (uses_x(A)) {
      xv = B::load(x + i, n);
    } else if (y != nullptr) {
      yv = B::load(y + i, n);
    }
    for (int j = 0; j < B::kVecs; ++j) {
      v[j] = backward_value<A, Order>(v[j], xv[j], bias[j], yv[j], k);
    }
    B::store(gi + i, n, v);
  });
}

#endif

// f(std::type_identity<T>{}) for the storage type of the call.
template <typename F>
void with_dtype(BiasActCpuDtype dtype, F&& f) {
  switch (dtype) {
    case BiasActCpuDtype::Float:
      f(std::type_identity<float>{});
      break;
    case BiasActCpuDtype::Double:
      f(std::type_identity<double>{});
      break;
    case BiasActCpuDtype::Half:
      f(std::type_identity<c10::Half>{});
      break;
    case BiasActCpuDtype::BFloat16:
      f(std::type_identity<c10::BFloat16>{});
      break;
  }
}

} // namespace

void bias_act_forward_range(const BiasActCpuCall& call, int64_t begin, int64_t end) {
  with_dtype(call.dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    with_act(call.params.act, [&](auto act) { forward_range<T, decltype(act)::value>(call, begin, end); });
  });
}

void bias_act_backward_range(const BiasActCpuCall& call, int64_t begin, int64_t end) {
  with_dtype(call.dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    with_act(call.params.act, [&](auto act) {
      constexpr BiasAct A = decltype(act)::value;
      call.params.order == 1 ? backward_range<T, A, 1>(call, begin, end) : backward_range<T, A, 2>(call, begin, end);
    });
  });
}

} // namespace CPU_CAPABILITY
} // namespace kernels
} // namespace mmops

// The vectorised CPU loops of bias_act, compiled once per instruction set
// (common/cpu_simd.h; its rule: raw pointers in, no inline code from outside
// this build's namespace). The storage [begin, end) is walked in blocks of one
// at::vec::Vectorized<T> (a tail: a partial one); each block's values are
// computed in the compute type by bias_act_vec.h, with its bias as a vector:
// one value broadcast within a run of `step` values (a contiguous NCHW plane),
// the bias itself where step is 1 (channels last), else gathered value by
// value. Every value goes through the same vector code whatever the block,
// the split or the layout: the result depends on neither.

#include "bias_act/bias_act_cpu_simd.h"
#include "bias_act/bias_act_vec.h"

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <array>
#include <limits>
#include <type_traits>
#include <utility>

namespace mmops {
namespace kernels {
namespace CPU_CAPABILITY {
namespace {

using at::vec::Vectorized;
using namespace bias_act_vec;

// The compute type of a storage type T and its block: Vectorized<T>::size()
// values, as kVecs vectors of the compute type (two for half and bfloat16).
template <typename T>
struct BlockOf {
  using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;
  using VecAcc = Vectorized<acc_t>;
  static constexpr int64_t kSize = Vectorized<T>::size();
  static constexpr int kVecs = static_cast<int>(kSize / VecAcc::size());
  using Values = std::array<VecAcc, kVecs>;

  // n (<= kSize) values of p, in the compute type (the lanes past n: unspecified).
  static Values load(const T* p, int64_t n) {
    const Vectorized<T> v = n == kSize ? Vectorized<T>::loadu(p) : Vectorized<T>::loadu(p, n);
    if constexpr (kVecs == 1) {
      return {v};
    } else {
      auto [lo, hi] = at::vec::convert_to_float<T>(v);
      return {lo, hi};
    }
  }

  // Stores the first n (<= kSize) values of v, rounded to T, at p.
  static void store(T* p, int64_t n, const Values& v) {
    Vectorized<T> out;
    if constexpr (kVecs == 1) {
      out = v[0];
    } else {
      out = at::vec::convert_from_float<T>(v[0], v[1]);
    }
    n == kSize ? out.store(p) : out.store(p, static_cast<int>(n));
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
      v[k] = VecAcc::loadu(p + k * VecAcc::size());
    }
    return v;
  }
};

// The bias of consecutive blocks: a cursor over the runs (channel c, offset r in its run).
template <typename T>
class BiasBlocks {
 public:
  using B = BlockOf<T>;
  using acc_t = typename B::acc_t;

  BiasBlocks(const BiasActCpuCall& call, int64_t begin)
      : bias_(static_cast<const acc_t*>(call.bias)),
        // one channel: one run of everything
        step_(call.channels == 1 ? std::numeric_limits<int64_t>::max() : call.step),
        channels_(call.channels) {
    const int64_t q = begin / step_;
    c_ = q % channels_;
    r_ = begin - q * step_;
  }

  // The bias of the next n (<= kSize) values (0 without a bias, as the scalar code adds).
  typename B::Values next(int64_t n) {
    if (bias_ == nullptr) {
      return B::broadcast(acc_t(0));
    }
    if (step_ - r_ >= n) { // one run: one value
      const acc_t value = bias_[c_];
      r_ += n;
      if (r_ == step_) {
        r_ = 0;
        c_ = c_ + 1 == channels_ ? 0 : c_ + 1;
      }
      return B::broadcast(value);
    }
    if (step_ == 1 && c_ + B::kSize <= channels_) { // a value per channel, in order
      const typename B::Values v = B::load_acc(bias_ + c_);
      c_ += n;
      c_ = c_ == channels_ ? 0 : c_;
      return v;
    }
    alignas(64) acc_t values[B::kSize] = {};
    for (int64_t k = 0; k < n; ++k) {
      values[k] = bias_[c_];
      if (++r_ == step_) {
        r_ = 0;
        c_ = c_ + 1 == channels_ ? 0 : c_ + 1;
      }
    }
    return B::load_acc(values);
  }

 private:
  const acc_t* bias_;
  int64_t step_, channels_;
  int64_t c_ = 0, r_ = 0;
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

#pragma once
// bias_act_math.h on ATen's CPU vectors: the same formulas, lane by lane, in
// the same order of operations (selects for its branches, NaN taking the same
// side), for V = at::vec::Vectorized<float> or <double>. Only the functions
// differ from the scalar code's std:: ones: exp is ATen's (SLEEF, within 1
// ulp); expm1, log1p and tanh are built here from exp and series (within a
// few ulp), as ATen's (SLEEF's) take several times as long (AVX512 float:
// expm1 and log1p 60 times exp's time, tanh 6 times; double: 3 to 4 times).
// Included by bias_act_cpu_simd.cpp alone (its names live in the namespace of
// the build: common/cpu_simd.h).

#include "bias_act/bias_act_math.h"

#include <ATen/cpu/vec/vec.h>

#include <array>
#include <type_traits>

namespace mmops {
namespace kernels {
namespace CPU_CAPABILITY {
namespace bias_act_vec {

using bias_act_math::kSeluAlpha;
using bias_act_math::kSeluScale;
using bias_act_math::uses_x;

// cond ? a : b, lane by lane (cond: a mask of a comparison).
template <typename V>
inline V select(const V& cond, const V& a, const V& b) {
  return V::blendv(b, a, cond);
}

// 1 / k! for k = 0 .. N, rounded to T.
template <typename T, int N>
constexpr std::array<T, N + 1> inverse_factorials() {
  std::array<T, N + 1> c{};
  double f = 1;
  for (int k = 0; k <= N; ++k) {
    f *= k > 0 ? k : 1;
    c[k] = static_cast<T>(1 / f);
  }
  return c;
}

// e^x - 1: within |x| < 0.5 its Taylor series to x^N / N! (N = 8 for float,
// 15 for double: the rest below 0.5 ulp), else exp(x) - 1 (for x <= 0, where
// bias_act calls it, within 2 ulp).
template <typename V>
inline V expm1_of(const V& x) {
  using T = typename V::value_type;
  constexpr int N = std::is_same_v<T, float> ? 8 : 15;
  static constexpr std::array<T, N + 1> c = inverse_factorials<T, N>();
  V p(c[N]); // Horner from 1 / N! down to 1 / 2!
  for (int k = N - 1; k >= 2; --k) {
    p = p * x + V(c[k]);
  }
  return select(x.abs() < V(T(0.5)), x + x * x * p, x.exp() - V(T(1)));
}

// log(1 + t) for 0 <= t <= 1 (softplus: t = e^-|x|): 2 atanh(s) for
// s = t / (2 + t) <= 1/3, its series 2 s (1 + s^2 / 3 + s^4 / 5 + ...) to
// s^2K / (2K + 1) (K = 6 for float, 15 for double: the rest below 0.5 ulp).
template <typename V>
inline V log1p_unit(const V& t) {
  using T = typename V::value_type;
  constexpr int K = std::is_same_v<T, float> ? 6 : 15;
  const V two(T(2));
  const V s = t / (two + t);
  const V z = s * s;
  V p(T(1) / T(2 * K + 1)); // Horner from 1 / (2K + 1) down to 1
  for (int k = K - 1; k >= 0; --k) {
    p = p * z + V(T(1) / T(2 * k + 1));
  }
  return two * s * p;
}

// tanh(x) = -m / (2 + m) for m = e^(-2 |x|) - 1, with the sign of x.
template <typename V>
inline V tanh_of(const V& x) {
  using T = typename V::value_type;
  const V m = expm1_of(V(T(-2)) * x.abs());
  return m.neg() / (V(T(2)) + m) | (x & V(T(-0.0))); // x & -0: the sign bit of x
}

template <typename V>
inline V sigmoid(const V& x) {
  return V(1) / (V(1) + x.neg().exp()); // exp overflows to inf for x << 0: 0, no NaN
}

// f(x) (bias_act_math::activate).
template <BiasAct A, typename V>
inline V activate(const V& x, const V& alpha) {
  using T = typename V::value_type;
  const V zero(0);
  if constexpr (A == BiasAct::Linear) {
    return x;
  } else if constexpr (A == BiasAct::Relu) {
    return select(x < zero, zero, x);
  } else if constexpr (A == BiasAct::Lrelu) {
    return select(x < zero, x * alpha, x);
  } else if constexpr (A == BiasAct::Tanh) {
    return tanh_of(x);
  } else if constexpr (A == BiasAct::Sigmoid) {
    return sigmoid(x);
  } else if constexpr (A == BiasAct::Elu) {
    return select(x < zero, expm1_of(x), x);
  } else if constexpr (A == BiasAct::Selu) {
    return select(x < zero, V(T(kSeluScale * kSeluAlpha)) * expm1_of(x), V(T(kSeluScale)) * x);
  } else if constexpr (A == BiasAct::Softplus) {
    return select(x > zero, x, zero) + log1p_unit(x.abs().neg().exp());
  } else {
    return x * sigmoid(x); // swish
  }
}

// swish's f' (Order 1) or f'' (Order 2) from x and s = sigmoid(x).
template <int Order, typename V>
inline V swish_derivative(const V& x, const V& s) {
  const V one(1);
  if constexpr (Order == 1) {
    return s * (one + x * (one - s));
  } else {
    return s * (one - s) * (V(2) + x * (one - V(2) * s));
  }
}

// f' or f'' from y = f(x) (bias_act_math::derivative) for every act but swish.
template <BiasAct A, int Order, typename V>
inline V derivative_from_y(const V& y, const V& alpha) {
  static_assert(A != BiasAct::Swish, "bias_act: swish's derivative reads x (swish_derivative)");
  using T = typename V::value_type;
  const V zero(0), one(1);
  if constexpr (A == BiasAct::Linear) {
    return Order == 1 ? one : zero;
  } else if constexpr (A == BiasAct::Relu) {
    return Order == 1 ? select(y > zero, one, zero) : zero;
  } else if constexpr (A == BiasAct::Lrelu) {
    return Order == 2 ? zero : select(y > zero, one, alpha);
  } else if constexpr (A == BiasAct::Tanh) {
    const V d = one - y * y;
    return Order == 1 ? d : V(-2) * y * d;
  } else if constexpr (A == BiasAct::Sigmoid) {
    const V d = y * (one - y);
    return Order == 1 ? d : d * (one - V(2) * y);
  } else if constexpr (A == BiasAct::Elu) {
    return select(y >= zero, Order == 1 ? one : zero, y + one);
  } else if constexpr (A == BiasAct::Selu) {
    return select(y >= zero, Order == 1 ? V(T(kSeluScale)) : zero, y + V(T(kSeluScale * kSeluAlpha)));
  } else {
    const V d = expm1_of(y.neg()).neg(); // softplus: sigmoid(x) = 1 - e^-y
    return Order == 1 ? d : y.neg().exp() * d;
  }
}

// The scalars of a call, as vectors.
template <typename V>
struct Consts {
  V alpha, gain, clamp, neg_clamp, clamp_y, neg_clamp_y;
  bool has_clamp;
  bool gain_is_zero;

  Consts(const BiasActParams& p, double clamp_y_value) {
    using T = typename V::value_type;
    const T c = static_cast<T>(p.clamp), cy = static_cast<T>(clamp_y_value), g = static_cast<T>(p.gain);
    alpha = V(static_cast<T>(p.alpha));
    gain = V(g);
    clamp = V(c);
    neg_clamp = V(-c);
    clamp_y = V(cy);
    neg_clamp_y = V(-cy);
    has_clamp = c >= T(0);
    gain_is_zero = g == T(0);
  }
};

// clamp(f(x + bias) * gain, -clamp, clamp) (bias_act_math::forward_value).
template <BiasAct A, typename V>
inline V forward_value(const V& x, const V& bias, const Consts<V>& k) {
  V y = activate<A>(x + bias, k.alpha) * k.gain;
  if (k.has_clamp) {
    y = select(y < k.neg_clamp, k.neg_clamp, select(y > k.clamp, k.clamp, y));
  }
  return y;
}

// grad * gain * f^(Order)(x + bias), 0 where the forward clamped
// (bias_act_math::backward_value). x: swish; y: every other act, or linear
// with a clamp. Swish computes its sigmoid once, for f' and the clamp test.
template <BiasAct A, int Order, typename V>
inline V backward_value(const V& grad, const V& x, const V& bias, const V& y, const Consts<V>& k) {
  constexpr bool reads_x = uses_x(A);
  V d, unclamped;
  if constexpr (reads_x) {
    const V v = x + bias;
    const V s = sigmoid(v);
    d = swish_derivative<Order>(v, s);
    unclamped = v * s * k.gain; // activate<Swish>(v) * gain
  } else {
    const V yy = k.gain_is_zero ? V(0) : y / k.gain;
    d = derivative_from_y<A, Order>(yy, k.alpha);
    unclamped = y;
  }
  V g = grad * (k.gain * d);
  if (k.has_clamp) {
    const V& limit = reads_x ? k.clamp : k.clamp_y;
    const V& neg_limit = reads_x ? k.neg_clamp : k.neg_clamp_y;
    g = select((unclamped > neg_limit) & (unclamped < limit), g, V(0)); // NaN: 0
  }
  return g;
}

} // namespace bias_act_vec
} // namespace CPU_CAPABILITY
} // namespace kernels
} // namespace mmops

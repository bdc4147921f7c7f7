#pragma once
// bias_act_math.h on ATen's CPU vectors: the same formulas, lane by lane, in
// the same order of operations (selects for its branches, NaN taking the same
// side), for V = at::vec::Vectorized<float> or <double>. Only exp, expm1,
// log1p and tanh differ: ATen's vector versions (SLEEF, within 1 ulp), where
// the scalar code calls std::. Included by bias_act_cpu_simd.cpp alone (its
// names live in the namespace of the build: common/cpu_simd.h).

#include "bias_act/bias_act_math.h"

#include <ATen/cpu/vec/vec.h>

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
    return x.tanh();
  } else if constexpr (A == BiasAct::Sigmoid) {
    return sigmoid(x);
  } else if constexpr (A == BiasAct::Elu) {
    return select(x < zero, x.expm1(), x);
  } else if constexpr (A == BiasAct::Selu) {
    return select(x < zero, V(T(kSeluScale * kSeluAlpha)) * x.expm1(), V(T(kSeluScale)) * x);
  } else if constexpr (A == BiasAct::Softplus) {
    return select(x > zero, x, zero) + x.abs().neg().exp().log1p();
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
    const V d = y.neg().expm1().neg(); // softplus: sigmoid(x) = 1 - e^-y
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
  V d, unclamped;
  if constexpr (uses_x(A)) {
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
    const V& limit = uses_x(A) ? k.clamp : k.clamp_y;
    const V& neg_limit = uses_x(A) ? k.neg_clamp : k.neg_clamp_y;
    g = select((unclamped > neg_limit) & (unclamped < limit), g, V(0)); // NaN: 0
  }
  return g;
}

} // namespace bias_act_vec
} // namespace CPU_CAPABILITY
} // namespace kernels
} // namespace mmops

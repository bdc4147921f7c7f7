#pragma once
// Math of bias_act shared by the CPU and CUDA kernels (no ATen): the
// activations (mmcv's activation_funcs), their first and second derivatives
// and the clamp, per value, in the accumulation type (float for half and
// bfloat16). The derivatives follow mmcv's kernel: swish's from its argument
// x = input + bias; every other activation's from its value f(x), recovered
// as output / gain (so the backward of relu / lrelu reads only the output).

#include "common/host_device_math.h"

#include <c10/macros/Macros.h>

#include <cstdint>
#include <type_traits>

namespace mmops {

// The activations, in mmcv's order (its cuda_idx - 1).
enum class BiasAct : int64_t { Linear, Relu, Lrelu, Tanh, Sigmoid, Elu, Selu, Softplus, Swish };

namespace bias_act_math {

using host_device_math::abs_of;
using host_device_math::exp_of;
using host_device_math::expm1_of;
using host_device_math::log1p_of;
using host_device_math::tanh_of;

constexpr double kSeluScale = 1.0507009873554804934193349852946;
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;

// The derivatives of A read x = input + bias ...
C10_HOST_DEVICE constexpr bool uses_x(BiasAct a) {
  return a == BiasAct::Swish;
}

// ... or y = f(x) (from the output); linear's derivative (1) reads neither.
C10_HOST_DEVICE constexpr bool uses_y(BiasAct a) {
  return a != BiasAct::Swish && a != BiasAct::Linear;
}

// f'' is not 0 almost everywhere (linear, relu and lrelu are piecewise linear).
C10_HOST_DEVICE constexpr bool has_second_derivative(BiasAct a) {
  return a != BiasAct::Linear && a != BiasAct::Relu && a != BiasAct::Lrelu;
}

template <typename T>
C10_HOST_DEVICE inline T sigmoid(T x) {
  return T(1) / (T(1) + exp_of(-x)); // exp overflows to inf for x << 0: 0, no NaN
}

// f(x); alpha is lrelu's negative slope (the others ignore it). NaN propagates.
template <BiasAct A, typename T>
C10_HOST_DEVICE inline T activate(T x, T alpha) {
  if constexpr (A == BiasAct::Linear) {
    return x;
  } else if constexpr (A == BiasAct::Relu) {
    return x < T(0) ? T(0) : x;
  } else if constexpr (A == BiasAct::Lrelu) {
    return x < T(0) ? x * alpha : x;
  } else if constexpr (A == BiasAct::Tanh) {
    return tanh_of(x);
  } else if constexpr (A == BiasAct::Sigmoid) {
    return sigmoid(x);
  } else if constexpr (A == BiasAct::Elu) {
    return x < T(0) ? expm1_of(x) : x;
  } else if constexpr (A == BiasAct::Selu) {
    return x < T(0) ? T(kSeluScale * kSeluAlpha) * expm1_of(x) : T(kSeluScale) * x;
  } else if constexpr (A == BiasAct::Softplus) {
    return (x > T(0) ? x : T(0)) + log1p_of(exp_of(-abs_of(x))); // log(1 + e^x) without overflow
  } else {
    return x * sigmoid(x); // swish
  }
}

// f'(x) (Order 1) or f''(x) (Order 2), from x for swish and from y = f(x) for
// the others (mmcv's rules, kinks included: relu 0 and lrelu alpha where
// y <= 0; elu and selu their right derivative at 0).
template <BiasAct A, int Order, typename T>
C10_HOST_DEVICE inline T derivative(T x, T y, T alpha) {
  static_assert(Order == 1 || Order == 2, "bias_act: the first or second derivative");
  if constexpr (A == BiasAct::Linear) {
    return Order == 1 ? T(1) : T(0);
  } else if constexpr (A == BiasAct::Relu) {
    return Order == 1 && y > T(0) ? T(1) : T(0);
  } else if constexpr (A == BiasAct::Lrelu) {
    return Order == 2 ? T(0) : (y > T(0) ? T(1) : alpha);
  } else if constexpr (A == BiasAct::Tanh) {
    const T d = T(1) - y * y;
    return Order == 1 ? d : T(-2) * y * d;
  } else if constexpr (A == BiasAct::Sigmoid) {
    const T d = y * (T(1) - y);
    return Order == 1 ? d : d * (T(1) - T(2) * y);
  } else if constexpr (A == BiasAct::Elu) {
    return y >= T(0) ? T(Order == 1 ? 1 : 0) : y + T(1);
  } else if constexpr (A == BiasAct::Selu) {
    return y >= T(0) ? T(Order == 1 ? kSeluScale : 0) : y + T(kSeluScale * kSeluAlpha);
  } else if constexpr (A == BiasAct::Softplus) {
    const T d = -expm1_of(-y); // sigmoid(x) = 1 - e^-y, without cancellation for small y
    return Order == 1 ? d : exp_of(-y) * d;
  } else {
    const T s = sigmoid(x); // swish: f' = s (1 + x (1 - s)), f'' = s (1 - s) (2 + x (1 - 2 s))
    return Order == 1 ? s * (T(1) + x * (T(1) - s)) : s * (T(1) - s) * (T(2) + x * (T(1) - T(2) * s));
  }
}

// The forward value: clamp(f(x + bias) * gain, -clamp, clamp), the clamp only
// where clamp >= 0 (NaN stays NaN, as torch.clamp).
template <BiasAct A, typename T>
C10_HOST_DEVICE inline T forward_value(T x, T bias, T alpha, T gain, T clamp) {
  T y = activate<A>(x + bias, alpha) * gain;
  if (clamp >= T(0)) {
    y = y < -clamp ? -clamp : (y > clamp ? clamp : y);
  }
  return y;
}

// The gradient of x for grad: grad * gain * f^(Order)(x + bias), 0 where the
// forward clamped. Where that was is read from the output y (its stored value
// against clamp_y, clamp rounded to the output's dtype: |y| >= clamp_y), or,
// for swish, recomputed from x + bias. y is the stored output (uses_y, or
// linear with a clamp); yy = y / gain (0 for a gain of 0, as mmcv).
template <BiasAct A, int Order, typename T>
C10_HOST_DEVICE inline T backward_value(T grad, T x, T bias, T y, T alpha, T gain, T clamp, T clamp_y) {
  const T v = x + bias;
  const T yy = gain != T(0) ? y / gain : T(0);
  T g = grad * (gain * derivative<A, Order>(v, yy, alpha));
  if (clamp >= T(0)) {
    const T unclamped = uses_x(A) ? activate<A>(v, alpha) * gain : y;
    const T limit = uses_x(A) ? clamp : clamp_y;
    g = unclamped > -limit && unclamped < limit ? g : T(0); // NaN: 0
  }
  return g;
}

} // namespace bias_act_math

// Calls f(std::integral_constant<BiasAct, A>{}) for the runtime act A (one
// instantiation of a kernel per activation, as mmcv's).
template <typename F>
void with_act(BiasAct act, F&& f) {
  switch (act) {
#define MMOPS_BIAS_ACT_CASE(name)                        \
  case BiasAct::name:                                    \
    f(std::integral_constant<BiasAct, BiasAct::name>{}); \
    break;
    MMOPS_BIAS_ACT_CASE(Linear)
    MMOPS_BIAS_ACT_CASE(Relu)
    MMOPS_BIAS_ACT_CASE(Lrelu)
    MMOPS_BIAS_ACT_CASE(Tanh)
    MMOPS_BIAS_ACT_CASE(Sigmoid)
    MMOPS_BIAS_ACT_CASE(Elu)
    MMOPS_BIAS_ACT_CASE(Selu)
    MMOPS_BIAS_ACT_CASE(Softplus)
    MMOPS_BIAS_ACT_CASE(Swish)
#undef MMOPS_BIAS_ACT_CASE
  }
}

// What the kernels need (the validation fills it).
struct BiasActParams {
  BiasAct act = BiasAct::Linear;
  int64_t dim = 1; // bias's dim of input (non-negative; meaningful with a bias)
  double alpha = 0.0;
  double gain = 1.0;
  double clamp = -1.0; // < 0: no clamp
  int64_t order = 1;   // the backward's derivative (1 or 2)
};

} // namespace mmops

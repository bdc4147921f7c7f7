#pragma once
// Focal loss math, shared by the CPU and CUDA kernels. T is the compute type
// (float for float/half/bfloat16, double for double).
//
// Sigmoid focal loss (mmcv), per element (n, c) of logits x with t = target[n]:
//   p = sigmoid(x);  c == t:  -alpha       * (1 - p)^gamma * log(p)
//                    c != t:  -(1 - alpha) * p^gamma       * log(1 - p)
// times the class weight weight[t] when given (t == C, background: weight 1).
// Softmax focal loss (mmcv), per row n with p = softmax(x[n])[t]:
//   -alpha * (1 - p)^gamma * log(p), times weight[t] when given.
// log(p) and log(1 - p) are computed from the logits (log-sigmoid, log-softmax),
// not as log(max(p, FLT_MIN)) as mmcv does: the same values unless p < 1e-38,
// where mmcv's loss saturates and these do not.

#include <c10/macros/Macros.h>

#include "common/host_device_math.h"

#include <cmath>
#include <cstdint>

namespace mmops {
namespace focal_loss_math {

enum class Reduction { None = 0, Mean = 1, Sum = 2 };

using host_device_math::exp_of;
using host_device_math::log1p_of;
using host_device_math::log_of;
using host_device_math::pow_of;

// base^gamma with the common exponents done by multiplication.
template <typename T>
C10_HOST_DEVICE inline T power(T base, T gamma) {
  if (gamma == T(2)) {
    return base * base;
  }
  if (gamma == T(1)) {
    return base;
  }
  if (gamma == T(0)) {
    return T(1);
  }
  return pow_of(base, gamma);
}

// sigmoid(x), sigmoid(-x) = 1 - sigmoid(x) and their logs, from one exp and
// one log1p, accurate for large |x|.
template <typename T>
struct SigmoidParts {
  T p, q;         // sigmoid(x), sigmoid(-x)
  T log_p, log_q; // their logs
};

// From e = exp(-|x|) and l = log1p(e), computed by the caller (the CPU kernel
// takes them from ATen's vectorised exp / log1p).
// Both signs' values are computed, then selected: no branch on the sign (which
// random logits mispredict half the time on a CPU), and CPU loops over logits
// vectorise.
template <typename T>
C10_HOST_DEVICE inline SigmoidParts<T> sigmoid_parts(T x, T e, T l) {
  const T inv = T(1) / (T(1) + e);
  const T e_inv = e * inv;
  const T minus_l = -l, x_minus_l = x - l, minus_x_minus_l = -x - l;
  const bool nonnegative = x >= T(0);
  SigmoidParts<T> s;
  s.p = nonnegative ? inv : e_inv;
  s.q = nonnegative ? e_inv : inv;
  s.log_p = nonnegative ? minus_l : x_minus_l;
  s.log_q = nonnegative ? minus_x_minus_l : minus_l;
  return s;
}

template <typename T>
C10_HOST_DEVICE inline SigmoidParts<T> sigmoid_parts(T x) {
  const T e = exp_of(x >= T(0) ? -x : x); // exp(-|x|)
  return sigmoid_parts(x, e, log1p_of(e));
}

// Loss of one logit; `positive` when its class is the row's target.
template <typename T>
C10_HOST_DEVICE inline T sigmoid_focal_loss(const SigmoidParts<T>& s, bool positive, T gamma, T alpha) {
  if (positive) {
    return -alpha * power(s.q, gamma) * s.log_p;
  }
  return -(T(1) - alpha) * power(s.p, gamma) * s.log_q;
}

template <typename T>
C10_HOST_DEVICE inline T sigmoid_focal_loss(T x, bool positive, T gamma, T alpha) {
  return sigmoid_focal_loss(sigmoid_parts(x), positive, gamma, alpha);
}

// d loss / d x of one logit.
//   positive: -alpha * (1 - p)^gamma * ((1 - p) - gamma * p * log(p))
//   negative: -(1 - alpha) * p^gamma * (gamma * (1 - p) * log(1 - p) - p)
template <typename T>
C10_HOST_DEVICE inline T sigmoid_focal_grad(const SigmoidParts<T>& s, bool positive, T gamma, T alpha) {
  if (positive) {
    return -alpha * power(s.q, gamma) * (s.q - gamma * s.p * s.log_p);
  }
  return -(T(1) - alpha) * power(s.p, gamma) * (gamma * s.q * s.log_q - s.p);
}

template <typename T>
C10_HOST_DEVICE inline T sigmoid_focal_grad(T x, bool positive, T gamma, T alpha) {
  return sigmoid_focal_grad(sigmoid_parts(x), positive, gamma, alpha);
}

// Softmax focal loss of one row from its target's log-probability.
template <typename T>
C10_HOST_DEVICE inline T softmax_focal_loss(T log_p, T gamma, T alpha) {
  const T p = exp_of(log_p);
  return -alpha * power(T(1) - p, gamma) * log_p;
}

// d loss / d log-softmax-input factor: d loss / d x_c = factor * ([c == t] - p_c), with
//   factor = alpha * (-(1 - p)^gamma + gamma * (1 - p)^(gamma - 1) * p * log(p)).
// The second term's limit at p = 1 is 0 (also for gamma < 1).
template <typename T>
C10_HOST_DEVICE inline T softmax_focal_factor(T log_p, T gamma, T alpha) {
  const T p = exp_of(log_p);
  const T q = T(1) - p;
  const T second = (gamma == T(0) || !(q > T(0))) ? T(0) : gamma * power(q, gamma - T(1)) * p * log_p;
  return alpha * (-power(q, gamma) + second);
}

// Class ids: sigmoid takes [0, C] (C = background), softmax [0, C).
C10_HOST_DEVICE inline bool valid_sigmoid_target(int64_t t, int64_t classes) {
  return t >= 0 && t <= classes;
}

C10_HOST_DEVICE inline bool valid_softmax_target(int64_t t, int64_t classes) {
  return t >= 0 && t < classes;
}

} // namespace focal_loss_math
} // namespace mmops

// CPU kernels of the focal losses: parallel over rows. Reductions sum fixed
// chunks of rows in parallel (double), then the chunk sums in order, so the
// result does not depend on the number of threads. The transcendental parts
// come from ATen's vectorised kernels (sigmoid: exp(-|x|) and its log1p;
// softmax: the rows' log-softmax, or softmax for the gradient); the focal terms
// are computed here.

#include "focal_loss/focal_loss_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/log1p.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/softmax.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using namespace focal_loss_math;

constexpr int64_t kChunkRows = 256;

// The sum of row_loss(n) over all rows, scaled for the reduction, as a 0-d
// tensor: fixed chunks of rows are summed in parallel (double), then the chunk
// sums in chunk order.
template <typename RowLoss>
at::Tensor reduce_rows(const at::Tensor& input, const FocalLossParams& p, RowLoss&& row_loss) {
  const int64_t rows = input.size(0);
  const int64_t chunks = (rows + kChunkRows - 1) / kChunkRows;
  std::vector<double> sums(chunks, 0.0);
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      double s = 0.0;
      for (int64_t n = i * kChunkRows; n < std::min(rows, (i + 1) * kChunkRows); ++n) {
        s += static_cast<double>(row_loss(n));
      }
      sums[i] = s;
    }
  });
  double total = 0.0;
  for (double s : sums) {
    total += s;
  }
  return at::scalar_tensor(total * reduction_scale(p, rows), input.options());
}

// One call's (contiguous) tensors as pointers, and the loss parameters in acc_t.
template <typename scalar_t>
struct FocalRows {
  using acc_t = at::opmath_type<scalar_t>;
  int64_t rows, classes;
  const scalar_t* x; // logits [N, C]
  const int64_t* t;  // class ids [N]
  const scalar_t* w; // class weights [C] or null
  acc_t gamma, alpha;

  FocalRows(const FocalInputs& in, const FocalLossParams& p)
      : rows(in.input.size(0)),
        classes(in.input.size(1)),
        x(in.input.const_data_ptr<scalar_t>()),
        t(in.target.const_data_ptr<int64_t>()),
        w(in.weight_data<scalar_t>()),
        gamma(static_cast<acc_t>(p.gamma)),
        alpha(static_cast<acc_t>(p.alpha)) {}

  // The weight of a row with a valid class id tn: its class weight; 1 without
  // weights and for the sigmoid loss' background id tn == C.
  acc_t class_weight(int64_t tn) const { return (w && tn < classes) ? static_cast<acc_t>(w[tn]) : acc_t(1); }
};

// exp(-|x|) and log1p of it for every logit, in the compute type, from ATen's
// vectorised kernels: the transcendental part of sigmoid_parts (the rest is
// a few arithmetic operations per logit).
template <typename acc_t>
struct SigmoidTerms {
  at::Tensor exp_neg_abs, log1p_exp;
  const acc_t* e;
  const acc_t* l;

  explicit SigmoidTerms(const at::Tensor& input)
      : exp_neg_abs(at::abs(input.to(at::toOpMathType(input.scalar_type()))).neg_().exp_().contiguous()),
        log1p_exp(at::log1p(exp_neg_abs).contiguous()),
        e(exp_neg_abs.const_data_ptr<acc_t>()),
        l(log1p_exp.const_data_ptr<acc_t>()) {}

  SigmoidParts<acc_t> parts(acc_t x, int64_t i) const { return sigmoid_parts(x, e[i], l[i]); }
};

// Logits are processed a row block of up to kClassBlock classes at a time:
// every logit's term as a negative (its class is not the row's), a loop the
// compiler vectorises, then the target's own term in its place.
constexpr int64_t kClassBlock = 256;

// Calls body(two) with two = std::true_type when gamma is 2 (the usual value),
// else std::false_type; the loops take gamma as kGamma(two, gamma), a constant
// 2 in the first case, so that power() folds to a product and they vectorise.
template <typename acc_t, typename Body>
void with_gamma(acc_t gamma, Body&& body) {
  if (gamma == acc_t(2)) {
    body(std::true_type{});
  } else {
    body(std::false_type{});
  }
}

template <typename Two, typename acc_t>
constexpr acc_t gamma_of(Two, acc_t gamma) {
  return Two::value ? acc_t(2) : gamma;
}

// Sum of v[0, n) in a fixed order, with 8 partial sums (vectorised).
template <typename acc_t>
acc_t fixed_order_sum(const acc_t* v, int64_t n) {
  acc_t part[8] = {};
  int64_t c = 0;
  for (; c + 8 <= n; c += 8) {
    for (int j = 0; j < 8; ++j) {
      part[j] += v[c + j];
    }
  }
  acc_t sum = 0;
  for (; c < n; ++c) {
    sum += v[c];
  }
  for (int j = 0; j < 8; ++j) {
    sum += part[j];
  }
  return sum;
}

// out[c - c0] = term(parts of logit (n, c), c is the target) for c in [c0, c1).
template <typename scalar_t, typename acc_t, typename Term>
void block_terms(const FocalRows<scalar_t>& r, const SigmoidTerms<acc_t>& terms, int64_t n, int64_t c0, int64_t c1,
                 Term&& term, acc_t* out) {
  const int64_t base = n * r.classes;
  for (int64_t c = c0; c < c1; ++c) {
    out[c - c0] = term(terms.parts(static_cast<acc_t>(r.x[base + c]), base + c), false);
  }
  const int64_t tn = r.t[n];
  if (tn >= c0 && tn < c1) {
    out[tn - c0] = term(terms.parts(static_cast<acc_t>(r.x[base + tn]), base + tn), true);
  }
}

template <typename scalar_t>
at::Tensor sigmoid_forward(const FocalInputs& in, const FocalLossParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const FocalRows<scalar_t> r(in, p);
  const SigmoidTerms<acc_t> terms(in.input);
  at::Tensor out;
  with_gamma(r.gamma, [&](auto two) {
    auto loss = [&](const SigmoidParts<acc_t>& s, bool positive) {
      return sigmoid_focal_loss(s, positive, gamma_of(two, r.gamma), r.alpha);
    };
    if (p.reduction == Reduction::None) {
      out = at::empty({r.rows, r.classes}, in.input.options());
      scalar_t* o = out.mutable_data_ptr<scalar_t>();
      at::parallel_for(0, r.rows, kChunkRows, [&](int64_t begin, int64_t end) {
        acc_t block[kClassBlock];
        for (int64_t n = begin; n < end; ++n) {
          const int64_t tn = r.t[n];
          const acc_t wn = valid_sigmoid_target(tn, r.classes) ? r.class_weight(tn) : acc_t(0);
          for (int64_t c0 = 0; c0 < r.classes; c0 += kClassBlock) {
            const int64_t c1 = std::min(r.classes, c0 + kClassBlock);
            block_terms(r, terms, n, c0, c1, loss, block);
            scalar_t* on = o + n * r.classes;
            for (int64_t c = c0; c < c1; ++c) { // wn = 0 for an invalid id: its row is zeros
              on[c] = static_cast<scalar_t>(wn == acc_t(0) ? acc_t(0) : block[c - c0] * wn);
            }
          }
        }
      });
      return;
    }
    out = reduce_rows(in.input, p, [&](int64_t n) -> acc_t {
      const int64_t tn = r.t[n];
      if (!valid_sigmoid_target(tn, r.classes)) {
        return acc_t(0);
      }
      acc_t block[kClassBlock];
      acc_t row = acc_t(0);
      for (int64_t c0 = 0; c0 < r.classes; c0 += kClassBlock) {
        const int64_t c1 = std::min(r.classes, c0 + kClassBlock);
        block_terms(r, terms, n, c0, c1, loss, block);
        row += fixed_order_sum(block, c1 - c0);
      }
      return row * r.class_weight(tn);
    });
  });
  return out;
}

// grad_output is [N, C] (none) or a 0-d tensor.
template <typename scalar_t>
at::Tensor sigmoid_backward(const FocalInputs& in, const FocalLossParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const FocalRows<scalar_t> r(in, p);
  const SigmoidTerms<acc_t> terms(in.input);
  at::Tensor grad = at::empty({r.rows, r.classes}, in.input.options());
  const scalar_t* go = in.grad_output.const_data_ptr<scalar_t>();
  const bool elementwise = p.reduction == Reduction::None;
  const acc_t scale = static_cast<acc_t>(reduction_scale(p, r.rows));
  scalar_t* g = grad.mutable_data_ptr<scalar_t>();
  with_gamma(r.gamma, [&](auto two) {
    auto derivative = [&](const SigmoidParts<acc_t>& s, bool positive) {
      return sigmoid_focal_grad(s, positive, gamma_of(two, r.gamma), r.alpha);
    };
    at::parallel_for(0, r.rows, kChunkRows, [&](int64_t begin, int64_t end) {
      acc_t block[kClassBlock];
      for (int64_t n = begin; n < end; ++n) {
        const int64_t tn = r.t[n];
        const bool valid = valid_sigmoid_target(tn, r.classes);
        const acc_t wn = valid ? r.class_weight(tn) * scale : acc_t(0);
        scalar_t* gn = g + n * r.classes;
        if (!valid) {
          std::fill(gn, gn + r.classes, scalar_t(0));
          continue;
        }
        for (int64_t c0 = 0; c0 < r.classes; c0 += kClassBlock) {
          const int64_t c1 = std::min(r.classes, c0 + kClassBlock);
          block_terms(r, terms, n, c0, c1, derivative, block);
          if (elementwise) {
            const scalar_t* gon = go + n * r.classes;
            for (int64_t c = c0; c < c1; ++c) {
              gn[c] = static_cast<scalar_t>(block[c - c0] * wn * static_cast<acc_t>(gon[c]));
            }
          } else {
            const acc_t factor = wn * static_cast<acc_t>(go[0]);
            for (int64_t c = c0; c < c1; ++c) {
              gn[c] = static_cast<scalar_t>(block[c - c0] * factor);
            }
          }
        }
      }
    });
  });
  return grad;
}

// The log-softmax of every row in the compute type: ATen's vectorised CPU
// kernel, which a scalar exp per logit cannot match (the focal terms below
// are a handful of operations a row).
inline at::Tensor row_log_softmax(const at::Tensor& input) {
  return at::log_softmax(input, 1, at::toOpMathType(input.scalar_type())).contiguous();
}

template <typename scalar_t>
at::Tensor softmax_forward(const FocalInputs& in, const FocalLossParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const FocalRows<scalar_t> r(in, p);
  const at::Tensor log_probs = row_log_softmax(in.input);
  const acc_t* lp = log_probs.const_data_ptr<acc_t>();
  auto row_loss = [&](int64_t n) -> acc_t {
    const int64_t tn = r.t[n];
    if (!valid_softmax_target(tn, r.classes)) {
      return acc_t(0);
    }
    return softmax_focal_loss(lp[n * r.classes + tn], r.gamma, r.alpha) * r.class_weight(tn);
  };
  if (p.reduction == Reduction::None) {
    at::Tensor out = at::empty({r.rows}, in.input.options());
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, r.rows, kChunkRows, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        o[n] = static_cast<scalar_t>(row_loss(n));
      }
    });
    return out;
  }
  return reduce_rows(in.input, p, row_loss);
}

// log p[n, t] from row n's logits, for the rows whose p_t underflowed in the
// softmax: max, then the sum of exp(x - max), in acc_t.
template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
acc_t row_log_prob(const scalar_t* x, int64_t classes, int64_t t) {
  acc_t top = static_cast<acc_t>(x[0]);
  for (int64_t c = 1; c < classes; ++c) {
    top = std::max(top, static_cast<acc_t>(x[c]));
  }
  acc_t sum = 0;
  for (int64_t c = 0; c < classes; ++c) {
    sum += std::exp(static_cast<acc_t>(x[c]) - top);
  }
  return static_cast<acc_t>(x[t]) - top - std::log(sum);
}

// d loss / d x[n, c] = factor[n] * ([c == t] - p[n, c]). One vectorised softmax
// gives p (a pass fewer than log-softmax and its exp); the factor needs only
// log p_t: log(p_t), or from the row's logits where p_t is below the smallest
// normal number (log would lose digits or give -inf).
template <typename scalar_t>
at::Tensor softmax_backward(const FocalInputs& in, const FocalLossParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const FocalRows<scalar_t> r(in, p);
  at::Tensor grad = at::empty({r.rows, r.classes}, in.input.options());
  const at::Tensor probs = at::softmax(in.input, 1, at::toOpMathType(in.input.scalar_type())).contiguous();
  const acc_t* pr = probs.const_data_ptr<acc_t>();
  const scalar_t* go = in.grad_output.const_data_ptr<scalar_t>();
  const bool elementwise = p.reduction == Reduction::None;
  const acc_t scale = static_cast<acc_t>(reduction_scale(p, r.rows));
  scalar_t* g = grad.mutable_data_ptr<scalar_t>();
  at::parallel_for(0, r.rows, kChunkRows, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const int64_t tn = r.t[n];
      scalar_t* gr = g + n * r.classes;
      if (!valid_softmax_target(tn, r.classes)) {
        std::fill(gr, gr + r.classes, scalar_t(0));
        continue;
      }
      const acc_t* pn = pr + n * r.classes;
      const acc_t log_p = pn[tn] >= std::numeric_limits<acc_t>::min()
                              ? std::log(pn[tn])
                              : row_log_prob<scalar_t>(r.x + n * r.classes, r.classes, tn);
      const acc_t factor = softmax_focal_factor(log_p, r.gamma, r.alpha) * r.class_weight(tn) *
                           static_cast<acc_t>(go[elementwise ? n : 0]) * scale;
      for (int64_t c = 0; c < r.classes; ++c) {
        gr[c] = static_cast<scalar_t>(-factor * pn[c]);
      }
      gr[tn] = static_cast<scalar_t>(factor * (acc_t(1) - pn[tn]));
    }
  });
  return grad;
}

} // namespace

#define MMOPS_FOCAL_DISPATCH(dtype, name, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, name, __VA_ARGS__)

at::Tensor focal_loss_forward_cpu(const at::Tensor& input, const at::Tensor& target, const at::Tensor& weight,
                                  const FocalLossParams& p) {
  const FocalInputs in(input, target, weight);
  const bool sigmoid = p.kind == FocalKind::Sigmoid;
  return MMOPS_FOCAL_DISPATCH(input.scalar_type(), "mmops::focal_loss (CPU)", [&] {
    return sigmoid ? sigmoid_forward<scalar_t>(in, p) : softmax_forward<scalar_t>(in, p);
  });
}

at::Tensor focal_loss_backward_cpu(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& target,
                                   const at::Tensor& weight, const FocalLossParams& p) {
  const FocalInputs in(input, target, weight, grad_output);
  const bool sigmoid = p.kind == FocalKind::Sigmoid;
  return MMOPS_FOCAL_DISPATCH(input.scalar_type(), "mmops::focal_loss backward (CPU)", [&] {
    return sigmoid ? sigmoid_backward<scalar_t>(in, p) : softmax_backward<scalar_t>(in, p);
  });
}

} // namespace kernels
} // namespace mmops

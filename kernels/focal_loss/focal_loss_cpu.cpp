// CPU kernels of the focal losses: parallel over rows. Reductions sum fixed
// chunks of rows in parallel (double), then the chunk sums in order, so the
// result does not depend on the number of threads. The transcendental parts
// come from ATen's vectorised kernels (sigmoid: exp(-|x|) and its log1p;
// softmax: the rows' log-softmax); the focal terms are computed here.

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

#include <algorithm>
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
      : exp_neg_abs(at::exp(at::abs(input.to(at::toOpMathType(input.scalar_type()))).neg_()).contiguous()),
        log1p_exp(at::log1p(exp_neg_abs).contiguous()),
        e(exp_neg_abs.const_data_ptr<acc_t>()),
        l(log1p_exp.const_data_ptr<acc_t>()) {}

  SigmoidParts<acc_t> parts(acc_t x, int64_t i) const { return sigmoid_parts(x, e[i], l[i]); }
};

template <typename scalar_t>
at::Tensor sigmoid_forward(const FocalInputs& in, const FocalLossParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const FocalRows<scalar_t> r(in, p);
  const SigmoidTerms<acc_t> terms(in.input);
  auto loss = [&](int64_t i, bool positive) {
    return sigmoid_focal_loss(terms.parts(static_cast<acc_t>(r.x[i]), i), positive, r.gamma, r.alpha);
  };
  if (p.reduction == Reduction::None) {
    at::Tensor out = at::empty({r.rows, r.classes}, in.input.options());
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, r.rows, kChunkRows, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        const int64_t tn = r.t[n];
        const bool valid = valid_sigmoid_target(tn, r.classes);
        const acc_t wn = valid ? r.class_weight(tn) : acc_t(0);
        for (int64_t c = 0; c < r.classes; ++c) {
          const int64_t i = n * r.classes + c;
          o[i] = static_cast<scalar_t>(valid ? loss(i, tn == c) * wn : acc_t(0));
        }
      }
    });
    return out;
  }
  return reduce_rows(in.input, p, [&](int64_t n) -> acc_t {
    const int64_t tn = r.t[n];
    if (!valid_sigmoid_target(tn, r.classes)) {
      return acc_t(0);
    }
    acc_t row = acc_t(0);
    for (int64_t c = 0; c < r.classes; ++c) {
      row += loss(n * r.classes + c, tn == c);
    }
    return row * r.class_weight(tn);
  });
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
  at::parallel_for(0, r.rows, kChunkRows, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const int64_t tn = r.t[n];
      const bool valid = valid_sigmoid_target(tn, r.classes);
      const acc_t wn = valid ? r.class_weight(tn) : acc_t(0);
      for (int64_t c = 0; c < r.classes; ++c) {
        const int64_t i = n * r.classes + c;
        const acc_t gout = static_cast<acc_t>(go[elementwise ? i : 0]);
        const acc_t d =
            valid ? sigmoid_focal_grad(terms.parts(static_cast<acc_t>(r.x[i]), i), tn == c, r.gamma, r.alpha) * wn *
                        gout * scale
                  : acc_t(0);
        g[i] = static_cast<scalar_t>(d);
      }
    }
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

// d loss / d x[n, c] = factor[n] * ([c == t] - p[n, c]).
template <typename scalar_t>
at::Tensor softmax_backward(const FocalInputs& in, const FocalLossParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const FocalRows<scalar_t> r(in, p);
  at::Tensor grad = at::empty({r.rows, r.classes}, in.input.options());
  const at::Tensor log_probs = row_log_softmax(in.input);
  const at::Tensor probs = at::exp(log_probs); // vectorised too
  const acc_t* lp = log_probs.const_data_ptr<acc_t>();
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
      const acc_t log_p = lp[n * r.classes + tn];
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

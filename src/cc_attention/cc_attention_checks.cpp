// Argument validation of ca_weight and ca_map, on every backend (the meta
// kernels run it too, so fake tensors raise the same errors).

#include "cc_attention/cc_attention_ops.h"

#include "common/check_utils.h"

#include <c10/core/SymInt.h>

namespace mmops {
namespace detail {
namespace {

// A 4-D floating point map [N, C, H, W] (the first tensor argument, the reference of the others).
void check_map(const char* op, const char* name, const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 4, op, "expected ", name, " to be a 4-D tensor [N, C, H, W], but got a ", x.dim(),
              "-D tensor of shape ", shape_of(x));
  TORCH_CHECK(at::isFloatingType(x.scalar_type()), op, "expected ", name, " to have a floating point dtype, but got ",
              x.scalar_type());
}

// Another 4-D tensor of ref's dtype and device.
void check_like(const char* op, const char* name, const at::Tensor& x, const char* ref_name, const at::Tensor& ref) {
  TORCH_CHECK(x.dim() == 4, op, "expected ", name, " to be a 4-D tensor, but got a ", x.dim(), "-D tensor of shape ",
              shape_of(x));
  TORCH_CHECK(x.scalar_type() == ref.scalar_type(), op, "expected ", name, " to have the dtype of ", ref_name, " (",
              ref.scalar_type(), "), but got ", x.scalar_type());
  TORCH_CHECK(x.device() == ref.device(), op, "expected ", name, " on the device of ", ref_name, " (", ref.device(),
              "), but got ", x.device());
}

// x of exactly ref's shape.
void check_same_shape(const char* op, const char* name, const at::Tensor& x, const char* ref_name,
                      const at::Tensor& ref) {
  c10::SymBool same = x.sym_size(0).sym_eq(ref.sym_size(0));
  for (int64_t d = 1; d < 4; ++d) {
    same = same.sym_and(x.sym_size(d).sym_eq(ref.sym_size(d)));
  }
  TORCH_SYM_CHECK(same, op, "expected ", name, " of the shape of ", ref_name, " ", shape_of(ref), ", but got ",
                  shape_of(x));
}

// N, C, H, W of the map x (H + W >= 1: a criss-cross of L = H + W - 1 >= 0 pixels); the
// energies' element count N * L * H * W must fit in int64 (checked once the sizes are known).
CcAttentionParams params_of(const char* op, const char* name, const at::Tensor& x) {
  TORCH_SYM_CHECK((x.sym_size(2) + x.sym_size(3)).sym_ge(1), op, "expected ", name,
                  " to have H + W >= 1 (criss-crosses of H + W - 1 pixels), but got shape ", shape_of(x));
  CcAttentionParams p{};
  p.batch = int_or_unknown(x.sym_size(0));
  p.channels = int_or_unknown(x.sym_size(1));
  p.height = int_or_unknown(x.sym_size(2));
  p.width = int_or_unknown(x.sym_size(3));
  if (p.batch >= 0 && p.height >= 0 && p.width >= 0) {
    checked_product(op, "the energies' element count N * (H + W - 1) * H * W",
                    {p.batch, p.height + p.width - 1, p.height, p.width});
  }
  return p;
}

} // namespace

CcAttentionParams check_ca_weight(const at::Tensor& t, const at::Tensor& f) {
  check_map(kCaWeightOp, "t", t);
  check_like(kCaWeightOp, "f", f, "t", t);
  check_same_shape(kCaWeightOp, "f", f, "t", t);
  return params_of(kCaWeightOp, "t", t);
}

CcAttentionParams check_ca_weight_backward(const at::Tensor& grad_weight, const at::Tensor& t, const at::Tensor& f) {
  const CcAttentionParams p = check_ca_weight(t, f);
  check_like(kCaWeightOp, "grad_weight", grad_weight, "t", t);
  const c10::SymInt length = t.sym_size(2) + t.sym_size(3) - 1;
  const c10::SymBool shape_ok = grad_weight.sym_size(0)
                                    .sym_eq(t.sym_size(0))
                                    .sym_and(grad_weight.sym_size(1).sym_eq(length))
                                    .sym_and(grad_weight.sym_size(2).sym_eq(t.sym_size(2)))
                                    .sym_and(grad_weight.sym_size(3).sym_eq(t.sym_size(3)));
  TORCH_SYM_CHECK(shape_ok, kCaWeightOp, "expected grad_weight of shape [", t.sym_size(0), ", ", length, ", ",
                  t.sym_size(2), ", ", t.sym_size(3), "] ([N, H + W - 1, H, W] of t of shape ", shape_of(t),
                  "), but got ", shape_of(grad_weight));
  return p;
}

CcAttentionParams check_ca_map(const at::Tensor& weight, const at::Tensor& g) {
  check_map(kCaMapOp, "weight", weight);
  check_like(kCaMapOp, "g", g, "weight", weight);
  const CcAttentionParams p = params_of(kCaMapOp, "g", g);
  const c10::SymInt length = g.sym_size(2) + g.sym_size(3) - 1;
  const c10::SymBool shape_ok = weight.sym_size(0)
                                    .sym_eq(g.sym_size(0))
                                    .sym_and(weight.sym_size(1).sym_eq(length))
                                    .sym_and(weight.sym_size(2).sym_eq(g.sym_size(2)))
                                    .sym_and(weight.sym_size(3).sym_eq(g.sym_size(3)));
  TORCH_SYM_CHECK(shape_ok, kCaMapOp, "expected weight of shape [", g.sym_size(0), ", ", length, ", ", g.sym_size(2),
                  ", ", g.sym_size(3), "] ([N, H + W - 1, H, W] of g of shape ", shape_of(g), "), but got ",
                  shape_of(weight));
  return p;
}

CcAttentionParams check_ca_map_backward(const at::Tensor& grad_out, const at::Tensor& weight, const at::Tensor& g) {
  const CcAttentionParams p = check_ca_map(weight, g);
  check_like(kCaMapOp, "grad_out", grad_out, "g", g);
  check_same_shape(kCaMapOp, "grad_out", grad_out, "g", g);
  return p;
}

} // namespace detail
} // namespace mmops

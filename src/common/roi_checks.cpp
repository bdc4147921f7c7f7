#include "common/roi_checks.h"

#include "common/check_utils.h"
#include "common/index_policy.h"

#include <ATen/ops/select.h>
#include <string>

namespace mmops {
namespace detail {

void check_roi_output_size(const char* op, c10::SymIntArrayRef output_size, const char* name) {
  TORCH_CHECK(output_size.size() == 2, op, "expected ", name, " to hold 2 values (out_h, out_w), but got ",
              output_size.size());
  for (size_t i = 0; i < 2; ++i) {
    TORCH_SYM_CHECK(output_size[i].sym_gt(0), op, name, " values must be positive, but got ", output_size);
    TORCH_SYM_CHECK(output_size[i].sym_le(kMaxRoiOutputSide), op, name, " values must be at most ", kMaxRoiOutputSide,
                    ", but got ", output_size);
  }
}

void check_roi_output_numel(const char* op, const c10::SymInt& rois, const c10::SymInt& channels,
                            c10::SymIntArrayRef output_size) {
  const auto k = rois.maybe_as_int(), c = channels.maybe_as_int();
  const auto h = output_size[0].maybe_as_int(), w = output_size[1].maybe_as_int();
  if (!(k && c && h && w)) {
    return;
  }
  const std::string what = "the output [K, C, out_h, out_w] = [" + std::to_string(*k) + ", " + std::to_string(*c) +
                           ", " + std::to_string(*h) + ", " + std::to_string(*w) +
                           "] (output_size too large): its element count";
  checked_product(op, what.c_str(), {*k, *c, *h, *w});
}

void check_roi_map_shape(const char* op, const std::string& what, const c10::SymInt& n, const c10::SymInt& c,
                         const c10::SymInt& h, const c10::SymInt& w) {
  TORCH_SYM_CHECK(n.sym_ge(0).sym_and(c.sym_ge(0)).sym_and(h.sym_ge(0)).sym_and(w.sym_ge(0)), op, what,
                  " must hold sizes >= 0, but got [", n, ", ", c, ", ", h, ", ", w, "]");
  TORCH_SYM_CHECK(h.sym_le(kMaxRoiMapSide).sym_and(w.sym_le(kMaxRoiMapSide)), op, "expected H and W of ", what,
                  " to be at most 2^31 - 1, but got [", n, ", ", c, ", ", h, ", ", w, "]");
  const auto ni = n.maybe_as_int(), ci = c.maybe_as_int(), hi = h.maybe_as_int(), wi = w.maybe_as_int();
  if (ni && ci && hi && wi) {
    checked_product(op,
                    (what + " = [" + std::to_string(*ni) + ", " + std::to_string(*ci) + ", " + std::to_string(*hi) +
                     ", " + std::to_string(*wi) + "]: its element count")
                        .c_str(),
                    {*ni, *ci, *hi, *wi});
  }
}

void check_rois_tensor(const char* op, const at::Tensor& rois) {
  TORCH_CHECK(rois.dim() == 2 && rois.sym_size(1) == 5, op,
              "expected rois to be a 2-D tensor of shape [K, 5] (batch_index, x1, y1, x2, y2), but got shape ",
              shape_of(rois));
  TORCH_CHECK(at::isFloatingType(rois.scalar_type()), op, "expected rois to have a floating point dtype, but got ",
              rois.scalar_type());
}

void check_rotated_rois_tensor(const char* op, const at::Tensor& rois) {
  TORCH_CHECK(rois.dim() == 2 && rois.sym_size(1) == 6, op,
              "expected rois to be a 2-D tensor of shape [K, 6] (batch_index, cx, cy, w, h, theta), but got shape ",
              shape_of(rois));
  TORCH_CHECK(at::isFloatingType(rois.scalar_type()), op, "expected rois to have a floating point dtype, but got ",
              rois.scalar_type());
}

void check_roi_grad_output(const char* op, const at::Tensor& grad_output, const at::Tensor& rois) {
  TORCH_CHECK(grad_output.dim() == 4, op,
              "expected grad_output to be a 4-D tensor [K, C, out_h, out_w], but got shape ", shape_of(grad_output));
  TORCH_CHECK(rois.scalar_type() == grad_output.scalar_type(), op,
              "expected grad_output and rois to share one floating dtype, but got ", grad_output.scalar_type(), " and ",
              rois.scalar_type());
  TORCH_CHECK(rois.device() == grad_output.device(), op, "expected rois on the device of grad_output (",
              grad_output.device(), "), but got ", rois.device());
  TORCH_SYM_CHECK(grad_output.sym_size(0).sym_eq(rois.sym_size(0)), op, "grad_output has ", grad_output.sym_size(0),
                  " rows but rois has ", rois.sym_size(0));
  TORCH_SYM_CHECK(
      grad_output.sym_size(2).sym_le(kMaxRoiOutputSide).sym_and(grad_output.sym_size(3).sym_le(kMaxRoiOutputSide)), op,
      "expected out_h and out_w of grad_output to be at most ", kMaxRoiOutputSide, " (as output_size), but got shape ",
      shape_of(grad_output));
}

void check_roi_batch_indices(const char* op, const at::Tensor& rois, int64_t batch) {
  if (rois.size(0) == 0 || !should_validate_indices(rois)) {
    return;
  }
  const at::Tensor index = rois.select(1, 0).to(at::kCPU, at::kDouble).contiguous();
  const double* values = index.const_data_ptr<double>();
  for (int64_t k = 0; k < index.numel(); ++k) {
    TORCH_CHECK(values[k] >= 0 && values[k] < static_cast<double>(batch), op,
                "the batch index rois[:, 0] must lie in [0, N) with N = input.size(0) = ", batch, ", but rois[", k,
                ", 0] = ", values[k]);
  }
}

} // namespace detail
} // namespace mmops

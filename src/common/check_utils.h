#pragma once
// Helpers of the argument validation (src/*/*_checks.cpp): TORCH_CHECK
// messages name the argument, what was expected and what was received.

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>

#include <sstream>
#include <string>

namespace mmops {
namespace detail {

// The (symbolic) shape of a tensor as text, e.g. "[2, 5]".
inline std::string shape_of(const at::Tensor& t) {
  std::ostringstream s;
  s << t.sym_sizes();
  return s.str();
}

// rois of the roi pooling ops: a [K, 5] (batch_index, x1, y1, x2, y2)
// floating point tensor.
inline void check_rois_tensor(const char* op, const at::Tensor& rois) {
  TORCH_CHECK(rois.dim() == 2 && rois.sym_size(1) == 5, op,
              "expected rois to be a 2-D tensor of shape [K, 5] (batch_index, x1, y1, x2, y2), but got shape ",
              shape_of(rois));
  TORCH_CHECK(at::isFloatingType(rois.scalar_type()), op,
              "expected rois to have a floating point dtype, but got ", rois.scalar_type());
}

// grad_output of the roi pooling ops' backward: [K, C, out_h, out_w] with the
// dtype, device and row count of rois.
inline void check_roi_grad_output(const char* op, const at::Tensor& grad_output, const at::Tensor& rois) {
  TORCH_CHECK(grad_output.dim() == 4, op,
              "expected grad_output to be a 4-D tensor [K, C, out_h, out_w], but got shape ",
              shape_of(grad_output));
  TORCH_CHECK(rois.scalar_type() == grad_output.scalar_type(), op,
              "expected grad_output and rois to share one floating dtype, but got ",
              grad_output.scalar_type(), " and ", rois.scalar_type());
  TORCH_CHECK(rois.device() == grad_output.device(), op, "expected rois on the device of grad_output (",
              grad_output.device(), "), but got ", rois.device());
  TORCH_SYM_CHECK(grad_output.sym_size(0).sym_eq(rois.sym_size(0)), op,
                  "grad_output has ", grad_output.sym_size(0), " rows but rois has ", rois.sym_size(0));
}

} // namespace detail
} // namespace mmops

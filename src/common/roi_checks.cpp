#include "common/roi_checks.h"

#include "common/check_utils.h"
#include "common/index_policy.h"

#include <ATen/ops/select.h>

namespace mmops {
namespace detail {

void check_rois_tensor(const char* op, const at::Tensor& rois) {
  TORCH_CHECK(rois.dim() == 2 && rois.sym_size(1) == 5, op,
              "expected rois to be a 2-D tensor of shape [K, 5] (batch_index, x1, y1, x2, y2), but got shape ",
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

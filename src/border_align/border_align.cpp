// mmops::border_align: schemas, device entries (CPU/CUDA registration) and the
// public C++ API. Validation is in border_align_checks.cpp, kernels in
// kernels/border_align, the meta functions in border_align_meta.cpp and
// autograd in border_align_autograd.cpp.

#include "border_align/border_align_ops.h"

#include "common/autocast.h"
#include "common/check_utils.h"
#include "common/dispatch.h"

#include <mmops/border_align.h>

#include <torch/library.h>

#include <vector>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m, "border_align(Tensor input, Tensor boxes, int pool_size) -> Tensor");
  // Forward that also returns the winning point of every output (int32 in
  // [0, pool_size], mmcv's argmax_idx) for the backward. Autograd uses it.
  define_op(m,
            "_border_align_forward(Tensor input, Tensor boxes, int pool_size) -> (Tensor output, Tensor argmax_idx)");
  define_op(m,
            "_border_align_backward(Tensor grad_output, Tensor boxes, Tensor argmax_idx, int pool_size, "
            "SymInt[4] input_shape) -> Tensor");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), then the kernel (CPU or CUDA).

template <auto Kernel>
at::Tensor border_align_entry(const at::Tensor& input, const at::Tensor& boxes, int64_t pool_size) {
  const BorderAlignParams p = detail::check_border_align_forward(input, boxes, pool_size);
  return std::get<0>(Kernel(input, boxes, p, /*with_argmax=*/false));
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor> forward_entry(const at::Tensor& input, const at::Tensor& boxes, int64_t pool_size) {
  const BorderAlignParams p = detail::check_border_align_forward(input, boxes, pool_size);
  return Kernel(input, boxes, p, /*with_argmax=*/true);
}

template <auto Kernel>
at::Tensor backward_entry(const at::Tensor& grad_output, const at::Tensor& boxes, const at::Tensor& argmax_idx,
                          int64_t pool_size, c10::SymIntArrayRef input_shape) {
  const BorderAlignParams p =
      detail::check_border_align_backward(grad_output, boxes, argmax_idx, pool_size, input_shape);
  return Kernel(grad_output, boxes, argmax_idx, p);
}

} // namespace

at::Tensor border_align(const at::Tensor& input, const at::Tensor& boxes, int64_t pool_size) {
  static const auto op = detail::op_handle<BorderAlignFn>("mmops::border_align");
  return op.call(input, boxes, pool_size);
}

} // namespace mmops

#define MMOPS_BORDER_ALIGN_ENTRIES(m, device)                                              \
  m.impl("border_align", &border_align_entry<kernels::border_align_forward_##device>);     \
  m.impl("_border_align_forward", &forward_entry<kernels::border_align_forward_##device>); \
  m.impl("_border_align_backward", &backward_entry<kernels::border_align_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_BORDER_ALIGN_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "border_align")

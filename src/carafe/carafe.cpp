// mmops::carafe: schemas, device entries (CPU/CUDA registration) and the
// public C++ API. Validation is in carafe_checks.cpp, kernels in
// kernels/carafe, the meta (shape) functions in carafe_meta.cpp and autograd
// in carafe_autograd.cpp.

#include "carafe/carafe_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/carafe.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m, "carafe(Tensor features, Tensor masks, int kernel_size, int group_size, int scale_factor) -> Tensor");
  define_op(m,
            "_carafe_backward(Tensor grad_output, Tensor features, Tensor masks, int kernel_size, int group_size, "
            "int scale_factor) -> (Tensor grad_features, Tensor grad_masks)");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), then the kernel. No
// index lives in tensor data, so there is no index policy to apply.

template <auto Kernel>
at::Tensor carafe_entry(const at::Tensor& features, const at::Tensor& masks, int64_t kernel_size, int64_t group_size,
                        int64_t scale_factor) {
  return Kernel(features, masks, detail::check_carafe_forward(features, masks, kernel_size, group_size, scale_factor));
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor> backward_entry(const at::Tensor& grad_output, const at::Tensor& features,
                                                  const at::Tensor& masks, int64_t kernel_size, int64_t group_size,
                                                  int64_t scale_factor) {
  const CarafeParams p =
      detail::check_carafe_backward(grad_output, features, masks, kernel_size, group_size, scale_factor);
  return Kernel(grad_output, features, masks, p);
}

} // namespace

at::Tensor carafe(const at::Tensor& features, const at::Tensor& masks, int64_t kernel_size, int64_t group_size,
                  int64_t scale_factor) {
  static const auto op = detail::op_handle<CarafeFn>("mmops::carafe");
  return op.call(features, masks, kernel_size, group_size, scale_factor);
}

} // namespace mmops

#define MMOPS_CARAFE_ENTRIES(m, device)                              \
  m.impl("carafe", &carafe_entry<kernels::carafe_forward_##device>); \
  m.impl("_carafe_backward", &backward_entry<kernels::carafe_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_CARAFE_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "carafe")

#pragma once
// Typed dispatcher handles. Each family declares one alias per schema in its
// <family>_ops.h, e.g.
//   using RoIPoolForwardFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, ...);
// and calls the op through
//   static const auto op = detail::op_handle<RoIPoolForwardFn>("mmops::_roi_pool_forward");
//   op.call(...);
// so the signature is spelled once, next to the schema it mirrors.

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace mmops {
namespace detail {

template <typename Fn>
c10::TypedOperatorHandle<Fn> op_handle(const char* qualified_name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(qualified_name, "").typed<Fn>();
}

// Defines a public op or helper. Every one works under torch.compile and
// torch.export, so every one carries the pt2_compliant tag.
inline void define_op(torch::Library& m, const char* schema) {
  m.def(schema, {at::Tag::pt2_compliant_tag});
}

} // namespace detail
} // namespace mmops

// Registers a family's device entries once for both devices. ENTRIES(m, device)
// is the family's list of `m.impl("<op>", &<entry><kernels::<kernel>_##device>);`
// lines; it is expanded with `cpu` for the CPU dispatch key and, when the CUDA
// kernels are built, with `cuda` for the CUDA one (kernels::<kernel>_cpu / _cuda).
#ifdef MMOPS_WITH_CUDA
#define MMOPS_REGISTER_DEVICE_ENTRIES(ENTRIES) \
  TORCH_LIBRARY_IMPL(mmops, CPU, m) {          \
    using namespace mmops;                     \
    ENTRIES(m, cpu)                            \
  }                                            \
  TORCH_LIBRARY_IMPL(mmops, CUDA, m) {         \
    using namespace mmops;                     \
    ENTRIES(m, cuda)                           \
  }
#else
#define MMOPS_REGISTER_DEVICE_ENTRIES(ENTRIES) \
  TORCH_LIBRARY_IMPL(mmops, CPU, m) {          \
    using namespace mmops;                     \
    ENTRIES(m, cpu)                            \
  }
#endif

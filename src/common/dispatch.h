#pragma once
// Typed dispatcher handles. Each family declares one alias per schema in its
// <family>_ops.h, e.g.
//   using RoIPoolForwardFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, ...);
// and calls the op through
//   static const auto op = detail::op_handle<RoIPoolForwardFn>("mmops::_roi_pool_forward");
//   op.call(...);
// so the signature is spelled once, next to the schema it mirrors.

#include <ATen/core/dispatch/Dispatcher.h>

namespace mmops {
namespace detail {

template <typename Fn>
c10::TypedOperatorHandle<Fn> op_handle(const char* qualified_name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(qualified_name, "").typed<Fn>();
}

} // namespace detail
} // namespace mmops

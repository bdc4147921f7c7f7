#include "common/autocast.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <optional>
#include <vector>

namespace mmops {
namespace detail {
namespace {

bool is_reduced_float(const at::Tensor& t) {
  return t.defined() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16);
}

// The argument with its float16 / bfloat16 tensors (also in lists) cast to
// float32; `data` takes the dtype of the first floating tensor met.
c10::IValue to_float32(const c10::IValue& arg, std::optional<at::ScalarType>& data) {
  auto cast = [&](const at::Tensor& t) {
    if (t.defined() && t.is_floating_point() && !data) {
      data = t.scalar_type();
    }
    return is_reduced_float(t) ? t.to(at::kFloat) : t;
  };
  if (arg.isTensor()) {
    return cast(arg.toTensor());
  }
  if (arg.isTensorList()) {
    std::vector<at::Tensor> list = arg.toTensorVector();
    for (at::Tensor& t : list) {
      t = cast(t);
    }
    return list;
  }
  return arg;
}

// A result's float32 tensors (also in lists) cast to `dtype`.
c10::IValue to_dtype(const c10::IValue& result, at::ScalarType dtype) {
  auto cast = [&](const at::Tensor& t) { return t.defined() && t.scalar_type() == at::kFloat ? t.to(dtype) : t; };
  if (result.isTensor()) {
    return cast(result.toTensor());
  }
  if (result.isTensorList()) {
    std::vector<at::Tensor> list = result.toTensorVector();
    for (at::Tensor& t : list) {
      t = cast(t);
    }
    return list;
  }
  return result;
}

template <AutocastOutput kOutput>
void autocast_boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t num_args = op.schema().arguments().size();
  std::optional<at::ScalarType> data;
  for (size_t i = stack->size() - num_args; i < stack->size(); ++i) {
    (*stack)[i] = to_float32((*stack)[i], data);
  }
  {
    // below autocast: autograd records the casts, the op runs in float32
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    op.callBoxed(stack);
  }
  if (kOutput == AutocastOutput::kDataDtype && data && *data != at::kFloat) {
    const size_t num_results = op.schema().returns().size();
    for (size_t i = stack->size() - num_results; i < stack->size(); ++i) {
      (*stack)[i] = to_dtype((*stack)[i], *data);
    }
  }
}

} // namespace

torch::CppFunction autocast_kernel(AutocastOutput output) {
  return output == AutocastOutput::kDataDtype
             ? torch::CppFunction::makeFromBoxedFunction<&autocast_boxed<AutocastOutput::kDataDtype>>()
             : torch::CppFunction::makeFromBoxedFunction<&autocast_boxed<AutocastOutput::kFloat32>>();
}

void register_autocast(torch::Library& m, AutocastOutput output, std::initializer_list<const char*> ops) {
  for (const char* op : ops) {
    m.impl(op, autocast_kernel(output));
  }
}

} // namespace detail
} // namespace mmops

#pragma once
// Helpers of the C++ autograd functions (src/<family>/<family>_autograd.cpp):
// one way to save symbolic sizes and enum-like arguments, and one way to
// refuse a double backward.

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/SymIntArrayRef.h>
#include <torch/autograd.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace mmops {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace detail {

// Sizes (symbolic under torch.compile) saved under `key`.
inline void save_sizes(AutogradContext* ctx, const std::string& key, c10::SymIntArrayRef sizes) {
  ctx->saved_data[key] = sizes;
}

inline std::vector<c10::SymInt> saved_sizes(AutogradContext* ctx, const std::string& key) {
  return ctx->saved_data.at(key).toSymIntVector();
}

// An enum (a mode parsed once in the forward) saved under `key`.
template <typename Enum>
void save_enum(AutogradContext* ctx, const std::string& key, Enum value) {
  static_assert(std::is_enum_v<Enum>);
  ctx->saved_data[key] = static_cast<int64_t>(value);
}

template <typename Enum>
Enum saved_enum(AutogradContext* ctx, const std::string& key) {
  static_assert(std::is_enum_v<Enum>);
  return static_cast<Enum>(ctx->saved_data.at(key).toInt());
}

// The backward passes are linear in grad_output and not differentiable again:
// refuse a double backward instead of returning a silently wrong zero.
inline void refuse_double_backward(const char* op_name, const at::Tensor& grad_output) {
  TORCH_CHECK(!(grad_output.requires_grad() && at::GradMode::is_enabled()), op_name,
              ": double backward is not implemented");
}

// Whether the autograd kernel must record a graph node: grad mode is on and a
// differentiable argument requires grad. When not, the kernels that would call
// a private forward (one that also returns what the backward needs) call the
// public op instead, so that inference graphs (torch.export decompositions,
// AOTInductor packages) record the public op and skip the backward's extras.
inline bool needs_grad(at::TensorList differentiable) {
  if (!at::GradMode::is_enabled())
    return false;
  for (const at::Tensor& t : differentiable)
    if (t.requires_grad())
      return true;
  return false;
}

} // namespace detail
} // namespace mmops

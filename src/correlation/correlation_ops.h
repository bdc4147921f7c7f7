#pragma once
// Internal to correlation: the validation (correlation_checks.cpp), shared by
// the device entries (correlation.cpp) and the meta kernels
// (correlation_meta.cpp), the output size, and the dispatcher signature of each
// schema (for detail::op_handle).

#include "correlation/correlation_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <tuple>
#include <vector>

namespace mmops {

// The prefix of every correlation error message.
constexpr const char* kCorrelationOp = "mmops::correlation: ";

namespace detail {

// The options of a call, as the schema takes them.
struct CorrelationOptions {
  c10::IntArrayRef kernel_size;
  int64_t max_displacement;
  c10::IntArrayRef stride, padding, dilation, dilation_patch;
};

// Every argument of a forward call; works on real and fake tensors (no data
// access). Sizes still symbolic are -1 in the params.
CorrelationParams check_correlation_forward(const at::Tensor& input1, const at::Tensor& input2,
                                            const CorrelationOptions& options);

// The arguments of a backward call: the forward's, and grad_output of the output's shape.
CorrelationParams check_correlation_backward(const at::Tensor& grad_output, const at::Tensor& input1,
                                             const at::Tensor& input2, const CorrelationOptions& options);

// The output shape [N, P, P, oH, oW] (symbolic), after check_correlation_forward.
std::vector<c10::SymInt> correlation_output_shape(const at::Tensor& input1, const CorrelationOptions& options);

} // namespace detail

// correlation(Tensor input1, Tensor input2, int[2] kernel_size, int max_displacement, int[2] stride,
//     int[2] padding, int[2] dilation, int[2] dilation_patch) -> Tensor
using CorrelationFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::IntArrayRef, int64_t, c10::IntArrayRef,
                                 c10::IntArrayRef, c10::IntArrayRef, c10::IntArrayRef);

// _correlation_backward(Tensor grad_output, Tensor input1, Tensor input2, <the options>)
//     -> (Tensor grad_input1, Tensor grad_input2)
using CorrelationBackwardFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                 const at::Tensor&, c10::IntArrayRef, int64_t,
                                                                 c10::IntArrayRef, c10::IntArrayRef, c10::IntArrayRef,
                                                                 c10::IntArrayRef);

} // namespace mmops

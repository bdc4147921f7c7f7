#pragma once
// Internal to carafe: the validation (carafe_checks.cpp), shared by the device
// entries (carafe.cpp) and the meta kernels (carafe_meta.cpp), and the
// dispatcher signature of each schema (for detail::op_handle).

#include "carafe/carafe_kernels.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>

namespace mmops {

// The prefix of every carafe error message.
constexpr const char* kCarafeOp = "mmops::carafe: ";

// mmcv's bounds: an odd kernel of at most 11 x 11 (its CUDA kernel's shared
// memory); the scale factor is bounded so that H * scale_factor cannot overflow.
constexpr int64_t kCarafeMaxKernel = 11;
constexpr int64_t kCarafeMaxScale = 1 << 16;

namespace detail {

// Every argument of a forward call; works on real and fake tensors (no data access).
CarafeParams check_carafe_forward(const at::Tensor& features, const at::Tensor& masks, int64_t kernel_size,
                                  int64_t group_size, int64_t scale_factor);

// The forward's checks, then grad_output of the output's shape, dtype and device.
CarafeParams check_carafe_backward(const at::Tensor& grad_output, const at::Tensor& features, const at::Tensor& masks,
                                   int64_t kernel_size, int64_t group_size, int64_t scale_factor);

} // namespace detail

// carafe(Tensor features, Tensor masks, int kernel_size, int group_size, int scale_factor) -> Tensor
using CarafeFn = at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, int64_t, int64_t);

// _carafe_backward(Tensor grad_output, Tensor features, Tensor masks, int kernel_size, int group_size,
//     int scale_factor) -> (Tensor grad_features, Tensor grad_masks)
using CarafeBackwardFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                            int64_t, int64_t, int64_t);

} // namespace mmops

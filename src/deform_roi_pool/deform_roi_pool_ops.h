#pragma once
// Internal to deform_roi_pool: the validation (deform_roi_pool_checks.cpp),
// shared by the device entries and the meta kernels, and the dispatcher
// signature of each schema (for detail::op_handle).

#include "deform_roi_pool/deform_roi_pool_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymIntArrayRef.h>

#include <optional>
#include <tuple>

namespace mmops {

// The prefix of every deform_roi_pool error message.
constexpr const char* kDeformRoIPoolOp = "mmops::deform_roi_pool: ";

namespace detail {

// Every argument of a forward call; works on real and fake tensors (no data access).
DeformRoIPoolParams check_deform_roi_pool_forward(const at::Tensor& input, const at::Tensor& rois,
                                                  const std::optional<at::Tensor>& offset,
                                                  c10::SymIntArrayRef output_size, double spatial_scale,
                                                  int64_t sampling_ratio, double gamma);

// The arguments of a backward call (the pooled size is grad_output's).
DeformRoIPoolParams check_deform_roi_pool_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                                   const at::Tensor& rois, const std::optional<at::Tensor>& offset,
                                                   double spatial_scale, int64_t sampling_ratio, double gamma);

} // namespace detail

// deform_roi_pool(Tensor input, Tensor rois, Tensor? offset, SymInt[2] output_size,
//     float spatial_scale=1.0, int sampling_ratio=0, float gamma=0.1) -> Tensor
using DeformRoIPoolFn = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                   c10::SymIntArrayRef, double, int64_t, double);

// _deform_roi_pool_backward(Tensor grad_output, Tensor input, Tensor rois, Tensor? offset,
//     float spatial_scale, int sampling_ratio, float gamma) -> (Tensor grad_input, Tensor grad_offset)
using DeformRoIPoolBackwardFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                   const at::Tensor&, const std::optional<at::Tensor>&,
                                                                   double, int64_t, double);

} // namespace mmops

#pragma once
// Internal to roi_pool: the validation (roi_pool_checks.cpp), shared by the
// device entries (roi_pool.cpp) and the meta kernels (roi_pool_meta.cpp), and
// the dispatcher signature of each schema (for detail::op_handle).

#include "roi_pool/roi_pool_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymIntArrayRef.h>

#include <tuple>

namespace mmops {

// The prefix of every roi_pool error message.
constexpr const char* kRoIPoolOp = "mmops::roi_pool: ";

namespace detail {

// Every argument of a forward call; works on real and fake tensors (no data access).
RoIPoolParams check_roi_pool_forward(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                                     double spatial_scale);

// The arguments of a backward call (input_shape = [N, C, H, W]).
RoIPoolParams check_roi_pool_backward(const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
                                      c10::SymIntArrayRef input_shape, double spatial_scale);

} // namespace detail

// roi_pool(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale=1.0) -> Tensor
using RoIPoolFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, double);

// _roi_pool_forward(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale)
//     -> (Tensor output, Tensor argmax)
using RoIPoolForwardFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef,
                                                            double);

// _roi_pool_backward(Tensor grad_output, Tensor rois, Tensor argmax, SymInt[4] input_shape,
//     float spatial_scale) -> Tensor
using RoIPoolBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef,
                                     double);

} // namespace mmops

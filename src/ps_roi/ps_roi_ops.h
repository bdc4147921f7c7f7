#pragma once
// Internal to ps_roi (ps_roi_align, ps_roi_pool): the validation
// (ps_roi_checks.cpp), shared by the device entries (ps_roi.cpp) and the meta
// kernels (ps_roi_meta.cpp), and the dispatcher signature of each schema (for
// detail::op_handle).

#include "ps_roi/ps_roi_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymIntArrayRef.h>

#include <cstdint>

namespace mmops {

// The prefixes of the error messages.
constexpr const char* kPSRoIAlignOp = "mmops::ps_roi_align: ";
constexpr const char* kPSRoIPoolOp = "mmops::ps_roi_pool: ";

namespace detail {

// Every argument of a forward call; works on real and fake tensors (no data
// access). Sizes still symbolic are -1 in the params (meta only). `op` is one
// of the prefixes above; ps_roi_pool passes sampling_ratio = 0 (unused).
PSRoIParams check_ps_roi_forward(const char* op, const at::Tensor& input, const at::Tensor& rois,
                                 c10::SymIntArrayRef output_size, double spatial_scale, int64_t sampling_ratio);

// The arguments of a backward call (input_shape = [N, C_out * PH * PW, H, W]).
PSRoIParams check_ps_roi_backward(const char* op, const at::Tensor& grad_output, const at::Tensor& rois,
                                  c10::SymIntArrayRef input_shape, double spatial_scale, int64_t sampling_ratio);

// Output channels C / (PH * PW) of a forward (symbolic where C is).
c10::SymInt ps_roi_channels_out(const at::Tensor& input, c10::SymIntArrayRef output_size);

} // namespace detail

// ps_roi_align(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale=1.0,
//     int sampling_ratio=-1) -> Tensor
using PSRoIAlignFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, double, int64_t);

// _ps_roi_align_backward(Tensor grad_output, Tensor rois, SymInt[4] input_shape, float spatial_scale,
//     int sampling_ratio) -> Tensor
using PSRoIAlignBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, double, int64_t);

// ps_roi_pool(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale=1.0) -> Tensor
using PSRoIPoolFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, double);

// _ps_roi_pool_backward(Tensor grad_output, Tensor rois, SymInt[4] input_shape, float spatial_scale) -> Tensor
using PSRoIPoolBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, double);

} // namespace mmops

#pragma once
// Internal to prroi_pool: the validation (prroi_pool_checks.cpp), shared by
// the device entries (prroi_pool.cpp) and the meta kernels
// (prroi_pool_meta.cpp), and the dispatcher signature of each schema.

#include "prroi_pool/prroi_pool_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymIntArrayRef.h>

namespace mmops {

// The prefix of every prroi_pool error message.
constexpr const char* kPrRoIPoolOp = "mmops::prroi_pool: ";

namespace detail {

// Every argument of a forward call; works on real and fake tensors (no data access).
PrRoIPoolParams check_prroi_pool_forward(const at::Tensor& input, const at::Tensor& rois,
                                         c10::SymIntArrayRef output_size, double spatial_scale);

// The input backward (input_shape = [N, C, H, W]).
PrRoIPoolParams check_prroi_pool_input_backward(const at::Tensor& grad_output, const at::Tensor& rois,
                                                c10::SymIntArrayRef input_shape, double spatial_scale);

// The rois backward.
PrRoIPoolParams check_prroi_pool_rois_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                               const at::Tensor& rois, double spatial_scale);

} // namespace detail

// prroi_pool(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale=1.0) -> Tensor
using PrRoIPoolFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, double);

// _prroi_pool_input_backward(Tensor grad_output, Tensor rois, SymInt[4] input_shape,
//     float spatial_scale) -> Tensor
using PrRoIPoolInputBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, double);

// _prroi_pool_rois_backward(Tensor grad_output, Tensor input, Tensor rois, float spatial_scale) -> Tensor
using PrRoIPoolRoisBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double);

} // namespace mmops

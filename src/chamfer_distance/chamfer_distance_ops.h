#pragma once
// Internal to chamfer_distance: the validation (chamfer_distance_checks.cpp),
// shared by the device entries and the meta kernels, and the dispatcher
// signature of each schema (for detail::op_handle).

#include "chamfer_distance/chamfer_distance_kernels.h"

#include <ATen/core/Tensor.h>

#include <tuple>

namespace mmops {

// The prefix of every chamfer_distance error message.
constexpr const char* kChamferDistanceOp = "mmops::chamfer_distance: ";

namespace detail {

// Every argument of a forward call; works on real and fake tensors (no data
// access). Sizes still symbolic are -1 in the params (meta only).
ChamferDistanceParams check_chamfer_distance_forward(const at::Tensor& xyz1, const at::Tensor& xyz2);

// The arguments of a backward call.
ChamferDistanceParams check_chamfer_distance_backward(const at::Tensor& xyz1, const at::Tensor& xyz2,
                                                      const at::Tensor& idx1, const at::Tensor& idx2,
                                                      const at::Tensor& grad_dist1, const at::Tensor& grad_dist2);

// Reads idx1 / idx2 and raises unless they lie in [0, M) / [0, N).
void check_chamfer_distance_indices(const at::Tensor& idx1, const at::Tensor& idx2, const ChamferDistanceParams& p);

} // namespace detail

// chamfer_distance(Tensor xyz1, Tensor xyz2) -> (Tensor dist1, Tensor dist2, Tensor idx1, Tensor idx2)
using ChamferDistanceFn = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&,
                                                                                     const at::Tensor&);

// _chamfer_distance_backward(Tensor xyz1, Tensor xyz2, Tensor idx1, Tensor idx2, Tensor grad_dist1,
//                            Tensor grad_dist2) -> (Tensor, Tensor)
using ChamferDistanceBackwardFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                     const at::Tensor&, const at::Tensor&,
                                                                     const at::Tensor&, const at::Tensor&);

} // namespace mmops

#pragma once
// Internal to convex_iou / convex_giou: the validation (convex_iou_checks.cpp)
// shared by the device entries, meta and autograd, and the dispatcher
// signatures of the schemas.

#include "convex_iou/convex_iou_kernels.h"

#include <ATen/core/Tensor.h>

#include <tuple>

namespace mmops {

namespace detail {

// pointsets [N, 18], polygons [K, 8], one floating dtype and device; works on
// fake tensors (no data access).
void check_convex_iou(const at::Tensor& pointsets, const at::Tensor& polygons);

// As above with K == N (row i with row i).
void check_convex_giou(const at::Tensor& pointsets, const at::Tensor& polygons);

} // namespace detail

// convex_iou(Tensor pointsets, Tensor polygons) -> Tensor
using ConvexIoUFn = at::Tensor(const at::Tensor&, const at::Tensor&);
// convex_giou(Tensor pointsets, Tensor polygons) -> (Tensor giou, Tensor grad)
using ConvexGIoUFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&);

} // namespace mmops

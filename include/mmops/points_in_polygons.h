#pragma once
// Public C++ API of mmops::points_in_polygons (through the PyTorch dispatcher).

#include <ATen/core/Tensor.h>

namespace mmops {

// mmcv points_in_polygons. points [N, 2] (x, y), polygons [M, 8] (x1, y1, ...,
// x4, y4), one floating dtype and device. Returns [N, M] in points' dtype:
// 1.0 where the point is inside the quadrilateral, else 0.0, by mmcv's
// crossing rule (points on the boundary as mmcv decides them; non-finite
// coordinates: 0). Not differentiable.
at::Tensor points_in_polygons(const at::Tensor& points, const at::Tensor& polygons);

} // namespace mmops

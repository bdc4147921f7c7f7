#pragma once
// Public C++ API of mmops::min_area_polygons (through the PyTorch dispatcher).

#include <ATen/core/Tensor.h>

namespace mmops {

// mmcv min_area_polygons. pointsets [N, 18] (9 points x, y per row), floating.
// Returns [N, 8]: the corners (x1, y1, ..., x4, y4) of the minimum-area
// rectangle enclosing each set, in mmcv's vertex order. Not differentiable.
at::Tensor min_area_polygons(const at::Tensor& pointsets);

} // namespace mmops

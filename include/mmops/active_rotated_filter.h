#pragma once
// Public C++ API of mmops::active_rotated_filter (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>

namespace mmops {

// Active rotating filter (ORN / S2A-Net / ReDet) with mmcv's semantics:
//   input:   [out_planes, in_planes, orientations, kH, kW] floating point
//   indices: [orientations, kH, kW, rotations] integer, 1-based: entry l = (o, y, x)
//            of every filter goes, for rotation k, to entry indices[l, k] - 1
//   output:  [out_planes * rotations, in_planes * orientations, kH, kW]
// Indices outside [1, orientations * kH * kW] raise on CPU (and on CUDA with the
// strict switch); unchecked CUDA ignores them. Differentiable w.r.t. input.
at::Tensor active_rotated_filter(const at::Tensor& input, const at::Tensor& indices);

} // namespace mmops

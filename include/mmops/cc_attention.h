#pragma once
// Public C++ API of mmops::ca_weight and mmops::ca_map (criss-cross attention,
// CCNet; through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>

namespace mmops {

// The criss-cross of pixel (y, x) of an H x W map: L = H + W - 1 pixels, entry k
//   k < W:          (y, k), its row (k == x: the pixel itself)
//   k = W + i < L:  (j, x), its column without row y: j = i for i < y, else i + 1
// (mmcv 1.x's layout).

// Energies: t, f [N, C, H, W] floating point of one dtype, device and shape, H + W >= 1;
// returns [N, H + W - 1, H, W] with [n, k, y, x] = sum_c t[n, c, y, x] * f[n, c, criss-cross k of (y, x)].
// Differentiable w.r.t. t and f.
at::Tensor ca_weight(const at::Tensor& t, const at::Tensor& f);

// Aggregation: weight [N, H + W - 1, H, W] and g [N, C, H, W] of one dtype and device;
// returns [N, C, H, W] with [n, c, y, x] = sum_k weight[n, k, y, x] * g[n, c, criss-cross k of (y, x)].
// Differentiable w.r.t. weight and g.
at::Tensor ca_map(const at::Tensor& weight, const at::Tensor& g);

} // namespace mmops

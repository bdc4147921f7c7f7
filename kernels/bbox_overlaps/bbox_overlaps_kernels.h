#pragma once
// Device kernels of bbox_overlaps. Callers (src/bbox_overlaps) validate the
// arguments first; these functions only compute.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>

namespace mmops {

struct BBoxOverlapsParams {
  bool iof;        // mode "iof": intersection over the area of bboxes1's box
  bool aligned;    // row i of bboxes1 with row i of bboxes2 only
  int64_t offset;  // 0 or 1 (legacy pixel convention)
};

namespace kernels {

// [M, N] (or [M] when aligned) in the boxes' dtype; computed in float (double for double).
at::Tensor bbox_overlaps_cpu(const at::Tensor& bboxes1, const at::Tensor& bboxes2, const BBoxOverlapsParams& p);

// (grad_bboxes1 [M, 4], grad_bboxes2 [N, 4]) for grad_output of the forward's
// shape. Every gradient row is one fixed-order sum (deterministic, no atomics).
std::tuple<at::Tensor, at::Tensor> bbox_overlaps_backward_cpu(const at::Tensor& grad_output,
                                                              const at::Tensor& bboxes1,
                                                              const at::Tensor& bboxes2,
                                                              const BBoxOverlapsParams& p);

#ifdef MMOPS_WITH_CUDA
at::Tensor bbox_overlaps_cuda(const at::Tensor& bboxes1, const at::Tensor& bboxes2, const BBoxOverlapsParams& p);

std::tuple<at::Tensor, at::Tensor> bbox_overlaps_backward_cuda(const at::Tensor& grad_output,
                                                               const at::Tensor& bboxes1,
                                                               const at::Tensor& bboxes2,
                                                               const BBoxOverlapsParams& p);
#endif

} // namespace kernels
} // namespace mmops

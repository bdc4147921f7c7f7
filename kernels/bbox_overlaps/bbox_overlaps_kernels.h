#pragma once
// Device kernels of bbox_overlaps. Callers (src/bbox_overlaps) validate the
// arguments first; these functions only compute.

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/SymInt.h>

#include <cstdint>
#include <tuple>
#include <vector>

namespace mmops {

struct BBoxOverlapsParams {
  bool iof;       // mode "iof": intersection over the area of bboxes1's box
  bool aligned;   // row i of bboxes1 with row i of bboxes2 only
  int64_t offset; // 0 or 1 (legacy pixel convention)
};

namespace kernels {

// Shape of the forward's output: [M, N], or [M] when aligned (symbolic in the
// meta kernel, concrete in the CPU and CUDA kernels).
inline std::vector<c10::SymInt> overlaps_shape(const at::Tensor& bboxes1, const at::Tensor& bboxes2, bool aligned) {
  if (aligned) {
    return {bboxes1.sym_size(0)};
  }
  return {bboxes1.sym_size(0), bboxes2.sym_size(0)};
}

// What the CPU and CUDA forward kernels work on.
struct ForwardArgs {
  at::Tensor bboxes1; // [M, 4], contiguous
  at::Tensor bboxes2; // [N, 4], contiguous
  at::Tensor out;     // overlaps_shape, empty
};

inline ForwardArgs forward_args(const at::Tensor& bboxes1, const at::Tensor& bboxes2, const BBoxOverlapsParams& p) {
  return {bboxes1.contiguous(), bboxes2.contiguous(),
          at::empty_symint(overlaps_shape(bboxes1, bboxes2, p.aligned), bboxes1.options())};
}

// What the CPU and CUDA backward kernels work on.
struct BackwardArgs {
  at::Tensor grad_output; // the forward's shape, contiguous
  at::Tensor bboxes1;     // contiguous
  at::Tensor bboxes2;     // contiguous
  at::Tensor grad1;       // [M, 4], empty
  at::Tensor grad2;       // [N, 4], empty
};

inline BackwardArgs backward_args(const at::Tensor& grad_output, const at::Tensor& bboxes1, const at::Tensor& bboxes2) {
  return {grad_output.contiguous(), bboxes1.contiguous(), bboxes2.contiguous(),
          at::empty({bboxes1.size(0), 4}, bboxes1.options()), at::empty({bboxes2.size(0), 4}, bboxes2.options())};
}

// [M, N] (or [M] when aligned) in the boxes' dtype; computed in float (double for double).
at::Tensor bbox_overlaps_cpu(const at::Tensor& bboxes1, const at::Tensor& bboxes2, const BBoxOverlapsParams& p);

// (grad_bboxes1 [M, 4], grad_bboxes2 [N, 4]) for grad_output of the forward's
// shape. Every gradient row is one fixed-order sum (deterministic, no atomics).
std::tuple<at::Tensor, at::Tensor> bbox_overlaps_backward_cpu(const at::Tensor& grad_output, const at::Tensor& bboxes1,
                                                              const at::Tensor& bboxes2, const BBoxOverlapsParams& p);

#ifdef MMOPS_WITH_CUDA
at::Tensor bbox_overlaps_cuda(const at::Tensor& bboxes1, const at::Tensor& bboxes2, const BBoxOverlapsParams& p);

std::tuple<at::Tensor, at::Tensor> bbox_overlaps_backward_cuda(const at::Tensor& grad_output, const at::Tensor& bboxes1,
                                                               const at::Tensor& bboxes2, const BBoxOverlapsParams& p);
#endif

} // namespace kernels
} // namespace mmops

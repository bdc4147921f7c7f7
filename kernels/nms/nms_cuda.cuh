#pragma once
// Device code shared by the CUDA kernels of nms / batched_nms (nms_cuda.cu)
// and soft_nms (soft_nms_cuda.cu).

#include "common/box_iou.h"

#include <c10/macros/Macros.h>

#include <algorithm>
#include <cstdint>

namespace mmops {
namespace kernels {
namespace {

using box_iou::Box;

constexpr int kThreads = 256;
// Threads of the one-block kernels: nms' greedy reduction, soft_nms' selection.
constexpr int kGreedyThreads = 1024;

int64_t blocks_for(int64_t n, int threads = kThreads) {
  return std::max<int64_t>(1, (n + threads - 1) / threads);
}

// Box perm[i] of `boxes` at position i, in the compute type, with its area
// (and, when idxs is given, its category).
template <typename scalar_t, typename acc_t>
__global__ void gather_boxes_kernel(const scalar_t* __restrict__ boxes, const int64_t* __restrict__ perm,
                                    const int64_t* __restrict__ idxs, int64_t n, Box<acc_t>* __restrict__ sorted,
                                    acc_t* __restrict__ area, int64_t* __restrict__ category) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) {
    return;
  }
  const int64_t src = perm[i];
  const Box<acc_t> box = box_iou::load_box<scalar_t, acc_t>(boxes, src);
  sorted[i] = box;
  area[i] = box_iou::box_area(box, acc_t(0));
  if (idxs != nullptr) {
    category[i] = idxs[src];
  }
}

} // namespace
} // namespace kernels
} // namespace mmops

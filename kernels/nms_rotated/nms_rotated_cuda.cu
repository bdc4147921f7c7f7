// CUDA kernels of nms_rotated and nms_quadri, everything on the device, one
// host synchronisation at the end (the kept count, inside masked_select):
//   1. order: descending_score_order (stable sorts on the device: decreasing
//      score, NaN last, ties to the lower index).
//   2. the boxes (and label keys) are gathered in that order, in the compute
//      type, with their bounding circles (rotated_iou::Shape).
//   3. suppression mask in 64x64 tiles: word mask[r * ntiles + j] has bit c
//      set when position r suppresses position 64 j + c (c after r, same
//      label, IoU > threshold). Only the upper triangle is computed; a block is
//      one (row tile, column tile) pair, the column tile's boxes in shared
//      memory, four threads per row. The rotated IoU is far dearer than a
//      word write, so the mask is dense (N^2 / 8 bytes: 50 MB at 20k boxes).
//   4. greedy reduction in ONE block: per row tile, thread 0 resolves its 64
//      rows from the running `removed` words and the diagonal words (staged in
//      shared memory); then the block ORs the words of the kept rows into
//      `removed` for the later tiles (atomicOr: a column's rows may be split
//      between threads).
//   5. kept bits to a bool per position, compacted in score order.

#include "common/rotated_iou.h"
#include "common/score_order.h"
#include "nms_rotated/nms_rotated_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/masked_select.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>

namespace mmops {
namespace kernels {
namespace {

using rotated_iou::Shape;
using u64 = unsigned long long;

constexpr int kTile = 64;
constexpr int kThreads = 256;
constexpr int kGreedyThreads = 1024;

int64_t blocks_for(int64_t n) {
  return std::max<int64_t>(1, (n + kThreads - 1) / kThreads);
}

template <typename scalar_t, typename T, int D>
__global__ void gather_kernel(const scalar_t* __restrict__ boxes, const int64_t* __restrict__ order,
                              const int64_t* __restrict__ label, int64_t n, bool clockwise,
                              Shape<T, D>* __restrict__ sorted, int64_t* __restrict__ sorted_label) {
  const int64_t s = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (s >= n) {
    return;
  }
  const int64_t src = order[s]; // a permutation of [0, n): in range by construction
  sorted[s] = rotated_iou::load_shape<scalar_t, T, D>(boxes + src * D, clockwise);
  if (label != nullptr) {
    sorted_label[s] = label[src];
  }
}

// Block (x = column tile j, y = row tile i), j >= i; kRowParts threads per
// row (neighbouring lanes), each testing every kRowParts-th column, so that
// small N (2000 boxes: ~500 blocks) still fills the GPU; the parts' bits are
// OR-ed with shuffles.
constexpr int kRowParts = 4;

template <typename T, int D>
__global__ void __launch_bounds__(kTile* kRowParts)
    mask_kernel(const Shape<T, D>* __restrict__ sorted, const int64_t* __restrict__ label, int64_t n, int64_t ntiles,
                double threshold, u64* __restrict__ mask) {
  __shared__ Shape<T, D> s_col[kTile];
  __shared__ int64_t s_label[kTile];
  const int64_t j = blockIdx.x;
  const int t = threadIdx.x / kRowParts, part = threadIdx.x % kRowParts;
  for (int64_t i = blockIdx.y; i <= j; i += gridDim.y) { // upper triangle only
    const int64_t col0 = j * kTile;
    const int cols = static_cast<int>(n - col0 < kTile ? n - col0 : kTile);
    __syncthreads(); // the previous row tile's columns are no longer read
    if (static_cast<int>(threadIdx.x) < cols) {
      s_col[threadIdx.x] = sorted[col0 + threadIdx.x];
      s_label[threadIdx.x] = label != nullptr ? label[col0 + threadIdx.x] : 0;
    }
    __syncthreads();
    const int64_t row = i * kTile + t;
    const bool has_row = row < n; // no early exit: every lane takes part in the shuffles
    const Shape<T, D> mine = sorted[has_row ? row : 0];
    const int64_t my_label = label != nullptr && has_row ? label[row] : 0;
    u64 bits = 0;
    const int first = (j == i) ? t + 1 : 0;
    for (int c = part; c < cols && has_row; c += kRowParts) {
      if (c >= first && s_label[c] == my_label &&
          static_cast<double>(rotated_iou::overlap(mine, s_col[c], false)) > threshold) {
        bits |= u64(1) << c;
      }
    }
#pragma unroll
    for (int offset = 1; offset < kRowParts; offset *= 2) {
      bits |= __shfl_xor_sync(0xffffffffu, bits, offset);
    }
    if (has_row && part == 0) {
      mask[row * ntiles + j] = bits;
    }
  }
}

// One block: the greedy pass over the mask; kept receives one word per row tile.
__global__ void __launch_bounds__(kGreedyThreads) greedy_kernel(const u64* __restrict__ mask, int64_t n, int64_t ntiles,
                                                                u64* __restrict__ removed, u64* __restrict__ kept) {
  __shared__ u64 s_diag[kTile];
  __shared__ u64 s_kept;
  for (int64_t i = 0; i < ntiles; ++i) {
    const int rows = static_cast<int>(n - i * kTile < kTile ? n - i * kTile : kTile);
    if (static_cast<int>(threadIdx.x) < rows) {
      s_diag[threadIdx.x] = mask[(i * kTile + threadIdx.x) * ntiles + i];
    }
    __syncthreads(); // also: removed[i] is complete
    if (threadIdx.x == 0) {
      u64 rem = removed[i];
      u64 k = 0;
      for (int r = 0; r < rows; ++r) {
        if (!((rem >> r) & 1)) {
          k |= u64(1) << r;
          rem |= s_diag[r]; // only later rows of the tile
        }
      }
      s_kept = k;
      kept[i] = k;
    }
    __syncthreads();
    const u64 k = s_kept;
    // The kept rows' words of the later tiles into removed: `lanes` threads share a
    // column (rows split between them) when the columns are fewer than the threads,
    // and the unrolled loop keeps several loads in flight per thread.
    const int64_t width = ntiles - i - 1;
    if (k != 0 && width > 0) {
      int lanes = 1;
      while (lanes < 32 && width * lanes * 2 <= kGreedyThreads) {
        lanes *= 2;
      }
      const int part = static_cast<int>(threadIdx.x) % lanes;
      for (int64_t c = threadIdx.x / lanes; c < width; c += kGreedyThreads / lanes) {
        const int64_t j = i + 1 + c;
        u64 acc = 0;
#pragma unroll 8
        for (int r = part; r < kTile; r += lanes) {
          if ((k >> r) & 1) {
            acc |= mask[(i * kTile + r) * ntiles + j];
          }
        }
        if (acc != 0) {
          atomicOr(&removed[j], acc);
        }
      }
    }
    __syncthreads();
  }
}

__global__ void expand_kept_kernel(const u64* __restrict__ kept, int64_t n, bool* __restrict__ out) {
  const int64_t s = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (s < n) {
    out[s] = (kept[s >> 6] >> (s & 63)) & 1;
  }
}

template <typename scalar_t, int D>
void suppress(const at::Tensor& boxes, const at::Tensor& order, const at::Tensor& keys, const NmsRotatedParams& p,
              u64* kept_p, cudaStream_t stream) {
  using T = at::opmath_type<scalar_t>;
  const int64_t n = boxes.size(0);
  const int64_t ntiles = (n + kTile - 1) / kTile;
  const auto bytes = boxes.options().dtype(at::kByte);
  at::Tensor sorted = at::empty({n * int64_t(sizeof(Shape<T, D>))}, bytes);
  auto* sorted_p = reinterpret_cast<Shape<T, D>*>(sorted.mutable_data_ptr<uint8_t>());
  at::Tensor sorted_label;
  int64_t* sorted_label_p = nullptr;
  if (keys.defined()) {
    sorted_label = at::empty({n}, keys.options());
    sorted_label_p = sorted_label.mutable_data_ptr<int64_t>();
  }
  gather_kernel<scalar_t, T, D><<<blocks_for(n), kThreads, 0, stream>>>(
      boxes.const_data_ptr<scalar_t>(), order.const_data_ptr<int64_t>(),
      keys.defined() ? keys.const_data_ptr<int64_t>() : nullptr, n, p.clockwise, sorted_p, sorted_label_p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();

  const auto long_options = boxes.options().dtype(at::kLong);
  at::Tensor mask = at::empty({n * ntiles}, long_options);
  u64* mask_p = reinterpret_cast<u64*>(mask.mutable_data_ptr<int64_t>());
  const dim3 grid(static_cast<unsigned>(ntiles), static_cast<unsigned>(std::min<int64_t>(ntiles, 65535)));
  mask_kernel<T, D>
      <<<grid, kTile * kRowParts, 0, stream>>>(sorted_p, sorted_label_p, n, ntiles, p.iou_threshold, mask_p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();

  at::Tensor removed = at::zeros({ntiles}, long_options);
  greedy_kernel<<<1, kGreedyThreads, 0, stream>>>(mask_p, n, ntiles,
                                                  reinterpret_cast<u64*>(removed.mutable_data_ptr<int64_t>()), kept_p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

} // namespace

at::Tensor nms_rotated_cuda(const at::Tensor& boxes_in, const at::Tensor& scores, const at::Tensor& labels,
                            const NmsRotatedParams& p) {
  const c10::cuda::CUDAGuard guard(boxes_in.device());
  const int64_t n = boxes_in.size(0);
  const auto long_options = boxes_in.options().dtype(at::kLong);
  if (n == 0) {
    return at::empty({0}, long_options);
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const at::Tensor order = descending_score_order(scores);
  const at::Tensor keys = label_keys(labels);
  const at::Tensor boxes = boxes_in.contiguous();
  const int64_t ntiles = (n + kTile - 1) / kTile;
  at::Tensor kept = at::empty({ntiles}, long_options);
  u64* kept_p = reinterpret_cast<u64*>(kept.mutable_data_ptr<int64_t>());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, boxes.scalar_type(), "mmops::nms_rotated (CUDA)", [&] {
    if (p.quadri) {
      suppress<scalar_t, 8>(boxes, order, keys, p, kept_p, stream);
    } else {
      suppress<scalar_t, 5>(boxes, order, keys, p, kept_p, stream);
    }
  });
  at::Tensor kept_bool = at::empty({n}, boxes.options().dtype(at::kBool));
  expand_kept_kernel<<<blocks_for(n), kThreads, 0, stream>>>(kept_p, n, kept_bool.mutable_data_ptr<bool>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return at::masked_select(order, kept_bool);
}

} // namespace kernels
} // namespace mmops

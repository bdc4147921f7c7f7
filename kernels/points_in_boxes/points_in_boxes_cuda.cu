// CUDA kernels of points_in_boxes_part / _all. The geometry is
// kernels/common/box3d.h in float (double for double).
//  - part: one thread per point; the batch's boxes pass through shared memory
//    in tiles of kBoxTile, and the block stops once every point found a box.
//  - all: a block covers 32 boxes (one per lane, prepared in registers) x 128
//    points; each warp writes 32 consecutive int32 of one output row.
// 64-bit offsets; the grids are flattened (batch, tile) in blockIdx.x.

#include "points_in_boxes/points_in_boxes_kernels.h"

#include "common/box3d.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <limits>

namespace mmops {
namespace kernels {
namespace {

constexpr int kPartThreads = 256;
constexpr int kBoxTile = 256;
constexpr int kCols = 32;          // boxes per block of the all kernel (blockDim.x)
constexpr int kRowsY = 8;          // blockDim.y
constexpr int kRowsPerBlock = 128; // points per block of the all kernel

template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kPartThreads)
    points_in_boxes_part_kernel(const scalar_t* __restrict__ pts, const scalar_t* __restrict__ boxes, int64_t n,
                                int64_t m, int64_t tiles_per_batch, int32_t* __restrict__ out) {
  __shared__ box3d::Box3d<acc_t> s_boxes[kBoxTile];
  const int64_t b = blockIdx.x / tiles_per_batch;
  const int64_t i = (blockIdx.x % tiles_per_batch) * kPartThreads + threadIdx.x;
  const bool valid = i < n;
  const int64_t row = b * n + i;
  acc_t px = 0, py = 0, pz = 0;
  if (valid) {
    px = static_cast<acc_t>(pts[3 * row]);
    py = static_cast<acc_t>(pts[3 * row + 1]);
    pz = static_cast<acc_t>(pts[3 * row + 2]);
  }
  int32_t first = -1;
  for (int64_t j0 = 0; j0 < m; j0 += kBoxTile) {
    const int64_t j = j0 + threadIdx.x;
    if (j < m) {
      s_boxes[threadIdx.x] = box3d::Box3d<acc_t>::load(boxes + 7 * (b * m + j));
    }
    __syncthreads();
    const int count = static_cast<int>(m - j0 < kBoxTile ? m - j0 : kBoxTile);
    for (int k = 0; k < count && first < 0 && valid; ++k) {
      if (s_boxes[k].contains(px, py, pz)) {
        first = static_cast<int32_t>(j0 + k);
      }
    }
    // every point of the block has its box: the later tiles change nothing
    if (__syncthreads_and(first >= 0 || !valid)) {
      break;
    }
  }
  if (valid) {
    out[row] = first;
  }
}

template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kCols* kRowsY)
    points_in_boxes_all_kernel(const scalar_t* __restrict__ pts, const scalar_t* __restrict__ boxes, int64_t n,
                               int64_t m, int64_t col_tiles, int64_t row_tiles, int32_t* __restrict__ out) {
  const int64_t tile = blockIdx.x;
  const int64_t b = tile / (col_tiles * row_tiles);
  const int64_t col = (tile % col_tiles) * kCols + threadIdx.x;
  const int64_t row0 = ((tile / col_tiles) % row_tiles) * kRowsPerBlock;
  if (col >= m) {
    return;
  }
  const box3d::Box3d<acc_t> box = box3d::Box3d<acc_t>::load(boxes + 7 * (b * m + col));
  for (int r = threadIdx.y; r < kRowsPerBlock; r += kRowsY) {
    const int64_t i = row0 + r;
    if (i >= n) {
      return;
    }
    const scalar_t* p = pts + 3 * (b * n + i);
    const bool inside = box.contains(static_cast<acc_t>(p[0]), static_cast<acc_t>(p[1]), static_cast<acc_t>(p[2]));
    out[(b * n + i) * m + col] = inside ? 1 : 0;
  }
}

void check_grid(int64_t blocks, const char* op) {
  TORCH_CHECK(blocks <= std::numeric_limits<int32_t>::max(), op, blocks,
              " blocks are more than one CUDA launch covers");
}

} // namespace

at::Tensor points_in_boxes_part_cuda(const at::Tensor& points, const at::Tensor& boxes) {
  const c10::cuda::CUDAGuard guard(points.device());
  const at::Tensor pts = points.contiguous();
  const at::Tensor bxs = boxes.contiguous();
  const int64_t batch = pts.size(0), n = pts.size(1), m = bxs.size(1);
  at::Tensor out = at::empty({batch, n}, pts.options().dtype(at::kInt));
  if (out.numel() == 0) {
    return out;
  }
  const int64_t tiles = (n + kPartThreads - 1) / kPartThreads;
  check_grid(batch * tiles, "mmops::points_in_boxes_part: ");
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, pts.scalar_type(), "mmops::points_in_boxes_part (CUDA)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        points_in_boxes_part_kernel<scalar_t, acc_t><<<static_cast<unsigned>(batch * tiles), kPartThreads, 0, stream>>>(
            pts.const_data_ptr<scalar_t>(), bxs.const_data_ptr<scalar_t>(), n, m, tiles,
            out.mutable_data_ptr<int32_t>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return out;
}

at::Tensor points_in_boxes_all_cuda(const at::Tensor& points, const at::Tensor& boxes) {
  const c10::cuda::CUDAGuard guard(points.device());
  const at::Tensor pts = points.contiguous();
  const at::Tensor bxs = boxes.contiguous();
  const int64_t batch = pts.size(0), n = pts.size(1), m = bxs.size(1);
  at::Tensor out = at::empty({batch, n, m}, pts.options().dtype(at::kInt));
  if (out.numel() == 0) {
    return out;
  }
  const int64_t col_tiles = (m + kCols - 1) / kCols;
  const int64_t row_tiles = (n + kRowsPerBlock - 1) / kRowsPerBlock;
  check_grid(batch * col_tiles * row_tiles, "mmops::points_in_boxes_all: ");
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, pts.scalar_type(), "mmops::points_in_boxes_all (CUDA)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        points_in_boxes_all_kernel<scalar_t, acc_t>
            <<<static_cast<unsigned>(batch * col_tiles * row_tiles), dim3(kCols, kRowsY), 0, stream>>>(
                pts.const_data_ptr<scalar_t>(), bxs.const_data_ptr<scalar_t>(), n, m, col_tiles, row_tiles,
                out.mutable_data_ptr<int32_t>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return out;
}

} // namespace kernels
} // namespace mmops

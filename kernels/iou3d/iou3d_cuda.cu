// CUDA kernel of boxes_overlap_bev and boxes_iou_bev, [N, M] all pairs.
//
// A block owns kThreads columns (boxes_b): each thread loads its box once, in
// registers, with its bounding circle. The block then walks the rows
// (boxes_a) kRows at a time, staged in shared memory, so that each row's
// writes are coalesced along M; blocks of the y dimension take every
// gridDim.y-th group of rows. Pairs whose bounding circles are apart (most
// pairs of a scene) cost a few flops; the others run polygon.h's clip.
// Output indices are 64-bit (N * M may pass 2^31).

#include "iou3d/iou3d_kernels.h"
#include "iou3d/iou3d_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>

namespace mmops {
namespace kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kRows = 32;
constexpr int64_t kMaxGridY = 65535;

template <typename scalar_t, typename T>
__global__ void __launch_bounds__(kThreads)
    bev_overlaps_kernel(const scalar_t* __restrict__ a, int64_t cols_a, const scalar_t* __restrict__ b, int64_t cols_b,
                        int64_t n, int64_t m, BevOverlapParams p, scalar_t* __restrict__ out) {
  __shared__ bev::Shape<T> s_rows[kRows];
  const int64_t col = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  const bool has_col = col < m; // no early return: every thread stages rows
  bev::Shape<T> mine{};
  if (has_col) {
    mine = bev::load_box<scalar_t, T>(b + col * cols_b, p.xyxyr);
  }
  for (int64_t first = blockIdx.y * int64_t(kRows); first < n; first += int64_t(gridDim.y) * kRows) {
    const int rows = static_cast<int>(n - first < kRows ? n - first : kRows);
    __syncthreads(); // the previous group is read by every thread
    if (static_cast<int>(threadIdx.x) < rows) {
      s_rows[threadIdx.x] = bev::load_box<scalar_t, T>(a + (first + threadIdx.x) * cols_a, p.xyxyr);
    }
    __syncthreads();
    if (has_col) {
      scalar_t* dst = out + first * m + col;
      for (int r = 0; r < rows; ++r, dst += m) {
        *dst = static_cast<scalar_t>(bev::overlap(s_rows[r], mine, p.iou));
      }
    }
  }
}

} // namespace

at::Tensor bev_overlaps_cuda(const at::Tensor& boxes_a, const at::Tensor& boxes_b, const BevOverlapParams& p) {
  const c10::cuda::CUDAGuard guard(boxes_a.device());
  at::Tensor out = at::empty_symint(bev_overlaps_shape(boxes_a, boxes_b), boxes_a.options());
  if (out.numel() == 0) {
    return out;
  }
  const at::Tensor a = boxes_a.contiguous();
  const at::Tensor b = boxes_b.contiguous();
  const int64_t n = a.size(0), m = b.size(0);
  const dim3 grid(static_cast<unsigned>((m + kThreads - 1) / kThreads),
                  static_cast<unsigned>(std::min<int64_t>((n + kRows - 1) / kRows, kMaxGridY)));
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "mmops::boxes_overlap_bev (CUDA)", [&] {
    bev_overlaps_kernel<scalar_t, at::opmath_type<scalar_t>>
        <<<grid, kThreads, 0, stream>>>(a.const_data_ptr<scalar_t>(), a.size(1), b.const_data_ptr<scalar_t>(),
                                        b.size(1), n, m, p, out.mutable_data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

} // namespace kernels
} // namespace mmops

// CUDA kernel of points_in_polygons: a block covers 32 polygons (staged in
// shared memory, converted to the compute type once) x 128 points; each warp
// writes 32 consecutive columns of one row (coalesced), the block's 8 warps
// take every 8th row.
// half/bfloat16 compute in float. 64-bit offsets.

#include "points_in_polygons/points_in_polygons_kernels.h"
#include "points_in_polygons/points_in_polygons_math.h"

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

constexpr int kCols = 32;          // polygons per block (blockDim.x)
constexpr int kRowsY = 8;          // blockDim.y
constexpr int kRowsPerBlock = 128; // points per block

template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kCols* kRowsY)
    points_in_polygons_kernel(const scalar_t* __restrict__ pts, const scalar_t* __restrict__ polys, int64_t n,
                              int64_t m, int64_t col_tiles, scalar_t* __restrict__ out) {
  __shared__ acc_t s_quads[kCols][8];
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int64_t col0 = (int64_t(blockIdx.x) % col_tiles) * kCols;
  const int64_t row0 = (int64_t(blockIdx.x) / col_tiles) * kRowsPerBlock;
  const int t = ty * kCols + tx;
  if (t < kCols * 8) { // 256 threads load 32 polygons x 8 values, coalesced
    const int64_t flat = col0 * 8 + t;
    s_quads[t / 8][t % 8] = flat < m * 8 ? static_cast<acc_t>(polys[flat]) : acc_t(0);
  }
  __syncthreads();
  const int64_t col = col0 + tx;
  if (col >= m) {
    return;
  }
  acc_t quad[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    quad[k] = s_quads[tx][k];
  }
  for (int r = ty; r < kRowsPerBlock; r += kRowsY) {
    const int64_t row = row0 + r;
    if (row >= n) {
      return;
    }
    const acc_t px = static_cast<acc_t>(pts[2 * row]);
    const acc_t py = static_cast<acc_t>(pts[2 * row + 1]);
    out[row * m + col] = static_cast<scalar_t>(points_in_polygons_math::point_in_quad(px, py, quad));
  }
}

} // namespace

at::Tensor points_in_polygons_cuda(const at::Tensor& points, const at::Tensor& polygons) {
  const c10::cuda::CUDAGuard guard(points.device());
  const at::Tensor pts = points.contiguous();
  const at::Tensor polys = polygons.contiguous();
  const int64_t n = pts.size(0);
  const int64_t m = polys.size(0);
  at::Tensor out = at::empty({n, m}, pts.options());
  if (out.numel() == 0) {
    return out;
  }
  const int64_t col_tiles = (m + kCols - 1) / kCols;
  const int64_t blocks = col_tiles * ((n + kRowsPerBlock - 1) / kRowsPerBlock);
  TORCH_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "mmops::points_in_polygons: ", n, " x ", m,
              " pairs are more than one CUDA launch covers");
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, pts.scalar_type(), "mmops::points_in_polygons (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    points_in_polygons_kernel<scalar_t, acc_t><<<static_cast<unsigned>(blocks), dim3(kCols, kRowsY), 0, stream>>>(
        pts.const_data_ptr<scalar_t>(), polys.const_data_ptr<scalar_t>(), n, m, col_tiles,
        out.mutable_data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

} // namespace kernels
} // namespace mmops

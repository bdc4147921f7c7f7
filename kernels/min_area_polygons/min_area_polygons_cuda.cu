// CUDA kernel of min_area_polygons: one thread per point set (the hull and
// the 2 x hull-size candidate projections stay in registers). The 18 inputs
// of a thread are contiguous, so a warp reads 32 x 72 contiguous bytes
// (float). half/bfloat16 compute in float. 64-bit offsets.

#include "min_area_polygons/min_area_polygons_kernels.h"
#include "min_area_polygons/min_area_polygons_math.h"

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

template <typename scalar_t, typename acc_t>
__global__ void min_area_polygons_kernel(const scalar_t* __restrict__ in, int64_t n, scalar_t* __restrict__ out) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) {
    return;
  }
  polygon::Point<acc_t> pts[min_area_polygons_math::kPoints];
#pragma unroll
  for (int k = 0; k < min_area_polygons_math::kPoints; ++k) {
    pts[k] = {static_cast<acc_t>(in[i * 18 + 2 * k]), static_cast<acc_t>(in[i * 18 + 2 * k + 1])};
  }
  acc_t corners[8];
  min_area_polygons_math::min_area_rect(pts, corners);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    out[i * 8 + k] = static_cast<scalar_t>(corners[k]);
  }
}

} // namespace

at::Tensor min_area_polygons_cuda(const at::Tensor& pointsets) {
  const c10::cuda::CUDAGuard guard(pointsets.device());
  const at::Tensor p = pointsets.contiguous();
  const int64_t n = p.size(0);
  at::Tensor out = at::empty({n, 8}, p.options());
  if (n == 0) {
    return out;
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.scalar_type(), "mmops::min_area_polygons (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const int threads = 128;
    const int64_t blocks = (n + threads - 1) / threads;
    TORCH_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "mmops::min_area_polygons: ", n,
                " point sets are more than one CUDA launch covers");
    min_area_polygons_kernel<scalar_t, acc_t>
        <<<blocks, threads, 0, stream>>>(p.const_data_ptr<scalar_t>(), n, out.mutable_data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

} // namespace kernels
} // namespace mmops

// CUDA kernels of upfirdn2d (upfirdn2d_math.h). NCHW; a non-contiguous input
// is made contiguous first; the kernel goes to the accumulation type (float,
// double for double) once.
//
// Tiled (the StyleGAN2 cases: up and down 1 or 2, the same on both axes, the
// kernel at most 4 x 4): a block owns a kTileH x kTileW tile of output of one
// plane (and walks planes with a grid stride). Its threads load the input
// rectangle the tile reads into shared memory (coalesced along rows, zero
// outside the input) and the flipped kernel next to it, then each thread
// computes kTileH * kTileW / 256 outputs from shared memory only: per axis
// the taps that read input are k0 + j * UP (compile-time UP: at most
// ceil(4 / UP) taps, unrolled), as on the CPU.
// Generic (any factors, any kernel size): one thread per output (64-bit grid
// stride), the same tap runs read from global memory.
// Both sum in the CPU's order (ky, then kx); the CUDA compiler may fuse the
// multiply-adds, so results agree with the CPU to rounding, not bitwise.

#include "upfirdn2d/upfirdn2d_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace mmops {
namespace kernels {
namespace {

using namespace upfirdn2d_math;

constexpr int kThreads = 256;
constexpr int kMaxTiledKernel = 4;                   // kernel sides of the tiled path
constexpr int64_t kMaxTiledIndex = int64_t(1) << 28; // sizes and pads of the tiled path: int arithmetic
constexpr int64_t kMaxGridZ = 65535;

// ---------------------------------------------------------------- generic

template <typename scalar_t, typename acc_t>
__global__ void upfirdn2d_generic_kernel(const scalar_t* __restrict__ in, const acc_t* __restrict__ k,
                                         scalar_t* __restrict__ out, Upfirdn2dParams p, int64_t total) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(blockDim.x) * gridDim.x) {
    const int64_t ox = idx % p.out_w;
    const int64_t oy = (idx / p.out_w) % p.out_h;
    const int64_t plane = idx / (p.out_w * p.out_h);
    const AxisTaps<int64_t> tx = axis_taps<int64_t>(ox, p.up_x, p.down_x, p.pad_x0, p.kernel_w, p.in_w);
    const AxisTaps<int64_t> ty = axis_taps<int64_t>(oy, p.up_y, p.down_y, p.pad_y0, p.kernel_h, p.in_h);
    const scalar_t* in_plane = in + plane * p.in_h * p.in_w;
    acc_t acc = 0;
    for (int64_t jy = 0; jy < ty.count; ++jy) {
      const scalar_t* in_row = in_plane + (ty.i0 + jy) * p.in_w + tx.i0;
      const acc_t* k_row = k + (p.kernel_h - 1 - (ty.k0 + jy * p.up_y)) * p.kernel_w + (p.kernel_w - 1 - tx.k0);
      for (int64_t jx = 0; jx < tx.count; ++jx) {
        acc += static_cast<acc_t>(in_row[jx]) * k_row[-jx * p.up_x];
      }
    }
    out[idx] = static_cast<scalar_t>(acc);
  }
}

// ---------------------------------------------------------------- tiled

template <int UP, int DOWN, int TILE>
struct TileShape {
  // the input rows (columns) an output tile of TILE rows (columns) reads, at
  // most: floor_div(m + (TILE - 1) * DOWN + K - 1, UP) - floor_div(m, UP) + 1
  static constexpr int kIn = ((TILE - 1) * DOWN + kMaxTiledKernel - 1 + UP - 1) / UP + 1;
};

// Loads the input rectangle [iy0, iy0 + IN_H) x [ix0, ix0 + IN_W) of a plane
// (zero outside the input) into s_in.
template <typename scalar_t, typename acc_t, int IN_H, int IN_W>
__device__ void load_input_tile(const scalar_t* __restrict__ in_plane, int in_h, int in_w, int iy0, int ix0,
                                acc_t* s_in) {
  for (int i = threadIdx.x; i < IN_H * IN_W; i += blockDim.x) {
    const int y = iy0 + i / IN_W;
    const int x = ix0 + i % IN_W;
    const bool inside = y >= 0 && y < in_h && x >= 0 && x < in_w;
    s_in[i] = inside ? static_cast<acc_t>(in_plane[int64_t(y) * in_w + x]) : acc_t(0);
  }
}

// One output from the shared tile: (ly0, lx0) the local input index of the
// first tap of each axis, (ky0, kx0) that tap in the flipped kernel.
template <typename acc_t, int UP, int IN_W>
__device__ acc_t tile_output(const acc_t* s_in, const acc_t* s_k, int kh, int kw, int ly0, int ky0, int lx0, int kx0) {
  constexpr int kTaps = (kMaxTiledKernel + UP - 1) / UP;
  acc_t acc = 0;
#pragma unroll
  for (int jy = 0; jy < kTaps; ++jy) {
    const int ky = ky0 + jy * UP;
    if (ky < kh) {
      const acc_t* in_row = s_in + (ly0 + jy) * IN_W + lx0;
      const acc_t* k_row = s_k + ky * kMaxTiledKernel;
#pragma unroll
      for (int jx = 0; jx < kTaps; ++jx) {
        const int kx = kx0 + jx * UP;
        if (kx < kw) {
          acc += in_row[jx] * k_row[kx];
        }
      }
    }
  }
  return acc;
}

template <typename scalar_t, typename acc_t, int UP, int DOWN, int TILE_H, int TILE_W>
__global__ void __launch_bounds__(kThreads)
    upfirdn2d_tiled_kernel(const scalar_t* __restrict__ in, const acc_t* __restrict__ k, scalar_t* __restrict__ out,
                           int64_t planes, int in_h, int in_w, int out_h, int out_w, int kh, int kw, int pad_y0,
                           int pad_x0) {
  constexpr int IN_H = TileShape<UP, DOWN, TILE_H>::kIn;
  constexpr int IN_W = TileShape<UP, DOWN, TILE_W>::kIn;
  __shared__ acc_t s_in[IN_H * IN_W];
  __shared__ acc_t s_k[kMaxTiledKernel * kMaxTiledKernel];

  // the flipped kernel, padded to 4 x 4 with zeros (never read: taps >= kh are skipped)
  if (threadIdx.x < kMaxTiledKernel * kMaxTiledKernel) {
    const int ky = threadIdx.x / kMaxTiledKernel;
    const int kx = threadIdx.x % kMaxTiledKernel;
    s_k[threadIdx.x] = ky < kh && kx < kw ? k[(kh - 1 - ky) * kw + (kw - 1 - kx)] : acc_t(0);
  }
  const int oy0 = blockIdx.y * TILE_H;
  const int ox0 = blockIdx.x * TILE_W;
  const int my0 = oy0 * DOWN - pad_y0; // upsampled position of the tile's first tap
  const int mx0 = ox0 * DOWN - pad_x0;
  const int iy0 = floor_div(my0, UP);
  const int ix0 = floor_div(mx0, UP);

  for (int64_t plane = blockIdx.z; plane < planes; plane += gridDim.z) {
    __syncthreads(); // the previous plane's reads of s_in are done (and s_k is written)
    load_input_tile<scalar_t, acc_t, IN_H, IN_W>(in + plane * in_h * int64_t(in_w), in_h, in_w, iy0, ix0, s_in);
    __syncthreads();
    scalar_t* out_plane = out + plane * out_h * int64_t(out_w);
    for (int i = threadIdx.x; i < TILE_H * TILE_W; i += blockDim.x) {
      const int ty = i / TILE_W;
      const int tx = i % TILE_W;
      if (oy0 + ty >= out_h || ox0 + tx >= out_w) {
        continue;
      }
      const int my = my0 + ty * DOWN;
      const int mx = mx0 + tx * DOWN;
      const int ky0 = floor_mod(-my, UP);
      const int kx0 = floor_mod(-mx, UP);
      const int ly0 = floor_div(my + ky0, UP) - iy0;
      const int lx0 = floor_div(mx + kx0, UP) - ix0;
      const acc_t v = tile_output<acc_t, UP, IN_W>(s_in, s_k, kh, kw, ly0, ky0, lx0, kx0);
      out_plane[int64_t(oy0 + ty) * out_w + ox0 + tx] = static_cast<scalar_t>(v);
    }
  }
}

template <typename scalar_t, typename acc_t, int UP, int DOWN>
void launch_tiled(const scalar_t* in, const acc_t* k, scalar_t* out, const Upfirdn2dParams& p, cudaStream_t stream) {
  constexpr int TILE_H = UP == 2 ? 32 : 16; // 1024 or 512 outputs a block; input tile <= 34 x 66
  constexpr int TILE_W = 32;
  const dim3 grid(static_cast<unsigned>((p.out_w + TILE_W - 1) / TILE_W),
                  static_cast<unsigned>((p.out_h + TILE_H - 1) / TILE_H),
                  static_cast<unsigned>(std::min<int64_t>(p.planes, kMaxGridZ)));
  upfirdn2d_tiled_kernel<scalar_t, acc_t, UP, DOWN, TILE_H, TILE_W><<<grid, kThreads, 0, stream>>>(
      in, k, out, p.planes, static_cast<int>(p.in_h), static_cast<int>(p.in_w), static_cast<int>(p.out_h),
      static_cast<int>(p.out_w), static_cast<int>(p.kernel_h), static_cast<int>(p.kernel_w), static_cast<int>(p.pad_y0),
      static_cast<int>(p.pad_x0));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Whether the tiled kernel takes these params: up, down in {1, 2} (the same on
// both axes), a kernel of at most 4 x 4, sizes and pads small enough for int
// arithmetic and the grid's y limit.
bool tiled_fits(const Upfirdn2dParams& p) {
  const bool factors = p.up_x == p.up_y && p.down_x == p.down_y && p.up_x <= 2 && p.down_x <= 2;
  const bool kernel = p.kernel_h <= kMaxTiledKernel && p.kernel_w <= kMaxTiledKernel;
  const int64_t sizes[] = {p.in_h, p.in_w, p.out_h, p.out_w, std::abs(p.pad_x0), std::abs(p.pad_y0)};
  const bool small = std::all_of(std::begin(sizes), std::end(sizes), [](int64_t s) { return s < kMaxTiledIndex; });
  return factors && kernel && small && (p.out_h + 15) / 16 <= kMaxGridZ;
}

} // namespace

at::Tensor upfirdn2d_forward_cuda(const at::Tensor& input_, const at::Tensor& kernel_, const Upfirdn2dParams& p) {
  const c10::cuda::CUDAGuard guard(input_.device());
  const at::Tensor input = input_.contiguous();
  at::Tensor output = at::empty({input.size(0), input.size(1), p.out_h, p.out_w}, input.options());
  if (output.numel() == 0) {
    return output;
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::upfirdn2d (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const at::Tensor kernel = kernel_.to(at::toOpMathType(input.scalar_type())).contiguous();
    const scalar_t* in = input.const_data_ptr<scalar_t>();
    const acc_t* k = kernel.const_data_ptr<acc_t>();
    scalar_t* out = output.mutable_data_ptr<scalar_t>();
    if (tiled_fits(p)) {
      const int code = static_cast<int>(p.up_x * 10 + p.down_x);
      switch (code) {
        case 21:
          launch_tiled<scalar_t, acc_t, 2, 1>(in, k, out, p, stream);
          return;
        case 12:
          launch_tiled<scalar_t, acc_t, 1, 2>(in, k, out, p, stream);
          return;
        case 22:
          launch_tiled<scalar_t, acc_t, 2, 2>(in, k, out, p, stream);
          return;
        default:
          launch_tiled<scalar_t, acc_t, 1, 1>(in, k, out, p, stream);
          return;
      }
    }
    const int64_t total = output.numel();
    const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, int64_t(1) << 20);
    upfirdn2d_generic_kernel<scalar_t, acc_t>
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(in, k, out, p, total);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return output;
}

} // namespace kernels
} // namespace mmops

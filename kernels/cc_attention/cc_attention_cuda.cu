// CUDA kernels of cc_attention: the three products of cc_attention_math.h.
//
// energy    (ca_weight; ca_map's grad_weight): a batch of small GEMMs, one per
//           image row (the W row entries, reduced over C) and one per image
//           column (the H - 1 column entries).
// aggregate (ca_map; ca_weight's grad_t and, on transposed weights, the other
//           two gradients): per output pixel a sum over its L entries, for
//           every channel.
// transpose (the adjoint weights): a 32 x 32 shared-memory tile transpose for
//           the row entries and a coalesced gather for the column entries.
//
// Layout of the work: lane = x (32 consecutive pixels of a row: every global
// load and store is coalesced), and each thread holds a register tile (rows x
// channels, or rows x source rows) so that every value loaded is used for
// several multiply-adds. Operands that are the same for every lane of a warp
// (g[c, y, s] of the row entries, f[c, y, s] of the energies) are staged in
// shared memory and read as broadcasts. One writer per output value: no
// atomics, no zero-fill, deterministic. Sums in float for float16 / bfloat16
// (double for double). Indexing is 64-bit.

#include "cc_attention/cc_attention_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace mmops {
namespace kernels {
namespace {

using cc_attention_math::column_entry;
using cc_attention_math::column_row;

constexpr int kLanes = 32; // x of the threads of a warp
constexpr int kWarps = 4;  // warps of a block (threadIdx.y)
constexpr int kThreads = kLanes * kWarps;

// aggregate: a thread sums kAggRows rows x kAggChannels channels of one x; the
// kWarps warps of a block take consecutive channel groups of the same pixels.
constexpr int kAggRows = 8;
constexpr int kAggChannels = 8;
constexpr int kAggBlockChannels = kAggChannels * kWarps; // 32
constexpr int kAggChunk = 16;                            // row entries staged at a time
constexpr int kAggPitch = kAggBlockChannels + 4;         // shared row pitch: no bank conflicts (below)

// energy, column entries: a thread computes kColRows rows x kColSources source
// rows of one x; the warps take consecutive source-row groups.
constexpr int kColRows = 8;
constexpr int kColSources = 8;
constexpr int kColBlockSources = kColSources * kWarps; // 32

// energy, row entries: a thread computes kRowSources row entries of one pixel;
// the warps take consecutive groups; f is staged kRowChunk channels at a time.
constexpr int kRowSources = 16;
constexpr int kRowBlockSources = kRowSources * kWarps; // 64
constexpr int kRowChunk = 32;

constexpr int kTile = 32; // transpose tile

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// One launch of `blocks` blocks (1-D grid).
unsigned int grid_of(int64_t blocks) {
  TORCH_CHECK(blocks <= std::numeric_limits<int32_t>::max(),
              "mmops::cc_attention: the map is too large for one launch (", blocks, " thread blocks)");
  return static_cast<unsigned int>(blocks);
}

// N consecutive accumulators from shared memory, 16 bytes at a time (the
// callers' offsets are multiples of 16 bytes; the loads are warp broadcasts).
template <int N, typename acc_t>
__device__ __forceinline__ void load_shared(const acc_t* p, acc_t (&v)[N]) {
  if constexpr (std::is_same_v<acc_t, float> && N % 4 == 0) {
#pragma unroll
    for (int q = 0; q < N / 4; ++q) {
      const float4 f4 = reinterpret_cast<const float4*>(p)[q];
      v[4 * q] = f4.x;
      v[4 * q + 1] = f4.y;
      v[4 * q + 2] = f4.z;
      v[4 * q + 3] = f4.w;
    }
  } else if constexpr (std::is_same_v<acc_t, double> && N % 2 == 0) {
#pragma unroll
    for (int q = 0; q < N / 2; ++q) {
      const double2 d2 = reinterpret_cast<const double2*>(p)[q];
      v[2 * q] = d2.x;
      v[2 * q + 1] = d2.y;
    }
  } else {
#pragma unroll
    for (int q = 0; q < N; ++q) {
      v[q] = p[q];
    }
  }
}

// ---------------------------------------------------------------------------- aggregate
//
// out[n, c, y, x] = sum_{s < W} w[n, s, y, x] * g[n, c, y, s]
//                 + sum_{j != y} w[n, W + column_entry(j, y), y, x] * g[n, c, j, x]
//
// Block tile: 32 x (lanes) x kAggRows rows x kAggBlockChannels channels; thread
// tile kAggRows x kAggChannels. Tiles: x fastest, then rows, channel groups, images.
// Column part: per source row j, kAggChannels loads of g and kAggRows of w
// (coalesced over x) feed 64 multiply-adds. Row part: g[c, y, s] is the same
// for every lane: the block stages kAggChunk entries of its rows and channels in
// shared memory ([row][s][channel], pitch kAggPitch) and each thread reads its
// channels as 16-byte broadcasts; w[n, s, y, x] is coalesced over x.
// Out-of-range lanes, rows and channels compute on clamped (in-bounds) indices
// and are never stored; every block reaches every __syncthreads().
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    aggregate_kernel(const scalar_t* __restrict__ w, const scalar_t* __restrict__ g, scalar_t* __restrict__ out,
                     int64_t C, int64_t H, int64_t W, int64_t x_tiles, int64_t y_tiles, int64_t c_tiles) {
  using acc_t = at::opmath_type<scalar_t>;
  constexpr int TY = kAggRows, TC = kAggChannels, CB = kAggBlockChannels, SCH = kAggChunk, PITCH = kAggPitch;
  __shared__ __align__(16) acc_t s_g[TY * SCH * PITCH];

  const int lane = threadIdx.x, warp = threadIdx.y, tid = warp * kLanes + lane;
  int64_t tile = blockIdx.x;
  const int64_t xt = tile % x_tiles;
  tile /= x_tiles;
  const int64_t yt = tile % y_tiles;
  tile /= y_tiles;
  const int64_t ct = tile % c_tiles;
  const int64_t n = tile / c_tiles;

  const int64_t HW = H * W, L = H + W - 1;
  const int64_t x = xt * kLanes + lane, y0 = yt * TY, cb = ct * CB, c0 = cb + warp * TC;
  const int64_t xc = x < W ? x : W - 1;
  const scalar_t* w_n = w + n * L * HW;
  const scalar_t* g_n = g + n * C * HW;

  // y * W of the thread's rows; rows past the map repeat the last row (never stored)
  int64_t y_off[TY];
#pragma unroll
  for (int i = 0; i < TY; ++i) {
    y_off[i] = (y0 + i < H ? y0 + i : H - 1) * W;
  }
  const scalar_t* g_x = g_n + xc;
  int64_t c_off[TC];
#pragma unroll
  for (int cc = 0; cc < TC; ++cc) {
    c_off[cc] = (c0 + cc < C ? c0 + cc : C - 1) * HW;
  }

  acc_t acc[TY][TC];
#pragma unroll
  for (int i = 0; i < TY; ++i) {
#pragma unroll
    for (int cc = 0; cc < TC; ++cc) {
      acc[i][cc] = acc_t(0);
    }
  }

  // Column entries: source row j of every row but j itself.
  const scalar_t* w_col = w_n + W * HW + xc; // w[n, W, 0, x]
  for (int64_t j = 0; j < H; ++j) {
    acc_t gv[TC];
#pragma unroll
    for (int cc = 0; cc < TC; ++cc) {
      gv[cc] = static_cast<acc_t>(g_x[c_off[cc] + j * W]);
    }
    // entry j of rows below j, j - 1 of rows above (cc_attention_math.h column_entry)
    const int64_t jw = j * W, entry_below = j * HW, entry_above = (j - 1) * HW;
#pragma unroll
    for (int i = 0; i < TY; ++i) {
      if (jw == y_off[i]) { // j == y: the pixel itself is a row entry; uniform over the warp
        continue;
      }
      const acc_t a = static_cast<acc_t>(w_col[(jw < y_off[i] ? entry_below : entry_above) + y_off[i]]);
#pragma unroll
      for (int cc = 0; cc < TC; ++cc) {
        acc[i][cc] += a * gv[cc];
      }
    }
  }

  // Row entries: g[c, y, s] staged per chunk of kAggChunk entries. The staging
  // map puts 8 consecutive s x 4 consecutive channels in a warp: 32-byte
  // segments of g, and banks (4 s + c) mod 32 of the pitch 36: no conflicts.
  for (int64_t s0 = 0; s0 < W; s0 += SCH) {
    __syncthreads(); // the previous chunk is consumed
    for (int e = tid; e < TY * SCH * CB; e += kThreads) {
      const int s_lo = e & 7, c_lo = (e >> 3) & 3;
      int rest = e >> 5;
      const int s_hi = rest % (SCH / 8);
      rest /= SCH / 8;
      const int c_hi = rest % (CB / 4);
      const int i = rest / (CB / 4);
      const int s = s_hi * 8 + s_lo, cc = c_hi * 4 + c_lo;
      const int64_t c = cb + cc, ss = s0 + s;
      acc_t value = acc_t(0);
      if (c < C && ss < W) {
        value = static_cast<acc_t>(g_n[c * HW + (y0 + i < H ? y0 + i : H - 1) * W + ss]);
      }
      s_g[(i * SCH + s) * PITCH + cc] = value;
    }
    __syncthreads();
    const int64_t s_end = W - s0 < SCH ? W - s0 : SCH;
    for (int s = 0; s < s_end; ++s) {
      const scalar_t* w_s = w_n + (s0 + s) * HW + xc;
#pragma unroll
      for (int i = 0; i < TY; ++i) {
        const acc_t a = static_cast<acc_t>(w_s[y_off[i]]);
        acc_t gv[TC];
        load_shared<TC>(&s_g[(i * SCH + s) * PITCH + warp * TC], gv);
#pragma unroll
        for (int cc = 0; cc < TC; ++cc) {
          acc[i][cc] += a * gv[cc];
        }
      }
    }
  }

  if (x >= W) {
    return;
  }
  scalar_t* out_x = out + n * C * HW + x;
#pragma unroll
  for (int i = 0; i < TY; ++i) {
    if (y0 + i >= H) {
      break;
    }
#pragma unroll
    for (int cc = 0; cc < TC; ++cc) {
      if (c0 + cc < C) {
        out_x[(c0 + cc) * HW + (y0 + i) * W] = static_cast<scalar_t>(acc[i][cc]);
      }
    }
  }
}

// ---------------------------------------------------------------------------- energy
//
// Column entries: E[n, W + column_entry(j, y), y, x] = sum_c t[n, c, y, x] * f[n, c, j, x], j != y.
//   Block tile: 32 x x kColRows rows y x kColBlockSources rows j; thread tile
//   kColRows x kColSources: per channel 16 coalesced loads feed 64 multiply-adds.
// Row entries: E[n, s, y, x] = sum_c t[n, c, y, x] * f[n, c, y, s].
//   Block tile: 32 x x one row y x kRowBlockSources entries s; f[c, y, s] (the
//   same for every lane) is staged kRowChunk channels at a time ([c][s]) and
//   read as 16-byte broadcasts: per channel one load of t feeds kRowSources
//   multiply-adds.
// The first col_tiles blocks do column tiles, the others row tiles (the branch
// is uniform over a block).
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    energy_kernel(const scalar_t* __restrict__ t, const scalar_t* __restrict__ f, scalar_t* __restrict__ out, int64_t C,
                  int64_t H, int64_t W, int64_t x_tiles, int64_t col_y_tiles, int64_t col_j_tiles, int64_t col_tiles,
                  int64_t row_s_tiles) {
  using acc_t = at::opmath_type<scalar_t>;
  __shared__ __align__(16) acc_t s_f[kRowChunk * kRowBlockSources];

  const int lane = threadIdx.x, warp = threadIdx.y, tid = warp * kLanes + lane;
  const int64_t HW = H * W, L = H + W - 1;
  int64_t tile = blockIdx.x;
  const bool column = tile < col_tiles;
  if (!column) {
    tile -= col_tiles;
  }
  const int64_t xt = tile % x_tiles;
  tile /= x_tiles;
  const int64_t x = xt * kLanes + lane;
  const int64_t xc = x < W ? x : W - 1;

  if (column) {
    constexpr int TY = kColRows, TJ = kColSources;
    const int64_t yt = tile % col_y_tiles;
    tile /= col_y_tiles;
    const int64_t jt = tile % col_j_tiles;
    const int64_t n = tile / col_j_tiles;
    const int64_t y0 = yt * TY, j0 = jt * kColBlockSources + warp * TJ;
    const scalar_t* t_x = t + n * C * HW + xc;
    const scalar_t* f_x = f + n * C * HW + xc;
    int64_t y_off[TY], j_off[TJ];
#pragma unroll
    for (int i = 0; i < TY; ++i) {
      y_off[i] = (y0 + i < H ? y0 + i : H - 1) * W;
    }
#pragma unroll
    for (int m = 0; m < TJ; ++m) {
      j_off[m] = (j0 + m < H ? j0 + m : H - 1) * W;
    }
    acc_t acc[TY][TJ];
#pragma unroll
    for (int i = 0; i < TY; ++i) {
#pragma unroll
      for (int m = 0; m < TJ; ++m) {
        acc[i][m] = acc_t(0);
      }
    }
    for (int64_t c = 0; c < C; ++c) {
      const int64_t plane = c * HW;
      acc_t tv[TY], fv[TJ];
#pragma unroll
      for (int i = 0; i < TY; ++i) {
        tv[i] = static_cast<acc_t>(t_x[plane + y_off[i]]);
      }
#pragma unroll
      for (int m = 0; m < TJ; ++m) {
        fv[m] = static_cast<acc_t>(f_x[plane + j_off[m]]);
      }
#pragma unroll
      for (int i = 0; i < TY; ++i) {
#pragma unroll
        for (int m = 0; m < TJ; ++m) {
          acc[i][m] += tv[i] * fv[m];
        }
      }
    }
    if (x >= W) {
      return;
    }
    scalar_t* out_x = out + (n * L + W) * HW + x; // E[n, W, 0, x]
#pragma unroll
    for (int i = 0; i < TY; ++i) {
      const int64_t y = y0 + i;
#pragma unroll
      for (int m = 0; m < TJ; ++m) {
        const int64_t j = j0 + m;
        if (y < H && j < H && j != y) {
          out_x[column_entry(j, y) * HW + y * W] = static_cast<scalar_t>(acc[i][m]);
        }
      }
    }
    return;
  }

  // row entries
  constexpr int TS = kRowSources, SB = kRowBlockSources, CC = kRowChunk;
  const int64_t y = tile % H;
  tile /= H;
  const int64_t st = tile % row_s_tiles;
  const int64_t n = tile / row_s_tiles;
  const int64_t s_base = st * SB;
  const scalar_t* t_x = t + n * C * HW + y * W + xc;
  const scalar_t* f_row = f + n * C * HW + y * W; // f[n, 0, y, 0]
  acc_t acc[TS];
#pragma unroll
  for (int m = 0; m < TS; ++m) {
    acc[m] = acc_t(0);
  }
  for (int64_t c0 = 0; c0 < C; c0 += CC) {
    __syncthreads(); // the previous chunk is consumed
    for (int e = tid; e < CC * SB; e += kThreads) {
      const int cc = e / SB, s = e % SB; // consecutive threads: consecutive s (coalesced, no conflicts)
      const int64_t c = c0 + cc, ss = s_base + s;
      s_f[e] = (c < C && ss < W) ? static_cast<acc_t>(f_row[c * HW + ss]) : acc_t(0);
    }
    __syncthreads();
    const int64_t c_end = C - c0 < CC ? C - c0 : CC;
    for (int cc = 0; cc < c_end; ++cc) {
      const acc_t tv = static_cast<acc_t>(t_x[(c0 + cc) * HW]);
      acc_t fv[TS];
      load_shared<TS>(&s_f[cc * SB + warp * TS], fv);
#pragma unroll
      for (int m = 0; m < TS; ++m) {
        acc[m] += tv * fv[m];
      }
    }
  }
  if (x >= W) {
    return;
  }
  scalar_t* out_x = out + n * L * HW + y * W + x; // E[n, 0, y, x]
#pragma unroll
  for (int m = 0; m < TS; ++m) {
    const int64_t s = s_base + warp * TS + m;
    if (s < W) {
      out_x[s * HW] = static_cast<scalar_t>(acc[m]);
    }
  }
}

// ---------------------------------------------------------------------------- transpose
//
// Row entries: out[n, s, y, x] = w[n, x, y, s], per (n, y) a W x W transpose in
// 32 x 32 shared tiles (reads coalesced over s, writes over x). Block (32, 8).
template <typename scalar_t>
__global__ void __launch_bounds__(kTile * 8)
    transpose_rows_kernel(const scalar_t* __restrict__ w, scalar_t* __restrict__ out, int64_t H, int64_t W,
                          int64_t tiles_w) {
  __shared__ scalar_t tile[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  int64_t b = blockIdx.x;
  const int64_t xt = b % tiles_w;
  b /= tiles_w;
  const int64_t st = b % tiles_w;
  b /= tiles_w;
  const int64_t y = b % H;
  const int64_t n = b / H;
  const int64_t HW = H * W, L = H + W - 1;
  const scalar_t* w_n = w + n * L * HW + y * W;
  scalar_t* out_n = out + n * L * HW + y * W;
  const int64_t x0 = xt * kTile, s0 = st * kTile;
#pragma unroll
  for (int r = 0; r < kTile; r += 8) {
    const int64_t xx = x0 + ty + r, ss = s0 + tx;
    if (xx < W && ss < W) {
      tile[ty + r][tx] = w_n[xx * HW + ss]; // w[n, x, y, s]
    }
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < kTile; r += 8) {
    const int64_t ss = s0 + ty + r, xx = x0 + tx;
    if (xx < W && ss < W) {
      out_n[ss * HW + xx] = tile[tx][ty + r]; // out[n, s, y, x]
    }
  }
}

// Column entries: out[n, W + i, y, x] = w[n, W + column_entry(y, j), j, x], j = column_row(i, y);
// one thread per value, coalesced over x. Grid-stride.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    transpose_columns_kernel(const scalar_t* __restrict__ w, scalar_t* __restrict__ out, int64_t total, int64_t H,
                             int64_t W) {
  const int64_t HW = H * W, L = H + W - 1, per_image = (H - 1) * HW;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = e / per_image, r = e - n * per_image;
    const int64_t i = r / HW, yx = r - i * HW;
    const int64_t y = yx / W, x = yx - y * W;
    const int64_t j = column_row(i, y);
    const int64_t image = n * L * HW;
    out[image + (W + i) * HW + yx] = w[image + (W + column_entry(y, j)) * HW + j * W + x];
  }
}

// ---------------------------------------------------------------------------- launches

#define MMOPS_CC_DISPATCH(dtype, name, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, name, __VA_ARGS__)

at::Tensor energy(const at::Tensor& t_in, const at::Tensor& f_in, const CcAttentionParams& p) {
  const at::Tensor t = t_in.contiguous(), f = f_in.contiguous();
  const int64_t N = p.batch, C = p.channels, H = p.height, W = p.width, L = p.length();
  at::Tensor out = at::empty({N, L, H, W}, t.options());
  if (out.numel() == 0) {
    return out;
  }
  const int64_t x_tiles = ceil_div(W, kLanes);
  const int64_t col_y_tiles = ceil_div(H, kColRows), col_j_tiles = ceil_div(H, kColBlockSources);
  const int64_t col_tiles = H > 1 ? N * col_j_tiles * col_y_tiles * x_tiles : 0; // H == 1: no column entries
  const int64_t row_s_tiles = ceil_div(W, kRowBlockSources);
  const int64_t row_tiles = N * row_s_tiles * H * x_tiles;
  const unsigned int blocks = grid_of(col_tiles + row_tiles);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  MMOPS_CC_DISPATCH(t.scalar_type(), "mmops::cc_attention energy (CUDA)", [&] {
    energy_kernel<scalar_t><<<blocks, dim3(kLanes, kWarps), 0, stream>>>(
        t.const_data_ptr<scalar_t>(), f.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), C, H, W, x_tiles,
        col_y_tiles, col_j_tiles, col_tiles, row_s_tiles);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

at::Tensor aggregate(const at::Tensor& w_in, const at::Tensor& g_in, const CcAttentionParams& p) {
  const at::Tensor w = w_in.contiguous(), g = g_in.contiguous();
  const int64_t N = p.batch, C = p.channels, H = p.height, W = p.width;
  at::Tensor out = at::empty({N, C, H, W}, g.options());
  if (out.numel() == 0) {
    return out;
  }
  const int64_t x_tiles = ceil_div(W, kLanes), y_tiles = ceil_div(H, kAggRows);
  const int64_t c_tiles = ceil_div(C, kAggBlockChannels);
  const unsigned int blocks = grid_of(N * c_tiles * y_tiles * x_tiles);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  MMOPS_CC_DISPATCH(g.scalar_type(), "mmops::cc_attention aggregate (CUDA)", [&] {
    aggregate_kernel<scalar_t><<<blocks, dim3(kLanes, kWarps), 0, stream>>>(
        w.const_data_ptr<scalar_t>(), g.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), C, H, W, x_tiles,
        y_tiles, c_tiles);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

at::Tensor transpose(const at::Tensor& w_in, const CcAttentionParams& p) {
  const at::Tensor w = w_in.contiguous();
  const int64_t N = p.batch, H = p.height, W = p.width;
  at::Tensor out = at::empty_like(w, at::MemoryFormat::Contiguous);
  if (out.numel() == 0) {
    return out;
  }
  const int64_t tiles_w = ceil_div(W, kTile);
  const unsigned int row_blocks = grid_of(N * H * tiles_w * tiles_w);
  const int64_t column_values = N * (H - 1) * H * W;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  MMOPS_CC_DISPATCH(w.scalar_type(), "mmops::cc_attention transpose (CUDA)", [&] {
    transpose_rows_kernel<scalar_t><<<row_blocks, dim3(kTile, 8), 0, stream>>>(
        w.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), H, W, tiles_w);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (column_values > 0) {
      const int64_t blocks = std::min<int64_t>(ceil_div(column_values, kThreads), int64_t(1) << 20);
      transpose_columns_kernel<scalar_t><<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(
          w.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), column_values, H, W);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
  return out;
}

} // namespace

at::Tensor ca_weight_forward_cuda(const at::Tensor& t, const at::Tensor& f, const CcAttentionParams& params) {
  const c10::cuda::CUDAGuard guard(t.device());
  return energy(t, f, params);
}

std::tuple<at::Tensor, at::Tensor> ca_weight_backward_cuda(const at::Tensor& grad_weight, const at::Tensor& t,
                                                           const at::Tensor& f, const CcAttentionParams& params) {
  const c10::cuda::CUDAGuard guard(t.device());
  at::Tensor grad_t = aggregate(grad_weight, f, params);
  at::Tensor grad_f = aggregate(transpose(grad_weight, params), t, params);
  return {grad_t, grad_f};
}

at::Tensor ca_map_forward_cuda(const at::Tensor& weight, const at::Tensor& g, const CcAttentionParams& params) {
  const c10::cuda::CUDAGuard guard(g.device());
  return aggregate(weight, g, params);
}

std::tuple<at::Tensor, at::Tensor> ca_map_backward_cuda(const at::Tensor& grad_out, const at::Tensor& weight,
                                                        const at::Tensor& g, const CcAttentionParams& params) {
  const c10::cuda::CUDAGuard guard(g.device());
  at::Tensor grad_weight = energy(grad_out, g, params);
  at::Tensor grad_g = aggregate(transpose(weight, params), grad_out, params);
  return {grad_weight, grad_g};
}

} // namespace kernels
} // namespace mmops

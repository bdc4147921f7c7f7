// CUDA kernels of filtered_lrelu (filtered_lrelu_math.h). NCHW; a
// non-contiguous input is made contiguous first; the filters go to the
// accumulation type (float; double for double) once, flipped for the
// gradient of input.
//
// Fused (one kernel per pass): a block owns a tile of tile_h x tile_w outputs
// of one plane (and walks planes with a grid stride). Its phases:
//   load_filters            both filters into shared memory (once per block);
//   load_input_tile         the signal rectangle the tile reads (+ bias in the
//                           forward), zero outside the signal, coalesced rows;
//   upsample_filter_tile    stage 1 into a shared intermediate tile (only the
//                           taps that hit a multiple of up: ceil(k1 / up) per
//                           axis), then the pointwise step: leaky ReLU, gain,
//                           clamp (the forward, writing the mask bytes this
//                           tile owns) or times the recorded derivative;
//   filter_downsample_tile  stage 2 from the shared tile, one output a thread.
// The tile side: of 32, 16, 8 (smaller only when none of those fits) whose
// shared memory (input tile + intermediate tile + filters) fits in 48 KiB,
// the one with the fewest multiply-adds.
// Generic (a pass no tile fits: huge filters or factors, sizes past int): the
// same two stages through a global scratch intermediate, one thread a sample
// (64-bit grid stride).
// Both sum in the CPU's order (ky, then kx); the tiles add the zero taps of
// the padding too and the compiler may fuse multiply-adds, so results agree
// with the CPU to rounding, not bitwise.

#include "filtered_lrelu/filtered_lrelu_kernels.h"

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

using namespace filtered_lrelu_math;

constexpr int kThreads = 256;
constexpr int64_t kMaxGridYZ = 65535;
constexpr int64_t kMaxSharedBytes = 48 * 1024;
constexpr int64_t kMaxTiledIndex = int64_t(1) << 28; // sizes and offsets of the fused path: int arithmetic

enum class Pointwise : int {
  kActivate,          // the forward
  kActivateAndRecord, // the forward, writing the mask
  kMasked,            // the backward passes: times the recorded derivative
};

// ---------------------------------------------------------------- fused

// One axis of the fused pass in int, with its tile sizes.
struct TileAxis {
  int in, up, off1, k1, mid, down, off2, k2, out;
  int tile;     // outputs per tile
  int mid_tile; // intermediate samples a tile computes: tile * down + k2 - 1 (its own and the tail)
  int in_tile;  // signal samples a tile reads: (mid_tile + k1 - 2) / up + 2 at most
};

TileAxis tile_axis(const PassAxis& a, int tile) {
  TileAxis t{};
  t.in = static_cast<int>(a.in);
  t.up = static_cast<int>(a.up);
  t.off1 = static_cast<int>(a.off1);
  t.k1 = static_cast<int>(a.k1);
  t.mid = static_cast<int>(a.mid);
  t.down = static_cast<int>(a.down);
  t.off2 = static_cast<int>(a.off2);
  t.k2 = static_cast<int>(a.k2);
  t.out = static_cast<int>(a.out);
  t.tile = tile;
  t.mid_tile = tile * t.down + t.k2 - 1;
  t.in_tile = (t.mid_tile + t.k1 - 2) / t.up + 2;
  return t;
}

template <typename acc_t>
struct FusedPass {
  TileAxis x, y;
  int64_t planes;
  int64_t channels;
  acc_t gain, slope, clamp;
};

// Shared memory of a tile: the input tile, the intermediate tile, both filters.
template <typename acc_t>
int64_t shared_bytes(const TileAxis& x, const TileAxis& y) {
  const int64_t values =
      int64_t(x.in_tile) * y.in_tile + int64_t(x.mid_tile) * y.mid_tile + int64_t(x.k1) * y.k1 + int64_t(x.k2) * y.k2;
  return values * static_cast<int64_t>(sizeof(acc_t));
}

template <typename acc_t>
__device__ void load_filters(const acc_t* __restrict__ k1, const acc_t* __restrict__ k2, int n1, int n2, acc_t* s_k1,
                             acc_t* s_k2) {
  for (int i = threadIdx.x; i < n1; i += blockDim.x) {
    s_k1[i] = k1[i];
  }
  for (int i = threadIdx.x; i < n2; i += blockDim.x) {
    s_k2[i] = k2[i];
  }
}

// The signal rectangle [iy0, iy0 + in_tile_h) x [ix0, ix0 + in_tile_w) of a plane, + b inside the
// signal, 0 outside.
template <typename scalar_t, typename acc_t>
__device__ void load_input_tile(const scalar_t* __restrict__ z, acc_t b, const TileAxis& x, const TileAxis& y, int iy0,
                                int ix0, acc_t* s_in) {
  for (int i = threadIdx.x; i < y.in_tile * x.in_tile; i += blockDim.x) {
    const int iy = iy0 + i / x.in_tile;
    const int ix = ix0 + i % x.in_tile;
    const bool inside = iy >= 0 && iy < y.in && ix >= 0 && ix < x.in;
    s_in[i] = inside ? static_cast<acc_t>(z[int64_t(iy) * x.in + ix]) + b : acc_t(0);
  }
}

// Stage 1 of the intermediate sample (my, mx) from the input tile (origin iy0, ix0).
template <typename acc_t>
__device__ acc_t stage1_sample(const acc_t* s_in, const acc_t* s_k1, const TileAxis& x, const TileAxis& y, int my,
                               int mx, int iy0, int ix0) {
  const int py = my + y.off1;
  const int px = mx + x.off1;
  const int ky0 = floor_mod(-py, y.up);
  const int kx0 = floor_mod(-px, x.up);
  const int ly0 = floor_div(py + ky0, y.up) - iy0;
  const int lx0 = floor_div(px + kx0, x.up) - ix0;
  acc_t acc = 0;
  for (int ky = ky0, ly = ly0; ky < y.k1; ky += y.up, ++ly) {
    const acc_t* in_row = s_in + ly * x.in_tile;
    const acc_t* k_row = s_k1 + (y.k1 - 1 - ky) * x.k1 + (x.k1 - 1);
    for (int kx = kx0, lx = lx0; kx < x.k1; kx += x.up, ++lx) {
      acc += in_row[lx] * k_row[-kx];
    }
  }
  return acc;
}

// Stage 1 and the pointwise step of the tile's intermediate samples (origin my0, mx0) into s_mid;
// outside [0, mid) they are 0. The forward writes the mask bytes the tile owns: its first
// tile * down rows and columns, and the tail of the last tile.
template <typename acc_t, Pointwise MODE>
__device__ void upsample_filter_tile(const acc_t* s_in, const acc_t* s_k1, const FusedPass<acc_t>& p, int my0, int mx0,
                                     int iy0, int ix0, uint8_t* __restrict__ mask, acc_t* s_mid) {
  const TileAxis& x = p.x;
  const TileAxis& y = p.y;
  const bool last_row = blockIdx.y == gridDim.y - 1;
  const bool last_col = blockIdx.x == gridDim.x - 1;
  for (int i = threadIdx.x; i < y.mid_tile * x.mid_tile; i += blockDim.x) {
    const int ly = i / x.mid_tile;
    const int lx = i % x.mid_tile;
    const int my = my0 + ly;
    const int mx = mx0 + lx;
    if (my < 0 || my >= y.mid || mx < 0 || mx >= x.mid) {
      s_mid[i] = acc_t(0);
      continue;
    }
    acc_t v = stage1_sample(s_in, s_k1, x, y, my, mx, iy0, ix0);
    const int64_t m = int64_t(my) * x.mid + mx;
    if constexpr (MODE == Pointwise::kMasked) {
      v *= mask_factor<acc_t>(mask[m], p.gain, p.slope);
    } else {
      uint8_t code = 0;
      v = lrelu_gain_clamp<acc_t>(v, p.gain, p.slope, p.clamp, code);
      if constexpr (MODE == Pointwise::kActivateAndRecord) {
        const bool owned = (ly < y.tile * y.down || last_row) && (lx < x.tile * x.down || last_col);
        if (owned) {
          mask[m] = code;
        }
      }
    }
    s_mid[i] = v;
  }
}

// Stage 2: the tile's outputs (origin oy0, ox0) from s_mid.
template <typename scalar_t, typename acc_t>
__device__ void filter_downsample_tile(const acc_t* s_mid, const acc_t* s_k2, const TileAxis& x, const TileAxis& y,
                                       int oy0, int ox0, scalar_t* __restrict__ out) {
  for (int i = threadIdx.x; i < y.tile * x.tile; i += blockDim.x) {
    const int ty = i / x.tile;
    const int tx = i % x.tile;
    if (oy0 + ty >= y.out || ox0 + tx >= x.out) {
      continue;
    }
    acc_t acc = 0;
    for (int ky = 0; ky < y.k2; ++ky) {
      const acc_t* mid_row = s_mid + (ty * y.down + ky) * x.mid_tile + tx * x.down;
      const acc_t* k_row = s_k2 + (y.k2 - 1 - ky) * x.k2 + (x.k2 - 1);
      for (int kx = 0; kx < x.k2; ++kx) {
        acc += mid_row[kx] * k_row[-kx];
      }
    }
    out[int64_t(oy0 + ty) * x.out + ox0 + tx] = static_cast<scalar_t>(acc);
  }
}

template <typename scalar_t, typename acc_t, Pointwise MODE>
__global__ void __launch_bounds__(kThreads)
    fused_pass_kernel(const scalar_t* __restrict__ z, const scalar_t* __restrict__ bias, const acc_t* __restrict__ k1,
                      const acc_t* __restrict__ k2, uint8_t* __restrict__ mask, scalar_t* __restrict__ out,
                      FusedPass<acc_t> p) {
  extern __shared__ __align__(16) unsigned char shared_raw[];
  acc_t* s_in = reinterpret_cast<acc_t*>(shared_raw);
  acc_t* s_mid = s_in + p.y.in_tile * p.x.in_tile;
  acc_t* s_k1 = s_mid + p.y.mid_tile * p.x.mid_tile;
  acc_t* s_k2 = s_k1 + p.y.k1 * p.x.k1;
  load_filters(k1, k2, p.y.k1 * p.x.k1, p.y.k2 * p.x.k2, s_k1, s_k2);

  const int oy0 = blockIdx.y * p.y.tile;
  const int ox0 = blockIdx.x * p.x.tile;
  const int my0 = oy0 * p.y.down + p.y.off2; // the tile's first intermediate sample
  const int mx0 = ox0 * p.x.down + p.x.off2;
  const int iy0 = floor_div(my0 + p.y.off1, p.y.up); // the first signal sample it reads
  const int ix0 = floor_div(mx0 + p.x.off1, p.x.up);
  const int64_t in_plane = int64_t(p.y.in) * p.x.in;
  const int64_t mid_plane = int64_t(p.y.mid) * p.x.mid;
  const int64_t out_plane = int64_t(p.y.out) * p.x.out;

  for (int64_t plane = blockIdx.z; plane < p.planes; plane += gridDim.z) {
    __syncthreads(); // the previous plane's reads of the tiles are done (and the filters are loaded)
    const acc_t b = bias != nullptr ? static_cast<acc_t>(bias[plane % p.channels]) : acc_t(0);
    load_input_tile(z + plane * in_plane, b, p.x, p.y, iy0, ix0, s_in);
    __syncthreads();
    upsample_filter_tile<acc_t, MODE>(s_in, s_k1, p, my0, mx0, iy0, ix0,
                                      mask != nullptr ? mask + plane * mid_plane : nullptr, s_mid);
    __syncthreads();
    filter_downsample_tile(s_mid, s_k2, p.x, p.y, oy0, ox0, out + plane * out_plane);
  }
}

// Whether a pass has int-sized geometry and a grid within the limits (at the smallest tile).
bool fused_sizes_fit(const PassAxis& ax, const PassAxis& ay) {
  for (const PassAxis* a : {&ax, &ay}) {
    // the products: a tile's first intermediate (o * down) and signal (i * up) positions
    const int64_t values[] = {
        a->in, a->mid, a->out, a->k1, a->k2, a->in * a->up, a->out * a->down, std::abs(a->off1), std::abs(a->off2)};
    if (!std::all_of(std::begin(values), std::end(values), [](int64_t v) { return v < kMaxTiledIndex; })) {
      return false;
    }
  }
  return true;
}

// The multiply-adds of a pass with tiles of side `tile`, counted per thread slot: a phase over n
// items takes ceil(n / kThreads) rounds of the whole block (partial tiles compute in full).
int64_t fused_cost(const PassAxis& ax, const PassAxis& ay, int tile) {
  const TileAxis x = tile_axis(ax, tile), y = tile_axis(ay, tile);
  const auto slots = [](int64_t n) { return (n + kThreads - 1) / kThreads * kThreads; };
  const int64_t tiles = ((ax.out + tile - 1) / tile) * ((ay.out + tile - 1) / tile);
  const int64_t stage1 =
      slots(int64_t(x.mid_tile) * y.mid_tile) * ((x.k1 + x.up - 1) / x.up) * ((y.k1 + y.up - 1) / y.up);
  const int64_t stage2 = slots(int64_t(tile) * tile) * x.k2 * y.k2;
  return tiles * (stage1 + stage2);
}

// The tile side: of 32, 16, ..., 1 those whose shared memory fits in 48 KiB (and grid y in its
// limit); of those down to 8, the one with the fewest multiply-adds (a small output wastes most
// of a large tile, a small tile recomputes its halo), else the largest; 0: none fits.
template <typename acc_t>
int pick_tile(const PassAxis& ax, const PassAxis& ay) {
  if (!fused_sizes_fit(ax, ay)) {
    return 0;
  }
  int best = 0;
  int64_t best_cost = 0;
  for (int tile = 32; tile >= 1; tile /= 2) {
    const TileAxis x = tile_axis(ax, tile), y = tile_axis(ay, tile);
    if (shared_bytes<acc_t>(x, y) > kMaxSharedBytes || (ay.out + tile - 1) / tile > kMaxGridYZ) {
      continue;
    }
    if (best != 0 && tile < 8) {
      break;
    }
    const int64_t cost = fused_cost(ax, ay, tile);
    if (best == 0 || cost < best_cost) {
      best = tile;
      best_cost = cost;
    }
  }
  return best;
}

template <typename scalar_t, typename acc_t, Pointwise MODE>
void launch_fused(const scalar_t* z, const scalar_t* bias, const acc_t* k1, const acc_t* k2, uint8_t* mask,
                  scalar_t* out, const PassAxis& ax, const PassAxis& ay, int64_t planes, int64_t channels,
                  const FilteredLreluParams& params, int tile, cudaStream_t stream) {
  FusedPass<acc_t> p{};
  p.x = tile_axis(ax, tile);
  p.y = tile_axis(ay, tile);
  p.planes = planes;
  p.channels = channels;
  p.gain = static_cast<acc_t>(params.gain);
  p.slope = static_cast<acc_t>(params.slope);
  p.clamp = static_cast<acc_t>(params.clamp);
  const dim3 grid(static_cast<unsigned>((ax.out + tile - 1) / tile), static_cast<unsigned>((ay.out + tile - 1) / tile),
                  static_cast<unsigned>(std::min<int64_t>(planes, kMaxGridYZ)));
  const size_t bytes = static_cast<size_t>(shared_bytes<acc_t>(p.x, p.y));
  fused_pass_kernel<scalar_t, acc_t, MODE><<<grid, kThreads, bytes, stream>>>(z, bias, k1, k2, mask, out, p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// ---------------------------------------------------------------- generic

// Stage 1 and the pointwise step of every intermediate sample into scratch (acc_t).
template <typename scalar_t, typename acc_t, Pointwise MODE>
__global__ void generic_stage1_kernel(const scalar_t* __restrict__ z, const scalar_t* __restrict__ bias,
                                      const acc_t* __restrict__ k1, uint8_t* __restrict__ mask,
                                      acc_t* __restrict__ scratch, PassAxis ax, PassAxis ay, int64_t channels,
                                      acc_t gain, acc_t slope, acc_t clamp, int64_t total) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(blockDim.x) * gridDim.x) {
    const int64_t mx = idx % ax.mid;
    const int64_t my = (idx / ax.mid) % ay.mid;
    const int64_t plane = idx / (ax.mid * ay.mid);
    const Taps<int64_t> tx = axis_taps<int64_t>(mx + ax.off1, ax.up, ax.k1, ax.in);
    const Taps<int64_t> ty = axis_taps<int64_t>(my + ay.off1, ay.up, ay.k1, ay.in);
    const scalar_t* zp = z + plane * ay.in * ax.in;
    const acc_t b = bias != nullptr ? static_cast<acc_t>(bias[plane % channels]) : acc_t(0);
    acc_t acc = 0;
    for (int64_t jy = 0; jy < ty.count; ++jy) {
      const scalar_t* row = zp + (ty.i0 + jy) * ax.in + tx.i0;
      const acc_t* k_row = k1 + (ay.k1 - 1 - (ty.k0 + jy * ay.up)) * ax.k1 + (ax.k1 - 1 - tx.k0);
      for (int64_t jx = 0; jx < tx.count; ++jx) {
        acc += (static_cast<acc_t>(row[jx]) + b) * k_row[-jx * ax.up];
      }
    }
    if constexpr (MODE == Pointwise::kMasked) {
      acc *= mask_factor<acc_t>(mask[idx], gain, slope);
    } else {
      uint8_t code = 0;
      acc = lrelu_gain_clamp<acc_t>(acc, gain, slope, clamp, code);
      if constexpr (MODE == Pointwise::kActivateAndRecord) {
        mask[idx] = code;
      }
    }
    scratch[idx] = acc;
  }
}

// Stage 2 of every output from scratch.
template <typename scalar_t, typename acc_t>
__global__ void generic_stage2_kernel(const acc_t* __restrict__ scratch, const acc_t* __restrict__ k2,
                                      scalar_t* __restrict__ out, PassAxis ax, PassAxis ay, int64_t total) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(blockDim.x) * gridDim.x) {
    const int64_t ox = idx % ax.out;
    const int64_t oy = (idx / ax.out) % ay.out;
    const int64_t plane = idx / (ax.out * ay.out);
    const Taps<int64_t> tx = axis_taps<int64_t>(ox * ax.down + ax.off2, 1, ax.k2, ax.mid);
    const Taps<int64_t> ty = axis_taps<int64_t>(oy * ay.down + ay.off2, 1, ay.k2, ay.mid);
    const acc_t* sp = scratch + plane * ay.mid * ax.mid;
    acc_t acc = 0;
    for (int64_t jy = 0; jy < ty.count; ++jy) {
      const acc_t* row = sp + (ty.i0 + jy) * ax.mid + tx.i0;
      const acc_t* k_row = k2 + (ay.k2 - 1 - (ty.k0 + jy)) * ax.k2 + (ax.k2 - 1 - tx.k0);
      for (int64_t jx = 0; jx < tx.count; ++jx) {
        acc += row[jx] * k_row[-jx];
      }
    }
    out[idx] = static_cast<scalar_t>(acc);
  }
}

unsigned blocks_for(int64_t total) {
  return static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, int64_t(1) << 20));
}

template <typename scalar_t, typename acc_t, Pointwise MODE>
void launch_generic(const scalar_t* z, const scalar_t* bias, const acc_t* k1, const acc_t* k2, uint8_t* mask,
                    scalar_t* out, const PassAxis& ax, const PassAxis& ay, int64_t planes, int64_t channels,
                    const FilteredLreluParams& params, const at::TensorOptions& acc_options, cudaStream_t stream) {
  const int64_t mid_total = planes * ay.mid * ax.mid;
  const at::Tensor scratch = at::empty({mid_total}, acc_options);
  acc_t* s = scratch.mutable_data_ptr<acc_t>();
  generic_stage1_kernel<scalar_t, acc_t, MODE><<<blocks_for(mid_total), kThreads, 0, stream>>>(
      z, bias, k1, mask, s, ax, ay, channels, static_cast<acc_t>(params.gain), static_cast<acc_t>(params.slope),
      static_cast<acc_t>(params.clamp), mid_total);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const int64_t out_total = planes * ay.out * ax.out;
  if (out_total == 0) {
    return;
  }
  generic_stage2_kernel<scalar_t, acc_t><<<blocks_for(out_total), kThreads, 0, stream>>>(s, k2, out, ax, ay, out_total);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// One pass: fused when a tile fits, else generic.
template <typename scalar_t, Pointwise MODE>
void run_pass(const at::Tensor& z, const at::Tensor& bias, const at::Tensor& k1, const at::Tensor& k2, uint8_t* mask,
              at::Tensor& out, const PassAxis& ax, const PassAxis& ay, const FilteredLreluParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const scalar_t* zp = z.const_data_ptr<scalar_t>();
  const scalar_t* bp = bias.defined() ? bias.const_data_ptr<scalar_t>() : nullptr;
  const acc_t* k1p = k1.const_data_ptr<acc_t>();
  const acc_t* k2p = k2.const_data_ptr<acc_t>();
  scalar_t* op = out.mutable_data_ptr<scalar_t>();
  const int tile = ax.out > 0 && ay.out > 0 ? pick_tile<acc_t>(ax, ay) : 0;
  if (tile > 0) {
    launch_fused<scalar_t, acc_t, MODE>(zp, bp, k1p, k2p, mask, op, ax, ay, p.planes, p.channels, p, tile, stream);
  } else {
    launch_generic<scalar_t, acc_t, MODE>(zp, bp, k1p, k2p, mask, op, ax, ay, p.planes, p.channels, p, k1.options(),
                                          stream);
  }
}

} // namespace

std::tuple<at::Tensor, at::Tensor> filtered_lrelu_forward_cuda(const at::Tensor& input_, const at::Tensor& filter_up,
                                                               const at::Tensor& filter_down,
                                                               const std::optional<at::Tensor>& bias_,
                                                               const FilteredLreluParams& p, bool write_mask) {
  const c10::cuda::CUDAGuard guard(input_.device());
  const at::Tensor input = input_.contiguous();
  at::Tensor output, mask;
  std::tie(output, mask) = filtered_lrelu_empty_outputs(input, p, write_mask);
  if (p.planes == 0) {
    return {output, mask};
  }
  const at::Tensor bias = bias_.has_value() ? bias_->contiguous() : at::Tensor();
  const PassAxis ax = forward_axis(p, false), ay = forward_axis(p, true);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::filtered_lrelu (CUDA)", [&] {
    const auto [k1, k2] = filtered_lrelu_pass_filters(filter_up, filter_down, input.scalar_type(), false);
    if (write_mask) {
      run_pass<scalar_t, Pointwise::kActivateAndRecord>(input, bias, k1, k2, mask.mutable_data_ptr<uint8_t>(), output,
                                                        ax, ay, p);
    } else {
      run_pass<scalar_t, Pointwise::kActivate>(input, bias, k1, k2, nullptr, output, ax, ay, p);
    }
  });
  return {output, mask};
}

at::Tensor filtered_lrelu_backward_cuda(const at::Tensor& grad_, const at::Tensor& mask_, const at::Tensor& filter_up,
                                        const at::Tensor& filter_down, const FilteredLreluParams& p, bool transpose) {
  const c10::cuda::CUDAGuard guard(grad_.device());
  const at::Tensor grad = grad_.contiguous();
  const at::Tensor mask = mask_.contiguous();
  const PassAxis ax = transpose ? forward_axis(p, false) : backward_axis(p, false);
  const PassAxis ay = transpose ? forward_axis(p, true) : backward_axis(p, true);
  at::Tensor result = at::empty({p.batch, p.channels, ay.out, ax.out}, grad.options());
  if (result.numel() == 0) {
    return result;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad.scalar_type(), "mmops::_filtered_lrelu_backward (CUDA)", [&] {
        const auto [k1, k2] = filtered_lrelu_pass_filters(filter_up, filter_down, grad.scalar_type(), !transpose);
        // read only (kMasked)
        uint8_t* m = const_cast<uint8_t*>(mask.const_data_ptr<uint8_t>());
        run_pass<scalar_t, Pointwise::kMasked>(grad, at::Tensor(), k1, k2, m, result, ax, ay, p);
      });
  return result;
}

} // namespace kernels
} // namespace mmops

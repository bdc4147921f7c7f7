// CUDA kernels of ms_deform_attn.
//
// Layout: value is [B, S, M, D], so the D channels of one head at one pixel
// are contiguous. A group of G lanes (a power of two, at most 32, inside one
// warp) owns one (batch, query, head) tuple; each lane holds VEC consecutive
// channels per chunk (4 for float/half/bfloat16, 2 for double: one 16-byte
// load per neighbour for float/double, 8-byte for 16-bit types), CHUNKS chunks
// G * VEC channels apart. D = 32 in float: 8 lanes per tuple, 4 tuples per
// warp. D not divisible by VEC (or a misaligned view) takes the scalar path
// (VEC = 1). Wide heads loop over passes of CHUNKS * G * VEC channels.
//
// Per group, the sampling locations and attention weights of G points are
// loaded at once (lane j: point k0 + j, coalesced) and broadcast with
// shuffles; every lane computes the bilinear taps of the point
// (bilinear_zero_pad::taps), loads its channels of the four neighbours and
// accumulates in float (double for double).
//
// Backward, same mapping: grad_value is scattered with atomic adds (four
// floats per vector atomic on sm_90, else scalar; half/bfloat16 into a float
// buffer cast at the end; double scalar), so the order of the additions varies
// run to run (alertNotDeterministic). The gradients of the attention weight and
// of the location are per-lane dot products of grad_output with the four
// neighbours, reduced across the group with shuffles; lane j keeps point
// k0 + j's results and the group writes them once, coalesced (no atomics).
// With several channel passes each pass adds its partial sums to the previous
// ones (same lane, in order; in float for half/bfloat16, cast at the end).
//
// Levels: each block reads spatial_shapes / level_start_index into shared
// memory through ms_deform_attn_math::make_level; a level whose rows would
// fall outside value is empty (contributes 0, receives no gradient, nothing is
// read). No host synchronisation: the strict check is the caller's.

#include "ms_deform_attn/ms_deform_attn_kernels.h"
#include "common/cuda_helpers.cuh"
#include "ms_deform_attn/ms_deform_attn_math.h"

#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace mmops {
namespace kernels {
namespace {

using cuda_helpers::channel_vector;
using cuda_helpers::load_readonly;
using cuda_helpers::Pack;
using ms_deform_attn_math::Level;
using ms_deform_attn_math::make_level;
using ms_deform_attn_math::pixel_coordinate;
using ms_deform_attn_math::used;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t(1) << 20;  // grid-stride beyond

// Plain data, passed by value.
struct Geometry {
  int64_t tuples;         // B * Q * M
  int64_t queries_heads;  // Q * M
  int64_t heads;          // M
  int64_t rows;           // S
  int64_t channels;       // D
  int64_t points;         // P
  int levels;             // L (<= kMaxMsDeformAttnLevels)
  int group_shift;        // log2(G)
  int passes;             // channel passes of CHUNKS * G * VEC
};

// The lanes of one group inside its warp.
struct Group {
  int size;       // G
  int lane;       // 0 .. G-1
  unsigned mask;  // the group's lanes in the warp

  template <typename T>
  __device__ inline T broadcast(T v, int src) const {
    return __shfl_sync(mask, v, src, size);
  }

  template <typename T>
  __device__ inline T sum(T v) const {
    for (int offset = size >> 1; offset > 0; offset >>= 1) {
      v += __shfl_xor_sync(mask, v, offset, size);
    }
    return v;
  }
};

__device__ inline Group make_group(int shift) {
  Group grp;
  grp.size = 1 << shift;
  const int warp_lane = static_cast<int>(threadIdx.x & 31);
  grp.lane = warp_lane & (grp.size - 1);
  grp.mask = grp.size == 32 ? 0xffffffffu
                            : ((1u << grp.size) - 1u) << (warp_lane & ~(grp.size - 1));
  return grp;
}

// Every block reads the level table into shared memory (guarded levels).
__device__ inline void load_levels(Level* levels, const int64_t* __restrict__ shapes,
                                   const int64_t* __restrict__ starts, const Geometry& g) {
  for (int l = threadIdx.x; l < g.levels; l += blockDim.x) {
    levels[l] = make_level(shapes[2 * l], shapes[2 * l + 1], starts[l], g.rows);
  }
  __syncthreads();
}

// Location (x, y) and attention weight of point k of a tuple (zeros past the end).
template <typename acc_t>
struct Point {
  acc_t x, y, a;
};

template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
__device__ inline Point<acc_t> load_point(const scalar_t* __restrict__ tl, const scalar_t* __restrict__ ta,
                                          int64_t k, int64_t lp) {
  Point<acc_t> pt{acc_t(0), acc_t(0), acc_t(0)};
  if (k < lp) {
    pt.x = static_cast<acc_t>(tl[2 * k]);
    pt.y = static_cast<acc_t>(tl[2 * k + 1]);
    pt.a = static_cast<acc_t>(ta[k]);
  }
  return pt;
}

// The lane's channels of the four neighbours (zeros for the unused ones and
// for inactive chunks: nothing is read there). level_base points at the
// level's row 0 at the lane's first channel.
template <typename scalar_t, int VEC, int CHUNKS, typename acc_t>
__device__ inline void load_neighbours(Pack<scalar_t, VEC> (&px)[CHUNKS][4], const bilinear_zero_pad::Taps<acc_t>& t,
                                       const scalar_t* level_base, int64_t row_stride,
                                       const bool (&active)[CHUNKS], int chunk_stride) {
  using PackT = Pack<scalar_t, VEC>;
  bool use[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    use[i] = used(t, i);
  }
#pragma unroll
  for (int kc = 0; kc < CHUNKS; ++kc) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      px[kc][i] = use[i] && active[kc]
          ? load_readonly(reinterpret_cast<const PackT*>(level_base + t.offset[i] * row_stride + kc * chunk_stride))
          : PackT{};
    }
  }
}

// buffer[0..VEC) += values, atomically: one vector atomic for four floats on
// sm_90 (16-byte aligned on the vector path), else one atomic per value.
template <typename sum_t, int VEC>
__device__ inline void atomic_add_channels(sum_t* address, const sum_t (&values)[VEC]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr bool kVectorAtomic = std::is_same_v<sum_t, float> && VEC == 4;
#else
  constexpr bool kVectorAtomic = false;
#endif
  if constexpr (kVectorAtomic) {
    atomicAdd(reinterpret_cast<float4*>(address), make_float4(values[0], values[1], values[2], values[3]));
  } else {
#pragma unroll
    for (int v = 0; v < VEC; ++v) {
      atomicAdd(address + v, values[v]);
    }
  }
}

// ---------------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------------

template <typename scalar_t, int VEC, int CHUNKS>
__global__ void __launch_bounds__(kThreads) forward_kernel(
    const scalar_t* __restrict__ value,  // [B, S, M, D]
    const int64_t* __restrict__ shapes, const int64_t* __restrict__ starts,
    const scalar_t* __restrict__ loc,    // [B, Q, M, L, P, 2]
    const scalar_t* __restrict__ attn,   // [B, Q, M, L, P]
    scalar_t* __restrict__ output,       // [B, Q, M, D]
    const Geometry g) {
  using acc_t = at::opmath_type<scalar_t>;
  using PackT = Pack<scalar_t, VEC>;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  Level* levels = reinterpret_cast<Level*>(shared_bytes);
  load_levels(levels, shapes, starts, g);

  const Group grp = make_group(g.group_shift);
  const int64_t lp = static_cast<int64_t>(g.levels) * g.points;
  const int64_t row_stride = g.heads * g.channels;
  const int chunk_stride = grp.size * VEC;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> g.group_shift;
  const int64_t stride = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> g.group_shift;

  for (int64_t tuple = first; tuple < g.tuples; tuple += stride) {
    const int64_t b = tuple / g.queries_heads, m = tuple % g.heads;
    const scalar_t* vb = value + b * g.rows * row_stride + m * g.channels;
    const scalar_t* tl = loc + tuple * lp * 2;
    const scalar_t* ta = attn + tuple * lp;
    for (int pass = 0; pass < g.passes; ++pass) {
      const int64_t c0 = static_cast<int64_t>(pass) * CHUNKS * chunk_stride + grp.lane * VEC;
      bool active[CHUNKS];
      acc_t acc[CHUNKS][VEC];
#pragma unroll
      for (int kc = 0; kc < CHUNKS; ++kc) {
        active[kc] = c0 + kc * chunk_stride < g.channels;
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
          acc[kc][v] = acc_t(0);
        }
      }
      for (int64_t k0 = 0; k0 < lp; k0 += grp.size) {
        const Point<acc_t> mine = load_point<scalar_t>(tl, ta, k0 + grp.lane, lp);
        const int count = static_cast<int>(lp - k0 < grp.size ? lp - k0 : grp.size);
        int l = static_cast<int>(k0 / g.points);
        int64_t p = k0 % g.points;
        for (int j = 0; j < count; ++j) {
          const acc_t ux = grp.broadcast(mine.x, j);
          const acc_t uy = grp.broadcast(mine.y, j);
          const acc_t a = grp.broadcast(mine.a, j);
          const Level lv = levels[l];
          if (++p == g.points) {
            p = 0;
            ++l;
          }
          const auto t = bilinear_zero_pad::taps<acc_t>(pixel_coordinate(uy, lv.height),
                                                       pixel_coordinate(ux, lv.width), lv.height, lv.width);
          if (!t.any) {
            continue;  // the same for the whole group: outside the map or not finite
          }
          PackT px[CHUNKS][4];
          load_neighbours<scalar_t, VEC, CHUNKS, acc_t>(px, t, vb + lv.start * row_stride + c0, row_stride, active,
                                                chunk_stride);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const acc_t w = a * t.weight[i];
#pragma unroll
            for (int kc = 0; kc < CHUNKS; ++kc) {
#pragma unroll
              for (int v = 0; v < VEC; ++v) {
                acc[kc][v] += w * static_cast<acc_t>(px[kc][i].v[v]);
              }
            }
          }
        }
      }
#pragma unroll
      for (int kc = 0; kc < CHUNKS; ++kc) {
        if (active[kc]) {
          PackT o;
#pragma unroll
          for (int v = 0; v < VEC; ++v) {
            o.v[v] = static_cast<scalar_t>(acc[kc][v]);
          }
          *reinterpret_cast<PackT*>(output + tuple * g.channels + c0 + kc * chunk_stride) = o;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Backward
// ---------------------------------------------------------------------------

// grad_t: the type of grad_loc / grad_attn as written here: scalar_t, or
// float for half/bfloat16 with several channel passes (the passes' partial
// sums then stay in float; the caller casts).
template <typename scalar_t, typename grad_t, int VEC, int CHUNKS>
__global__ void __launch_bounds__(kThreads) backward_kernel(
    const scalar_t* __restrict__ grad_output,  // [B, Q, M, D]
    const scalar_t* __restrict__ value,        // [B, S, M, D]
    const int64_t* __restrict__ shapes, const int64_t* __restrict__ starts,
    const scalar_t* __restrict__ loc, const scalar_t* __restrict__ attn,
    at::opmath_type<scalar_t>* __restrict__ grad_value,  // [B, S, M, D], float for half/bf16
    grad_t* __restrict__ grad_loc, grad_t* __restrict__ grad_attn, const Geometry g) {
  using acc_t = at::opmath_type<scalar_t>;
  using PackT = Pack<scalar_t, VEC>;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  Level* levels = reinterpret_cast<Level*>(shared_bytes);
  load_levels(levels, shapes, starts, g);

  const Group grp = make_group(g.group_shift);
  const int64_t lp = static_cast<int64_t>(g.levels) * g.points;
  const int64_t row_stride = g.heads * g.channels;
  const int chunk_stride = grp.size * VEC;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> g.group_shift;
  const int64_t stride = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> g.group_shift;

  for (int64_t tuple = first; tuple < g.tuples; tuple += stride) {
    const int64_t b = tuple / g.queries_heads, m = tuple % g.heads;
    const int64_t value_offset = b * g.rows * row_stride + m * g.channels;
    const scalar_t* tl = loc + tuple * lp * 2;
    const scalar_t* ta = attn + tuple * lp;
    for (int pass = 0; pass < g.passes; ++pass) {
      const int64_t c0 = static_cast<int64_t>(pass) * CHUNKS * chunk_stride + grp.lane * VEC;
      bool active[CHUNKS];
      acc_t go[CHUNKS][VEC];
#pragma unroll
      for (int kc = 0; kc < CHUNKS; ++kc) {
        active[kc] = c0 + kc * chunk_stride < g.channels;
        const PackT gp = active[kc]
            ? load_readonly(reinterpret_cast<const PackT*>(grad_output + tuple * g.channels + c0 + kc * chunk_stride))
            : PackT{};
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
          go[kc][v] = static_cast<acc_t>(gp.v[v]);
        }
      }
      for (int64_t k0 = 0; k0 < lp; k0 += grp.size) {
        const Point<acc_t> mine = load_point<scalar_t>(tl, ta, k0 + grp.lane, lp);
        acc_t my_ga = acc_t(0), my_gx = acc_t(0), my_gy = acc_t(0);  // of point k0 + lane
        const int count = static_cast<int>(lp - k0 < grp.size ? lp - k0 : grp.size);
        int l = static_cast<int>(k0 / g.points);
        int64_t p = k0 % g.points;
        for (int j = 0; j < count; ++j) {
          const acc_t ux = grp.broadcast(mine.x, j);
          const acc_t uy = grp.broadcast(mine.y, j);
          const acc_t a = grp.broadcast(mine.a, j);
          const Level lv = levels[l];
          if (++p == g.points) {
            p = 0;
            ++l;
          }
          const auto t = bilinear_zero_pad::taps<acc_t>(pixel_coordinate(uy, lv.height),
                                                       pixel_coordinate(ux, lv.width), lv.height, lv.width);
          if (!t.any) {
            continue;  // worth 0, no gradient (the group's results stay 0)
          }
          const int64_t level_offset = value_offset + lv.start * row_stride + c0;
          PackT px[CHUNKS][4];
          load_neighbours<scalar_t, VEC, CHUNKS, acc_t>(px, t, value + level_offset, row_stride, active, chunk_stride);
          acc_t dot[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            dot[i] = acc_t(0);
#pragma unroll
            for (int kc = 0; kc < CHUNKS; ++kc) {
#pragma unroll
              for (int v = 0; v < VEC; ++v) {
                dot[i] += go[kc][v] * static_cast<acc_t>(px[kc][i].v[v]);
              }
            }
          }
          // grad_value += grad_output * a * bilinear weight, for the used neighbours.
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            if (!used(t, i)) {
              continue;
            }
            const acc_t scale = a * t.weight[i];
            acc_t* target = grad_value + level_offset + t.offset[i] * row_stride;
#pragma unroll
            for (int kc = 0; kc < CHUNKS; ++kc) {
              if (active[kc]) {
                acc_t add[VEC];
#pragma unroll
                for (int v = 0; v < VEC; ++v) {
                  add[v] = scale * go[kc][v];
                }
                atomic_add_channels<acc_t, VEC>(target + kc * chunk_stride, add);
              }
            }
          }
          acc_t sw = acc_t(0), sx = acc_t(0), sy = acc_t(0);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            sw += t.weight[i] * dot[i];
            sx += t.d_dx[i] * dot[i];
            sy += t.d_dy[i] * dot[i];
          }
          sw = grp.sum(sw);
          sx = grp.sum(sx);
          sy = grp.sum(sy);
          if (grp.lane == j) {
            // x = u * W - 0.5: d/du = W.
            my_ga = sw;
            my_gx = a * sx * static_cast<acc_t>(lv.width);
            my_gy = a * sy * static_cast<acc_t>(lv.height);
          }
        }
        const int64_t k = k0 + grp.lane;
        if (k < lp) {
          const int64_t o = tuple * lp + k;
          if (pass > 0) {  // later channel passes add to the first one's partial sums
            my_ga += static_cast<acc_t>(grad_attn[o]);
            my_gx += static_cast<acc_t>(grad_loc[2 * o]);
            my_gy += static_cast<acc_t>(grad_loc[2 * o + 1]);
          }
          grad_attn[o] = static_cast<grad_t>(my_ga);
          grad_loc[2 * o] = static_cast<grad_t>(my_gx);
          grad_loc[2 * o + 1] = static_cast<grad_t>(my_gy);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------

// Lanes per tuple, channel chunks per lane and passes for D channels.
struct Plan {
  int group_shift;
  int chunks;  // 1 or 2
  int passes;
};

Plan plan_for(int64_t channels, int vec) {
  const int64_t lanes = (channels + vec - 1) / vec;
  Plan plan{0, 1, 1};
  if (lanes <= 32) {
    while ((int64_t(1) << plan.group_shift) < lanes) {
      ++plan.group_shift;
    }
    return plan;
  }
  plan.group_shift = 5;
  plan.chunks = 2;
  plan.passes = static_cast<int>((lanes + 63) / 64);
  return plan;
}

bool aligned_to(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

Geometry geometry_of(const at::Tensor& value, const at::Tensor& loc, const Plan& plan) {
  Geometry g;
  g.tuples = loc.size(0) * loc.size(1) * loc.size(2);
  g.queries_heads = loc.size(1) * loc.size(2);
  g.heads = value.size(2);
  g.rows = value.size(1);
  g.channels = value.size(3);
  g.points = loc.size(4);
  g.levels = static_cast<int>(loc.size(3));
  g.group_shift = plan.group_shift;
  g.passes = plan.passes;
  return g;
}

int64_t blocks_for(const Geometry& g) {
  const int64_t threads = g.tuples << g.group_shift;
  return std::max<int64_t>(1, std::min<int64_t>((threads + kThreads - 1) / kThreads, kMaxBlocks));
}

// Calls launch(VEC, CHUNKS) with the compile-time vector width (the wide one
// when `vectorized`) and chunk count.
template <typename scalar_t, typename Launch>
void launch_variant(bool vectorized, int chunks, Launch&& launch) {
  constexpr int kVec = channel_vector<scalar_t>();
  using One = std::integral_constant<int, 1>;
  using Two = std::integral_constant<int, 2>;
  using Wide = std::integral_constant<int, kVec>;
  if (vectorized) {
    chunks == 1 ? launch(Wide{}, One{}) : launch(Wide{}, Two{});
  } else {
    chunks == 1 ? launch(One{}, One{}) : launch(One{}, Two{});
  }
}

#define MMOPS_MSDA_DISPATCH(dtype, name, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, name, __VA_ARGS__)

} // namespace

bool ms_deform_attn_stream_is_capturing() {
  return c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
}

at::Tensor ms_deform_attn_forward_cuda(const at::Tensor& value_, const at::Tensor& spatial_shapes_,
                                       const at::Tensor& level_start_index_,
                                       const at::Tensor& sampling_locations_,
                                       const at::Tensor& attention_weights_) {
  c10::cuda::CUDAGuard device_guard(value_.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const at::Tensor value = value_.contiguous();
  const at::Tensor shapes = spatial_shapes_.contiguous();
  const at::Tensor starts = level_start_index_.contiguous();
  const at::Tensor loc = sampling_locations_.contiguous();
  const at::Tensor attn = attention_weights_.contiguous();
  const int64_t channels = value.size(3);
  at::Tensor output = at::empty({loc.size(0), loc.size(1), value.size(2) * channels}, value.options());
  if (output.numel() == 0) {
    return output;
  }
  MMOPS_MSDA_DISPATCH(value.scalar_type(), "mmops::ms_deform_attn (CUDA)", [&] {
    constexpr int kVec = channel_vector<scalar_t>();
    const bool vectorized = channels % kVec == 0 && aligned_to(value.const_data_ptr(), sizeof(scalar_t) * kVec);
    const Plan plan = plan_for(channels, vectorized ? kVec : 1);
    const Geometry g = geometry_of(value, loc, plan);
    const size_t shared = static_cast<size_t>(g.levels) * sizeof(Level);
    launch_variant<scalar_t>(vectorized, plan.chunks, [&](auto vec, auto chunks) {
      forward_kernel<scalar_t, decltype(vec)::value, decltype(chunks)::value>
          <<<blocks_for(g), kThreads, shared, stream>>>(
              value.const_data_ptr<scalar_t>(), shapes.const_data_ptr<int64_t>(),
              starts.const_data_ptr<int64_t>(), loc.const_data_ptr<scalar_t>(),
              attn.const_data_ptr<scalar_t>(), output.mutable_data_ptr<scalar_t>(), g);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  return output;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> ms_deform_attn_backward_cuda(
    const at::Tensor& grad_output_, const at::Tensor& value_, const at::Tensor& spatial_shapes_,
    const at::Tensor& level_start_index_, const at::Tensor& sampling_locations_,
    const at::Tensor& attention_weights_) {
  c10::cuda::CUDAGuard device_guard(value_.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor value = value_.contiguous();
  const at::Tensor shapes = spatial_shapes_.contiguous();
  const at::Tensor starts = level_start_index_.contiguous();
  const at::Tensor loc = sampling_locations_.contiguous();
  const at::Tensor attn = attention_weights_.contiguous();
  const int64_t channels = value.size(3);
  const bool low_precision = value.scalar_type() == at::kHalf || value.scalar_type() == at::kBFloat16;
  const at::ScalarType float_type = low_precision ? at::kFloat : value.scalar_type();
  at::Tensor grad_value = at::zeros(value.sizes(), value.options().dtype(float_type));
  at::Tensor grad_loc, grad_attn;
  if (attn.numel() == 0) {
    grad_loc = at::zeros(loc.sizes(), loc.options());
    grad_attn = at::zeros(attn.sizes(), attn.options());
  } else {
    at::globalContext().alertNotDeterministic("mmops::_ms_deform_attn_backward (CUDA)");
    MMOPS_MSDA_DISPATCH(value.scalar_type(), "mmops::_ms_deform_attn_backward (CUDA)", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      constexpr int kVec = channel_vector<scalar_t>();
      const bool vectorized = channels % kVec == 0 &&
                              aligned_to(value.const_data_ptr(), sizeof(scalar_t) * kVec) &&
                              aligned_to(grad_output.const_data_ptr(), sizeof(scalar_t) * kVec);
      const Plan plan = plan_for(channels, vectorized ? kVec : 1);
      const Geometry g = geometry_of(value, loc, plan);
      const size_t shared = static_cast<size_t>(g.levels) * sizeof(Level);
      // Every grad_loc / grad_attn value is written by the kernel (no zero fill).
      // Half/bfloat16 with several passes keep the partial sums in float.
      const bool float_grads = low_precision && plan.passes > 1;
      grad_loc = at::empty(loc.sizes(), loc.options().dtype(float_grads ? at::kFloat : loc.scalar_type()));
      grad_attn = at::empty(attn.sizes(), attn.options().dtype(float_grads ? at::kFloat : attn.scalar_type()));
      auto launch = [&](auto grad_type) {
        using grad_t = typename decltype(grad_type)::type;
        launch_variant<scalar_t>(vectorized, plan.chunks, [&](auto vec, auto chunks) {
          backward_kernel<scalar_t, grad_t, decltype(vec)::value, decltype(chunks)::value>
              <<<blocks_for(g), kThreads, shared, stream>>>(
                  grad_output.const_data_ptr<scalar_t>(), value.const_data_ptr<scalar_t>(),
                  shapes.const_data_ptr<int64_t>(), starts.const_data_ptr<int64_t>(),
                  loc.const_data_ptr<scalar_t>(), attn.const_data_ptr<scalar_t>(),
                  grad_value.mutable_data_ptr<acc_t>(), grad_loc.mutable_data_ptr<grad_t>(),
                  grad_attn.mutable_data_ptr<grad_t>(), g);
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        });
      };
      if constexpr (std::is_same_v<scalar_t, acc_t>) {
        launch(std::type_identity<scalar_t>{});
      } else if (float_grads) {
        launch(std::type_identity<acc_t>{});
      } else {
        launch(std::type_identity<scalar_t>{});
      }
    });
  }
  if (low_precision) {
    grad_value = grad_value.to(value.scalar_type());
    grad_loc = grad_loc.to(value.scalar_type());
    grad_attn = grad_attn.to(value.scalar_type());
  }
  return {grad_value, grad_loc, grad_attn};
}

} // namespace kernels
} // namespace mmops

#pragma once
// Device code and launch set-up shared by the CUDA kernels of ms_deform_attn
// (ms_deform_attn_forward_cuda.cu, ms_deform_attn_backward_cuda.cu).
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
// (bilinear_zero_pad::taps) and loads its channels of the four neighbours.
//
// Levels: each block reads spatial_shapes / level_start_index into shared
// memory through ms_deform_attn_math::make_level; a level whose rows would
// fall outside value is empty (contributes 0, receives no gradient, nothing is
// read). No host synchronisation: the strict check is the caller's.

#include "common/cuda_helpers.cuh"
#include "ms_deform_attn/ms_deform_attn_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace mmops {
namespace kernels {
namespace ms_deform_attn_cuda {

using cuda_helpers::channel_vector;
using cuda_helpers::load_readonly;
using cuda_helpers::Pack;
using ms_deform_attn_math::Level;
using ms_deform_attn_math::make_level;
using ms_deform_attn_math::pixel_coordinate;
using ms_deform_attn_math::used;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t(1) << 20; // grid-stride beyond

// Plain data, passed by value.
struct Geometry {
  int64_t tuples;        // B * Q * M
  int64_t queries_heads; // Q * M
  int64_t heads;         // M
  int64_t rows;          // S
  int64_t channels;      // D
  int64_t points;        // P
  int levels;            // L (<= kMaxMsDeformAttnLevels)
  int group_shift;       // log2(G)
  int passes;            // channel passes of CHUNKS * G * VEC
};

// The lanes of one group inside its warp.
struct Group {
  int size;      // G
  int lane;      // 0 .. G-1
  unsigned mask; // the group's lanes in the warp

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
  grp.mask = grp.size == 32 ? 0xffffffffu : ((1u << grp.size) - 1u) << (warp_lane & ~(grp.size - 1));
  return grp;
}

// Every block reads the level table into shared memory (guarded levels; the
// launch gives g.levels * sizeof(Level) bytes of dynamic shared memory).
__device__ inline const Level* load_levels(const int64_t* __restrict__ shapes, const int64_t* __restrict__ starts,
                                           const Geometry& g) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  Level* levels = reinterpret_cast<Level*>(shared_bytes);
  for (int l = threadIdx.x; l < g.levels; l += blockDim.x) {
    levels[l] = make_level(shapes[2 * l], shapes[2 * l + 1], starts[l], g.rows);
  }
  __syncthreads();
  return levels;
}

// Location (x, y) and attention weight of point k of a tuple (zeros past the end).
template <typename acc_t>
struct Point {
  acc_t x, y, a;
};

template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
__device__ inline Point<acc_t> load_point(const scalar_t* __restrict__ tl, const scalar_t* __restrict__ ta, int64_t k,
                                          int64_t lp) {
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
                                       const scalar_t* level_base, int64_t row_stride, const bool (&active)[CHUNKS],
                                       int chunk_stride) {
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
      px[kc][i] =
          use[i] && active[kc]
              ? load_readonly(reinterpret_cast<const PackT*>(level_base + t.offset[i] * row_stride + kc * chunk_stride))
              : PackT{};
    }
  }
}

// What every thread of both kernels starts from: its lane group, the first
// (batch, query, head) tuple the group owns and the stride to its next one
// (grid-stride loop).
struct TupleLanes {
  Group grp;
  int64_t lp;         // L * P points per tuple
  int64_t row_stride; // M * D: between value rows
  int chunk_stride;   // G * VEC: between a lane's chunks
  int64_t first, stride;
};

template <int VEC>
__device__ __forceinline__ TupleLanes tuple_lanes(const Geometry& g) {
  TupleLanes t;
  t.grp = make_group(g.group_shift);
  t.lp = static_cast<int64_t>(g.levels) * g.points;
  t.row_stride = g.heads * g.channels;
  t.chunk_stride = t.grp.size * VEC;
  t.first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> g.group_shift;
  t.stride = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> g.group_shift;
  return t;
}

// The first channel of the lane in a channel pass.
template <int VEC, int CHUNKS>
__device__ __forceinline__ int64_t pass_channel(int pass, const TupleLanes& tl) {
  return static_cast<int64_t>(pass) * CHUNKS * tl.chunk_stride + tl.grp.lane * VEC;
}

// A batch of up to G points of a tuple, k0 .. k0 + count - 1 (lane j loads
// point k0 + j), visited one after the other: (level, point) of the next one.
struct PointBatch {
  int count;
  int level;
  int64_t point;
};

__device__ __forceinline__ PointBatch point_batch(int64_t k0, int64_t lp, int64_t points, int group_size) {
  PointBatch batch;
  batch.count = static_cast<int>(lp - k0 < group_size ? lp - k0 : group_size);
  batch.level = static_cast<int>(k0 / points);
  batch.point = k0 % points;
  return batch;
}

// Point j of a batch as every lane of the group sees it: its attention weight,
// level and bilinear taps (taps.any false: worth 0, outside its map or not
// finite, the same for the whole group).
template <typename acc_t>
struct Sample {
  acc_t a;
  Level level;
  bilinear_zero_pad::Taps<acc_t> taps;
};

template <typename acc_t>
__device__ __forceinline__ Sample<acc_t> next_sample(const Group& grp, const Point<acc_t>& mine, int j,
                                                     const Level* levels, int64_t points, PointBatch& batch) {
  const acc_t ux = grp.broadcast(mine.x, j);
  const acc_t uy = grp.broadcast(mine.y, j);
  Sample<acc_t> s;
  s.a = grp.broadcast(mine.a, j);
  s.level = levels[batch.level];
  if (++batch.point == points) {
    batch.point = 0;
    ++batch.level;
  }
  s.taps = bilinear_zero_pad::taps<acc_t>(pixel_coordinate(uy, s.level.height), pixel_coordinate(ux, s.level.width),
                                          s.level.height, s.level.width);
  return s;
}

// ---------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------

// Lanes per tuple, channel chunks per lane and passes for D channels.
struct Plan {
  int group_shift;
  int chunks; // 1 or 2
  int passes;
};

inline Plan plan_for(int64_t channels, int vec) {
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

inline bool aligned_to(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// The inputs as the kernels read them.
struct Inputs {
  at::Tensor value, shapes, starts, loc, attn;
};

inline Inputs contiguous_inputs(const at::Tensor& value, const at::Tensor& spatial_shapes,
                                const at::Tensor& level_start_index, const at::Tensor& sampling_locations,
                                const at::Tensor& attention_weights) {
  return {value.contiguous(), spatial_shapes.contiguous(), level_start_index.contiguous(),
          sampling_locations.contiguous(), attention_weights.contiguous()};
}

inline Geometry geometry_of(const at::Tensor& value, const at::Tensor& loc, const Plan& plan) {
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

// How one call runs: the wide vectors when D allows them and every pointer the
// kernel reads channel vectors from is aligned to them, the plan for D, the
// geometry and the level table's shared memory.
struct Config {
  bool vectorized;
  Plan plan;
  Geometry g;
  size_t shared;
};

template <typename scalar_t>
Config config_for(const Inputs& in, std::initializer_list<const void*> channel_pointers) {
  constexpr int kVec = channel_vector<scalar_t>();
  const int64_t channels = in.value.size(3);
  Config c;
  c.vectorized = channels % kVec == 0;
  for (const void* ptr : channel_pointers) {
    c.vectorized = c.vectorized && aligned_to(ptr, sizeof(scalar_t) * kVec);
  }
  c.plan = plan_for(channels, c.vectorized ? kVec : 1);
  c.g = geometry_of(in.value, in.loc, c.plan);
  c.shared = static_cast<size_t>(c.g.levels) * sizeof(Level);
  return c;
}

inline int64_t blocks_for(const Geometry& g) {
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
} // namespace ms_deform_attn_cuda
} // namespace kernels
} // namespace mmops

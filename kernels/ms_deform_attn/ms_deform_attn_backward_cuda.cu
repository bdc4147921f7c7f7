// CUDA backward of ms_deform_attn, on the forward's lane layout
// (ms_deform_attn_cuda.cuh): grad_value is scattered with atomic adds (four
// floats per vector atomic on sm_90, else scalar; half/bfloat16 into a float
// buffer cast at the end; double scalar), so the order of the additions varies
// run to run (alertNotDeterministic). The gradients of the attention weight and
// of the location are per-lane dot products of grad_output with the four
// neighbours, reduced across the group with shuffles; lane j keeps point
// k0 + j's results and the group writes them once, coalesced (no atomics).
// With several channel passes each pass adds its partial sums to the previous
// ones (same lane, in order; in float for half/bfloat16, cast at the end).

#include "ms_deform_attn/ms_deform_attn_cuda.cuh"
#include "ms_deform_attn/ms_deform_attn_kernels.h"

#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace mmops {
namespace kernels {
namespace {

using namespace ms_deform_attn_cuda;

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

// dot[i] = grad_output . neighbour i over the lane's channels.
template <typename scalar_t, int VEC, int CHUNKS, typename acc_t>
__device__ __forceinline__ void neighbour_dots(acc_t (&dot)[4], const acc_t (&go)[CHUNKS][VEC],
                                               const Pack<scalar_t, VEC> (&px)[CHUNKS][4]) {
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
}

// grad_value += grad_output * a * bilinear weight, for the used neighbours;
// level_grad: grad_value at the level's row 0, the lane's first channel.
template <int VEC, int CHUNKS, typename acc_t>
__device__ __forceinline__ void scatter_grad_value(acc_t* grad_value, int64_t level_offset,
                                                   const bilinear_zero_pad::Taps<acc_t>& t, acc_t a,
                                                   const acc_t (&go)[CHUNKS][VEC], const bool (&active)[CHUNKS],
                                                   int64_t row_stride, int chunk_stride) {
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
}

// Point o's gradients: written by the first channel pass, added to by the others.
template <typename grad_t, typename acc_t>
__device__ __forceinline__ void store_point_grads(grad_t* grad_loc, grad_t* grad_attn, int64_t o, int pass, acc_t ga,
                                                  acc_t gx, acc_t gy) {
  if (pass > 0) { // later channel passes add to the first one's partial sums
    ga += static_cast<acc_t>(grad_attn[o]);
    gx += static_cast<acc_t>(grad_loc[2 * o]);
    gy += static_cast<acc_t>(grad_loc[2 * o + 1]);
  }
  grad_attn[o] = static_cast<grad_t>(ga);
  grad_loc[2 * o] = static_cast<grad_t>(gx);
  grad_loc[2 * o + 1] = static_cast<grad_t>(gy);
}

// grad_t: the type of grad_loc / grad_attn as written here: scalar_t, or
// float for half/bfloat16 with several channel passes (the passes' partial
// sums then stay in float; the caller casts).
template <typename scalar_t, typename grad_t, int VEC, int CHUNKS>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const scalar_t* __restrict__ grad_output, // [B, Q, M, D]
                    const scalar_t* __restrict__ value,       // [B, S, M, D]
                    const int64_t* __restrict__ shapes, const int64_t* __restrict__ starts,
                    const scalar_t* __restrict__ loc, const scalar_t* __restrict__ attn,
                    at::opmath_type<scalar_t>* __restrict__ grad_value, // [B, S, M, D], float for half/bf16
                    grad_t* __restrict__ grad_loc, grad_t* __restrict__ grad_attn, const Geometry g) {
  using acc_t = at::opmath_type<scalar_t>;
  using PackT = Pack<scalar_t, VEC>;
  const Level* levels = load_levels(shapes, starts, g);
  const TupleLanes tl = tuple_lanes<VEC>(g);
  const Group& grp = tl.grp;

  for (int64_t tuple = tl.first; tuple < g.tuples; tuple += tl.stride) {
    const int64_t b = tuple / g.queries_heads, m = tuple % g.heads;
    const int64_t value_offset = b * g.rows * tl.row_stride + m * g.channels;
    const scalar_t* tuple_loc = loc + tuple * tl.lp * 2;
    const scalar_t* tuple_attn = attn + tuple * tl.lp;
    for (int pass = 0; pass < g.passes; ++pass) {
      const int64_t c0 = pass_channel<VEC, CHUNKS>(pass, tl);
      bool active[CHUNKS];
      acc_t go[CHUNKS][VEC];
#pragma unroll
      for (int kc = 0; kc < CHUNKS; ++kc) {
        active[kc] = c0 + kc * tl.chunk_stride < g.channels;
        const PackT gp = active[kc] ? load_readonly(reinterpret_cast<const PackT*>(grad_output + tuple * g.channels +
                                                                                   c0 + kc * tl.chunk_stride))
                                    : PackT{};
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
          go[kc][v] = static_cast<acc_t>(gp.v[v]);
        }
      }
      for (int64_t k0 = 0; k0 < tl.lp; k0 += grp.size) {
        const Point<acc_t> mine = load_point<scalar_t>(tuple_loc, tuple_attn, k0 + grp.lane, tl.lp);
        acc_t my_ga = acc_t(0), my_gx = acc_t(0), my_gy = acc_t(0); // of point k0 + lane
        PointBatch batch = point_batch(k0, tl.lp, g.points, grp.size);
        for (int j = 0; j < batch.count; ++j) {
          const Sample<acc_t> sample = next_sample(grp, mine, j, levels, g.points, batch);
          if (!sample.taps.any) {
            continue; // worth 0, no gradient (the group's results stay 0)
          }
          const Level& lv = sample.level;
          const bilinear_zero_pad::Taps<acc_t>& t = sample.taps;
          const acc_t a = sample.a;
          const int64_t level_offset = value_offset + lv.start * tl.row_stride + c0;
          PackT px[CHUNKS][4];
          load_neighbours<scalar_t, VEC, CHUNKS, acc_t>(px, t, value + level_offset, tl.row_stride, active,
                                                        tl.chunk_stride);
          acc_t dot[4];
          neighbour_dots<scalar_t, VEC, CHUNKS, acc_t>(dot, go, px);
          scatter_grad_value<VEC, CHUNKS, acc_t>(grad_value, level_offset, t, a, go, active, tl.row_stride,
                                                 tl.chunk_stride);
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
        if (k < tl.lp) {
          store_point_grads(grad_loc, grad_attn, tuple * tl.lp + k, pass, my_ga, my_gx, my_gy);
        }
      }
    }
  }
}

} // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> ms_deform_attn_backward_cuda(
    const at::Tensor& grad_output_, const at::Tensor& value, const at::Tensor& spatial_shapes,
    const at::Tensor& level_start_index, const at::Tensor& sampling_locations, const at::Tensor& attention_weights) {
  c10::cuda::CUDAGuard device_guard(value.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const at::Tensor grad_output = grad_output_.contiguous();
  const Inputs in = contiguous_inputs(value, spatial_shapes, level_start_index, sampling_locations, attention_weights);
  const bool low_precision = value.scalar_type() == at::kHalf || value.scalar_type() == at::kBFloat16;
  const at::ScalarType float_type = low_precision ? at::kFloat : value.scalar_type();
  at::Tensor grad_value = at::zeros(in.value.sizes(), in.value.options().dtype(float_type));
  at::Tensor grad_loc, grad_attn;
  if (in.attn.numel() == 0) {
    grad_loc = at::zeros(in.loc.sizes(), in.loc.options());
    grad_attn = at::zeros(in.attn.sizes(), in.attn.options());
  } else {
    at::globalContext().alertNotDeterministic("mmops::_ms_deform_attn_backward (CUDA)");
    MMOPS_MSDA_DISPATCH(value.scalar_type(), "mmops::_ms_deform_attn_backward (CUDA)", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      const Config c = config_for<scalar_t>(in, {in.value.const_data_ptr(), grad_output.const_data_ptr()});
      // Every grad_loc / grad_attn value is written by the kernel (no zero fill).
      // Half/bfloat16 with several passes keep the partial sums in float.
      const bool float_grads = low_precision && c.plan.passes > 1;
      grad_loc = at::empty(in.loc.sizes(), in.loc.options().dtype(float_grads ? at::kFloat : in.loc.scalar_type()));
      grad_attn = at::empty(in.attn.sizes(), in.attn.options().dtype(float_grads ? at::kFloat : in.attn.scalar_type()));
      auto launch = [&](auto grad_type) {
        using grad_t = typename decltype(grad_type)::type;
        launch_variant<scalar_t>(c.vectorized, c.plan.chunks, [&](auto vec, auto chunks) {
          backward_kernel<scalar_t, grad_t, decltype(vec)::value, decltype(chunks)::value>
              <<<blocks_for(c.g), kThreads, c.shared, stream>>>(
                  grad_output.const_data_ptr<scalar_t>(), in.value.const_data_ptr<scalar_t>(),
                  in.shapes.const_data_ptr<int64_t>(), in.starts.const_data_ptr<int64_t>(),
                  in.loc.const_data_ptr<scalar_t>(), in.attn.const_data_ptr<scalar_t>(),
                  grad_value.mutable_data_ptr<acc_t>(), grad_loc.mutable_data_ptr<grad_t>(),
                  grad_attn.mutable_data_ptr<grad_t>(), c.g);
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

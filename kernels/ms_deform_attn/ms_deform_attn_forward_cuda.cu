// CUDA forward of ms_deform_attn (the lane layout: ms_deform_attn_cuda.cuh):
// every lane accumulates, in float (double for double), attention weight x
// bilinear sample of its channels over the tuple's points (the sample first,
// then times the weight, as on CPU).

#include "ms_deform_attn/ms_deform_attn_cuda.cuh"
#include "ms_deform_attn/ms_deform_attn_kernels.h"

#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace mmops {
namespace kernels {
namespace {

using namespace ms_deform_attn_cuda;

// acc += a * (bilinear blend of the four neighbours' channels): the sample
// first, then times a (as the CPU kernel: an infinite a gives NaN where the
// sample is 0).
template <typename scalar_t, int VEC, int CHUNKS, typename acc_t>
__device__ __forceinline__ void accumulate_sample(acc_t (&acc)[CHUNKS][VEC], const Pack<scalar_t, VEC> (&px)[CHUNKS][4],
                                                  acc_t a, const bilinear_zero_pad::Taps<acc_t>& t) {
#pragma unroll
  for (int kc = 0; kc < CHUNKS; ++kc) {
#pragma unroll
    for (int v = 0; v < VEC; ++v) {
      acc_t sample = t.weight[0] * static_cast<acc_t>(px[kc][0].v[v]);
#pragma unroll
      for (int i = 1; i < 4; ++i) {
        sample += t.weight[i] * static_cast<acc_t>(px[kc][i].v[v]);
      }
      acc[kc][v] += a * sample;
    }
  }
}

// A sample outside its map (or at a non-finite location) is 0: it adds
// a * 0, which is NaN only for a non-finite a (the same for the whole group).
template <int VEC, int CHUNKS, typename acc_t>
__device__ __forceinline__ void accumulate_zero_sample(acc_t (&acc)[CHUNKS][VEC], acc_t a) {
  if (!host_device_math::is_finite(a)) {
#pragma unroll
    for (int kc = 0; kc < CHUNKS; ++kc) {
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        acc[kc][v] += a * acc_t(0);
      }
    }
  }
}

template <typename scalar_t, int VEC, int CHUNKS>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const scalar_t* __restrict__ value, // [B, S, M, D]
                   const int64_t* __restrict__ shapes, const int64_t* __restrict__ starts,
                   const scalar_t* __restrict__ loc,  // [B, Q, M, L, P, 2]
                   const scalar_t* __restrict__ attn, // [B, Q, M, L, P]
                   scalar_t* __restrict__ output,     // [B, Q, M, D]
                   const Geometry g) {
  using acc_t = at::opmath_type<scalar_t>;
  using PackT = Pack<scalar_t, VEC>;
  const Level* levels = load_levels(shapes, starts, g);
  const TupleLanes tl = tuple_lanes<VEC>(g);
  const Group& grp = tl.grp;

  for (int64_t tuple = tl.first; tuple < g.tuples; tuple += tl.stride) {
    const int64_t b = tuple / g.queries_heads, m = tuple % g.heads;
    const scalar_t* vb = value + b * g.rows * tl.row_stride + m * g.channels;
    const scalar_t* tuple_loc = loc + tuple * tl.lp * 2;
    const scalar_t* tuple_attn = attn + tuple * tl.lp;
    for (int pass = 0; pass < g.passes; ++pass) {
      const int64_t c0 = pass_channel<VEC, CHUNKS>(pass, tl);
      bool active[CHUNKS];
      acc_t acc[CHUNKS][VEC];
#pragma unroll
      for (int kc = 0; kc < CHUNKS; ++kc) {
        active[kc] = c0 + kc * tl.chunk_stride < g.channels;
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
          acc[kc][v] = acc_t(0);
        }
      }
      for (int64_t k0 = 0; k0 < tl.lp; k0 += grp.size) {
        const Point<acc_t> mine = load_point<scalar_t>(tuple_loc, tuple_attn, k0 + grp.lane, tl.lp);
        PointBatch batch = point_batch(k0, tl.lp, g.points, grp.size);
        for (int j = 0; j < batch.count; ++j) {
          const Sample<acc_t> sample = next_sample(grp, mine, j, levels, g.points, batch);
          if (!sample.taps.any) { // worth 0 (the same for the whole group)
            accumulate_zero_sample<VEC, CHUNKS, acc_t>(acc, sample.a);
            continue;
          }
          const Level& lv = sample.level;
          const bilinear_zero_pad::Taps<acc_t>& t = sample.taps;
          const acc_t a = sample.a;
          PackT px[CHUNKS][4];
          load_neighbours<scalar_t, VEC, CHUNKS, acc_t>(px, t, vb + lv.start * tl.row_stride + c0, tl.row_stride,
                                                        active, tl.chunk_stride);
          accumulate_sample<scalar_t, VEC, CHUNKS, acc_t>(acc, px, a, t);
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
          *reinterpret_cast<PackT*>(output + tuple * g.channels + c0 + kc * tl.chunk_stride) = o;
        }
      }
    }
  }
}

} // namespace

at::Tensor ms_deform_attn_forward_cuda(const at::Tensor& value, const at::Tensor& spatial_shapes,
                                       const at::Tensor& level_start_index, const at::Tensor& sampling_locations,
                                       const at::Tensor& attention_weights) {
  c10::cuda::CUDAGuard device_guard(value.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const Inputs in = contiguous_inputs(value, spatial_shapes, level_start_index, sampling_locations, attention_weights);
  at::Tensor output =
      at::empty({in.loc.size(0), in.loc.size(1), in.value.size(2) * in.value.size(3)}, in.value.options());
  if (output.numel() == 0) {
    return output;
  }
  MMOPS_MSDA_DISPATCH(in.value.scalar_type(), "mmops::ms_deform_attn (CUDA)", [&] {
    const Config c = config_for<scalar_t>(in, {in.value.const_data_ptr()});
    launch_variant<scalar_t>(c.vectorized, c.plan.chunks, [&](auto vec, auto chunks) {
      forward_kernel<scalar_t, decltype(vec)::value, decltype(chunks)::value>
          <<<blocks_for(c.g), kThreads, c.shared, stream>>>(
              in.value.const_data_ptr<scalar_t>(), in.shapes.const_data_ptr<int64_t>(),
              in.starts.const_data_ptr<int64_t>(), in.loc.const_data_ptr<scalar_t>(),
              in.attn.const_data_ptr<scalar_t>(), output.mutable_data_ptr<scalar_t>(), c.g);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  return output;
}

} // namespace kernels
} // namespace mmops

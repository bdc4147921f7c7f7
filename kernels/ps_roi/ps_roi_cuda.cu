// CUDA kernels of ps_roi_align and ps_roi_pool (geometry: ps_roi_math.h).
//
// Forward: one thread per output value (k, c, ph, pw), grid-stride, 64-bit
// indices; it reads input channel (c * PH + ph) * PW + pw of the roi's image.
//
// Backward: deterministic, a gather with no atomics (bitwise repeatable). An
// input value belongs to exactly one (bin, output channel) pair, so a block
// owns a 16 x 16 pixel tile of one image and one bin (ph, pw), and 8 output
// channels; thread t owns pixel t of the tile for those 8 channels. The block
// lists, in roi order, the rois of its image whose bin touches the tile
// (ordered compaction of 256 rois at a time), then each thread adds the listed
// rois' contributions to its pixel in that order: grad_output times the bin's
// separable weight (ps_roi_math.h: align_axis_weight or the pool range) times
// 1 / samples or 1 / area. Every gradient value is written once, so the
// gradient needs no zeroing. Half / bfloat16 accumulate in float.
// Batch indices outside [0, N) and non-finite boxes pool zeros / send nothing.

#include "ps_roi/ps_roi_kernels.h"
#include "ps_roi/ps_roi_math.h"

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

using ps_roi_math::Axis;
using ps_roi_math::Box;
using ps_roi_math::Range;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 16; // tile side, kTile * kTile == kThreads
constexpr int kChunk = 8; // output channels per backward thread
static_assert(kTile * kTile == kThreads, "one thread per tile pixel");

struct Shape {
  int64_t batch, channels, height, width, bins, channels_out;
};

int64_t blocks_for(int64_t work) {
  return std::max<int64_t>(1, std::min<int64_t>(work, int64_t(1) << 20));
}

template <bool kAlign, typename scalar_t, typename acc_t>
__device__ __forceinline__ Box<acc_t> locate(const scalar_t* roi, const Shape& s, const PSRoIParams& p) {
  const acc_t r[5] = {static_cast<acc_t>(roi[0]), static_cast<acc_t>(roi[1]), static_cast<acc_t>(roi[2]),
                      static_cast<acc_t>(roi[3]), static_cast<acc_t>(roi[4])};
  const acc_t scale = static_cast<acc_t>(p.spatial_scale);
  if (kAlign) {
    return ps_roi_math::align_box(r, s.batch, scale, p.pooled_height, p.pooled_width, p.sampling_ratio);
  }
  return ps_roi_math::pool_box(r, s.batch, scale, p.pooled_height, p.pooled_width);
}

// The mean of bin (ph, pw) of `box` over one input plane.
template <typename scalar_t, typename acc_t>
__device__ __forceinline__ acc_t align_value(const scalar_t* __restrict__ x, const Box<acc_t>& box, int64_t ph,
                                             int64_t pw, const Shape& s) {
  const int count = box.y.grid * box.x.grid;
  if (count == 0) {
    return acc_t(0);
  }
  acc_t sum = acc_t(0);
  for (int iy = 0; iy < box.y.grid; ++iy) {
    const auto ty = roi_bilinear::axis_tap(ps_roi_math::sample_coord(box.y, ph, iy), s.height);
    if (!ty.valid) {
      continue;
    }
    for (int ix = 0; ix < box.x.grid; ++ix) {
      const auto tx = roi_bilinear::axis_tap(ps_roi_math::sample_coord(box.x, pw, ix), s.width);
      if (tx.valid) {
        const auto c = roi_bilinear::corners(ty, tx, s.width);
        sum += c.weight[0] * static_cast<acc_t>(x[c.offset[0]]) + c.weight[1] * static_cast<acc_t>(x[c.offset[1]]) +
               c.weight[2] * static_cast<acc_t>(x[c.offset[2]]) + c.weight[3] * static_cast<acc_t>(x[c.offset[3]]);
      }
    }
  }
  return sum / static_cast<acc_t>(count);
}

template <typename scalar_t, typename acc_t>
__device__ __forceinline__ acc_t pool_value(const scalar_t* __restrict__ x, const Box<acc_t>& box, int64_t ph,
                                            int64_t pw, const Shape& s) {
  const Range ry = ps_roi_math::pool_range(box.y, ph, s.height);
  const Range rx = ps_roi_math::pool_range(box.x, pw, s.width);
  if (ry.empty() || rx.empty()) {
    return acc_t(0);
  }
  acc_t sum = acc_t(0);
  for (int64_t h = ry.begin; h < ry.end; ++h) {
    for (int64_t w = rx.begin; w < rx.end; ++w) {
      sum += static_cast<acc_t>(x[h * s.width + w]);
    }
  }
  return sum / static_cast<acc_t>((ry.end - ry.begin) * (rx.end - rx.begin));
}

template <bool kAlign, typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const scalar_t* __restrict__ input, const scalar_t* __restrict__ rois, scalar_t* __restrict__ out,
                   int64_t total, Shape s, PSRoIParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t plane = s.height * s.width;
  for (int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x; i < total; i += int64_t(gridDim.x) * kThreads) {
    const int64_t b = i % s.bins;
    const int64_t c = (i / s.bins) % s.channels_out;
    const int64_t k = i / (s.bins * s.channels_out);
    const int64_t ph = b / p.pooled_width, pw = b % p.pooled_width;
    const Box<acc_t> box = locate<kAlign, scalar_t, acc_t>(rois + k * 5, s, p);
    acc_t v = acc_t(0);
    if (box.batch >= 0) {
      const scalar_t* x = input + (box.batch * s.channels + c * s.bins + b) * plane;
      v = kAlign ? align_value(x, box, ph, pw, s) : pool_value(x, box, ph, pw, s);
    }
    out[i] = static_cast<scalar_t>(v);
  }
}

// A roi listed by a backward block: its bin's pixel spans and weights.
template <typename acc_t>
struct Listed {
  int64_t k;
  Axis<acc_t> y, x;       // ps_roi_align: the sampled axes
  acc_t scale;            // 1 / samples (align) or 1 / area (pool)
  int32_t y0, y1, x0, x1; // pixels [y0, y1) x [x0, x1) that may receive weight
};

// The block's work: image n, bin b, tile origin (ty, tx), output channels [c0, c0 + kChunk).
struct TileJob {
  int64_t n, b, y0, x0, c0;
};

__device__ __forceinline__ TileJob locate_job(int64_t job, const Shape& s) {
  const int64_t chunks = (s.channels_out + kChunk - 1) / kChunk;
  const int64_t tiles_x = (s.width + kTile - 1) / kTile, tiles_y = (s.height + kTile - 1) / kTile;
  TileJob t;
  t.c0 = job % chunks * kChunk;
  job /= chunks;
  t.x0 = job % tiles_x * kTile;
  job /= tiles_x;
  t.y0 = job % tiles_y * kTile;
  job /= tiles_y;
  t.b = job % s.bins;
  t.n = job / s.bins;
  return t;
}

// Phase 1: rois [r0, r0 + kThreads), one per thread; those of image n whose
// bin b may touch the tile are listed in roi order. Returns the count (the
// same in every thread).
template <bool kAlign, typename scalar_t, typename acc_t>
__device__ __forceinline__ int list_rois(const scalar_t* __restrict__ rois, int64_t num_rois, int64_t r0,
                                         const TileJob& t, const Shape& s, const PSRoIParams& p, Listed<acc_t>* listed,
                                         int* warp_counts) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t k = r0 + threadIdx.x;
  bool take = false;
  Listed<acc_t> e{};
  if (k < num_rois) {
    const Box<acc_t> box = locate<kAlign, scalar_t, acc_t>(rois + k * 5, s, p);
    const int64_t ph = t.b / p.pooled_width, pw = t.b % p.pooled_width;
    Range ry{0, 0}, rx{0, 0};
    if (box.batch == t.n) {
      if (kAlign) {
        ry = ps_roi_math::align_span(box.y, ph, s.height);
        rx = ps_roi_math::align_span(box.x, pw, s.width);
        e.scale = acc_t(1) / static_cast<acc_t>(box.y.grid * box.x.grid); // both > 0 where the spans are not empty
      } else {
        ry = ps_roi_math::pool_range(box.y, ph, s.height);
        rx = ps_roi_math::pool_range(box.x, pw, s.width);
        e.scale = acc_t(1) / static_cast<acc_t>((ry.end - ry.begin) * (rx.end - rx.begin));
      }
    }
    take = !ry.empty() && !rx.empty() && ry.begin < t.y0 + kTile && ry.end > t.y0 && rx.begin < t.x0 + kTile &&
           rx.end > t.x0;
    e.k = k;
    e.y = box.y;
    e.x = box.x;
    e.y0 = static_cast<int32_t>(ry.begin);
    e.y1 = static_cast<int32_t>(ry.end);
    e.x0 = static_cast<int32_t>(rx.begin);
    e.x1 = static_cast<int32_t>(rx.end);
  }
  const unsigned ballot = __ballot_sync(0xffffffffu, take);
  if (lane == 0) {
    warp_counts[warp] = __popc(ballot);
  }
  __syncthreads();
  int offset = 0, total = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    offset += w < warp ? warp_counts[w] : 0;
    total += warp_counts[w];
  }
  if (take) {
    listed[offset + __popc(ballot & ((1u << lane) - 1u))] = e;
  }
  __syncthreads();
  return total;
}

template <bool kAlign, typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const scalar_t* __restrict__ grad_out, const scalar_t* __restrict__ rois,
                    scalar_t* __restrict__ grad, int64_t num_rois, int64_t jobs, Shape s, PSRoIParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  __shared__ Listed<acc_t> listed[kThreads];
  __shared__ int warp_counts[kWarps];
  for (int64_t job = blockIdx.x; job < jobs; job += gridDim.x) {
    const TileJob t = locate_job(job, s);
    const int64_t y = t.y0 + threadIdx.x / kTile, x = t.x0 + threadIdx.x % kTile;
    const int64_t ph = t.b / p.pooled_width, pw = t.b % p.pooled_width;
    acc_t acc[kChunk];
#pragma unroll
    for (int v = 0; v < kChunk; ++v) {
      acc[v] = acc_t(0);
    }
    for (int64_t r0 = 0; r0 < num_rois; r0 += kThreads) {
      const int count = list_rois<kAlign>(rois, num_rois, r0, t, s, p, listed, warp_counts);
      for (int j = 0; j < count; ++j) {
        const Listed<acc_t>& e = listed[j];
        if (y < e.y0 || y >= e.y1 || x < e.x0 || x >= e.x1) {
          continue;
        }
        acc_t w = e.scale;
        if (kAlign) {
          w *= ps_roi_math::align_axis_weight(e.y, ph, s.height, y) *
               ps_roi_math::align_axis_weight(e.x, pw, s.width, x);
        }
        const scalar_t* g = grad_out + (e.k * s.channels_out + t.c0) * s.bins + t.b;
#pragma unroll
        for (int v = 0; v < kChunk; ++v) {
          if (t.c0 + v < s.channels_out) {
            acc[v] += static_cast<acc_t>(g[v * s.bins]) * w;
          }
        }
      }
      __syncthreads(); // `listed` is rewritten by the next round
    }
    if (y < s.height && x < s.width) {
#pragma unroll
      for (int v = 0; v < kChunk; ++v) {
        if (t.c0 + v < s.channels_out) {
          const int64_t c_in = (t.c0 + v) * s.bins + t.b;
          grad[((t.n * s.channels + c_in) * s.height + y) * s.width + x] = static_cast<scalar_t>(acc[v]);
        }
      }
    }
  }
}

template <bool kAlign>
at::Tensor forward(const at::Tensor& input_, const at::Tensor& rois_, const PSRoIParams& p) {
  const c10::cuda::CUDAGuard guard(input_.device());
  const at::Tensor input = input_.contiguous();
  const at::Tensor rois = rois_.contiguous();
  at::Tensor output = at::empty({rois.size(0), p.channels_out, p.pooled_height, p.pooled_width}, input.options());
  const int64_t total = output.numel();
  if (total == 0) {
    return output;
  }
  const Shape s{input.size(0), input.size(1), input.size(2), input.size(3), p.pooled_height * p.pooled_width,
                p.channels_out};
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::ps_roi forward (CUDA)", [&] {
    forward_kernel<kAlign, scalar_t><<<blocks_for((total + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        input.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(), output.mutable_data_ptr<scalar_t>(), total,
        s, p);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return output;
}

template <bool kAlign>
at::Tensor backward(const at::Tensor& grad_output_, const at::Tensor& rois_, const std::vector<int64_t>& shape,
                    const PSRoIParams& p) {
  const c10::cuda::CUDAGuard guard(grad_output_.device());
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor rois = rois_.contiguous();
  // Every value is written by the kernel (no zeroing), except when there is
  // no work at all.
  const Shape s{shape[0], shape[1], shape[2], shape[3], p.pooled_height * p.pooled_width, p.channels_out};
  const int64_t jobs = s.batch * s.bins * ((s.height + kTile - 1) / kTile) * ((s.width + kTile - 1) / kTile) *
                       ((s.channels_out + kChunk - 1) / kChunk);
  at::Tensor grad = at::empty(shape, grad_output.options());
  if (grad.numel() == 0) {
    return grad;
  }
  if (rois.size(0) == 0) {
    return grad.zero_();
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad.scalar_type(), "mmops::ps_roi backward (CUDA)", [&] {
    backward_kernel<kAlign, scalar_t><<<blocks_for(jobs), kThreads, 0, stream>>>(
        grad_output.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(), grad.mutable_data_ptr<scalar_t>(),
        rois.size(0), jobs, s, p);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return grad;
}

} // namespace

at::Tensor ps_roi_align_forward_cuda(const at::Tensor& input, const at::Tensor& rois, const PSRoIParams& params) {
  return forward<true>(input, rois, params);
}

at::Tensor ps_roi_pool_forward_cuda(const at::Tensor& input, const at::Tensor& rois, const PSRoIParams& params) {
  return forward<false>(input, rois, params);
}

at::Tensor ps_roi_align_backward_cuda(const at::Tensor& grad_output, const at::Tensor& rois,
                                      const std::vector<int64_t>& input_shape, const PSRoIParams& params) {
  return backward<true>(grad_output, rois, input_shape, params);
}

at::Tensor ps_roi_pool_backward_cuda(const at::Tensor& grad_output, const at::Tensor& rois,
                                     const std::vector<int64_t>& input_shape, const PSRoIParams& params) {
  return backward<false>(grad_output, rois, input_shape, params);
}

} // namespace kernels
} // namespace mmops

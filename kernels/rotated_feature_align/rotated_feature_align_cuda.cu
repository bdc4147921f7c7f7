// CUDA kernels of rotated_feature_align.
//
// The taps of a pixel (up to 5 points x 4 neighbours) depend on its rbox only,
// so a thread computes them once and applies them to many channels:
//  * NCHW: a thread owns one pixel (threads along the row: coalesced box reads
//    and output writes) and a chunk of channels (blockIdx.y);
//  * channels-last: a warp owns one pixel, its lanes stride over VEC-channel
//    packs (one coalesced vector load per tap and lane, vector stores).
// An NCHW tensor with many channels goes through channels-last (a transpose
// in, one out): NCHW taps of neighbouring pixels hit different sectors, one
// 32-byte sector per 4-byte tap, while channels-last taps are whole lines.
// Backward: the gradient starts as grad_output (the identity term) in the
// compute type, then every pixel's samples add their weighted gradient with
// atomics (float for half/bfloat16, converted once at the end); channels-last
// lanes add float4 / float2 packs where sm_90 has vector atomics. The order of
// the adds is not fixed: torch.use_deterministic_algorithms(True) raises.
// A sample at a non-finite or outside coordinate contributes nothing.

#include "common/cuda_helpers.cuh"
#include "common/layout.h"
#include "common/layout_cuda.cuh"
#include "rotated_feature_align/rotated_feature_align_kernels.h"
#include "rotated_feature_align/rotated_feature_align_math.h"

#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <ATen/cuda/Atomic.cuh>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace mmops {
namespace kernels {
namespace {

using namespace rotated_feature_align_math;

constexpr int kThreads = 256;
constexpr int kChannelChunk = 16; // channels of one NCHW thread
constexpr int kWarpPixels = 8;    // pixels (warps) of one channels-last block
constexpr int64_t kMaxGridY = 65535;
// From these channel counts an NCHW tensor goes through channels-last (below,
// the NCHW kernel's thread per pixel wastes fewer lanes than a warp per pixel
// and saves the transposes). Backward gains more: NCHW atomics of a warp hit 32
// different sectors.
constexpr int64_t kForwardTransposeChannels = 64;
constexpr int64_t kBackwardTransposeChannels = 16;
constexpr int64_t kMaxGridX = (int64_t(1) << 31) - 1;

// Geometry of a launch: the map and the strides of the (format-contiguous) tensors.
template <typename acc_t>
struct Map {
  int64_t pixels; // N * H * W
  int64_t plane;  // H * W
  int64_t channels, height, width;
  int64_t image_stride, channel_stride; // elements
  PlaneStrides strides;
  acc_t scale;
  int points;
};

template <typename scalar_t, typename acc_t>
__device__ inline PixelTaps<acc_t> load_taps(const scalar_t* __restrict__ boxes, int64_t pixel, const Map<acc_t>& m) {
  acc_t box[5];
#pragma unroll
  for (int i = 0; i < 5; ++i) {
    box[i] = static_cast<acc_t>(boxes[pixel * 5 + i]);
  }
  return pixel_taps<acc_t>(box, m.scale, m.points, m.height, m.width, m.strides);
}

// Offset of pixel i (of its image) in the tensor: its row and column.
template <typename acc_t>
__device__ inline int64_t pixel_offset(int64_t i, const Map<acc_t>& m) {
  return (i / m.width) * m.strides.row + (i % m.width) * m.strides.col;
}

// The tap loops run over kMaxPoints with constant indices so that the taps
// stay in registers (an index of taps.count would put them in local memory).

// One output element: sample_sum's order, then the identity term.
template <typename scalar_t, typename acc_t>
__device__ inline void align_channel(const scalar_t* __restrict__ in, scalar_t* __restrict__ out,
                                     const PixelTaps<acc_t>& taps, int64_t base, int64_t at) {
  const scalar_t* plane = in + base;
  acc_t sum = acc_t(0);
#pragma unroll
  for (int k = 0; k < kMaxPoints; ++k) {
    if (k < taps.count && taps.tap[k].valid) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        sum += taps.tap[k].weight[j] * static_cast<acc_t>(plane[taps.tap[k].offset[j]]);
      }
    }
  }
  out[base + at] = static_cast<scalar_t>(static_cast<acc_t>(plane[at]) + sum);
}

template <typename scalar_t, typename acc_t>
__device__ inline void scatter_channel(const scalar_t* __restrict__ go, acc_t* __restrict__ grad,
                                       const PixelTaps<acc_t>& taps, int64_t base, int64_t at) {
  const acc_t v = static_cast<acc_t>(go[base + at]);
#pragma unroll
  for (int k = 0; k < kMaxPoints; ++k) {
    if (k < taps.count && taps.tap[k].valid) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        gpuAtomicAdd(grad + base + taps.tap[k].offset[j], v * taps.tap[k].weight[j]);
      }
    }
  }
}

// NCHW: a thread per pixel and channel chunk. Forward when Backward is false.
template <bool Backward, typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kThreads)
    nchw_kernel(const scalar_t* __restrict__ src, const scalar_t* __restrict__ boxes, scalar_t* __restrict__ out,
                acc_t* __restrict__ grad, Map<acc_t> m) {
  const int64_t pixel = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (pixel >= m.pixels) {
    return;
  }
  const int64_t n = pixel / m.plane, at = pixel_offset(pixel % m.plane, m);
  const PixelTaps<acc_t> taps = load_taps(boxes, pixel, m);
  for (int64_t c0 = blockIdx.y * int64_t(kChannelChunk); c0 < m.channels; c0 += gridDim.y * int64_t(kChannelChunk)) {
    const int64_t c1 = c0 + kChannelChunk < m.channels ? c0 + kChannelChunk : m.channels;
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t base = n * m.image_stride + c * m.channel_stride;
      if constexpr (Backward) {
        scatter_channel(src, grad, taps, base, at);
      } else {
        align_channel(src, out, taps, base, at);
      }
    }
  }
}

// Adds w * v[0..VEC) to address[0..VEC): one vector atomic where the
// architecture has it (sm_90: float2 / float4 on global memory), else VEC
// scalar ones.
template <int VEC, typename acc_t>
__device__ inline void atomic_add_pack(acc_t* address, const acc_t (&v)[VEC], acc_t w) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (std::is_same_v<acc_t, float> && VEC == 4) {
    atomicAdd(reinterpret_cast<float4*>(address), make_float4(v[0] * w, v[1] * w, v[2] * w, v[3] * w));
  } else if constexpr (std::is_same_v<acc_t, float> && VEC == 2) {
    atomicAdd(reinterpret_cast<float2*>(address), make_float2(v[0] * w, v[1] * w));
  } else
#endif
  {
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      gpuAtomicAdd(address + i, v[i] * w);
    }
  }
}

// Channels-last forward: a warp per pixel, lane packs of VEC channels (the
// host checks channels % VEC == 0 and the alignment of `in`).
template <int VEC, typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kThreads)
    nhwc_forward_kernel(const scalar_t* __restrict__ in, const scalar_t* __restrict__ boxes, scalar_t* __restrict__ out,
                        Map<acc_t> m) {
  using P = cuda_helpers::Pack<scalar_t, VEC>;
  const int64_t pixel = blockIdx.x * int64_t(kWarpPixels) + threadIdx.y;
  if (pixel >= m.pixels) {
    return;
  }
  const int64_t n = pixel / m.plane, at = pixel_offset(pixel % m.plane, m);
  const PixelTaps<acc_t> taps = load_taps(boxes, pixel, m);
  for (int64_t c = threadIdx.x * int64_t(VEC); c < m.channels; c += blockDim.x * int64_t(VEC)) {
    const int64_t base = n * m.image_stride + c * m.channel_stride;
    const scalar_t* plane = in + base;
    acc_t sum[VEC] = {};
#pragma unroll
    for (int k = 0; k < kMaxPoints; ++k) {
      if (k < taps.count && taps.tap[k].valid) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const P p = cuda_helpers::load_readonly(reinterpret_cast<const P*>(plane + taps.tap[k].offset[j]));
#pragma unroll
          for (int v = 0; v < VEC; ++v) {
            sum[v] += taps.tap[k].weight[j] * static_cast<acc_t>(p.v[v]);
          }
        }
      }
    }
    // The identity term last, as sample_sum's callers add it.
    const P self = cuda_helpers::load_readonly(reinterpret_cast<const P*>(plane + at));
    P o;
#pragma unroll
    for (int v = 0; v < VEC; ++v) {
      o.v[v] = static_cast<scalar_t>(static_cast<acc_t>(self.v[v]) + sum[v]);
    }
    *reinterpret_cast<P*>(out + base + at) = o;
  }
}

// Channels-last backward: a warp per pixel, lane packs of VEC channels; the
// adds of a tap are coalesced (and vector atomics where possible). `grad` is
// a channels-last buffer of the map's strides, VEC-aligned (host-checked);
// grad_output is read a scalar at a time, so it may be unaligned.
template <int VEC, typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kThreads)
    nhwc_backward_kernel(const scalar_t* __restrict__ go, const scalar_t* __restrict__ boxes, acc_t* __restrict__ grad,
                         Map<acc_t> m) {
  const int64_t pixel = blockIdx.x * int64_t(kWarpPixels) + threadIdx.y;
  if (pixel >= m.pixels) {
    return;
  }
  const int64_t n = pixel / m.plane, at = pixel_offset(pixel % m.plane, m);
  const PixelTaps<acc_t> taps = load_taps(boxes, pixel, m);
  for (int64_t c = threadIdx.x * int64_t(VEC); c < m.channels; c += blockDim.x * int64_t(VEC)) {
    const int64_t base = n * m.image_stride + c * m.channel_stride;
    acc_t v[VEC];
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      v[i] = static_cast<acc_t>(go[base + at + i]);
    }
#pragma unroll
    for (int k = 0; k < kMaxPoints; ++k) {
      if (k < taps.count && taps.tap[k].valid) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          atomic_add_pack<VEC>(grad + base + taps.tap[k].offset[j], v, taps.tap[k].weight[j]);
        }
      }
    }
  }
}

template <typename acc_t>
Map<acc_t> map_of(const at::Tensor& t, const RotatedFeatureAlignParams& p) {
  Map<acc_t> m;
  m.channels = t.size(1);
  m.height = t.size(2);
  m.width = t.size(3);
  m.plane = m.height * m.width;
  m.pixels = t.size(0) * m.plane;
  m.image_stride = t.stride(0);
  m.channel_stride = t.stride(1);
  m.strides = PlaneStrides{t.stride(2), t.stride(3)};
  m.scale = static_cast<acc_t>(p.spatial_scale);
  m.points = static_cast<int>(p.points);
  return m;
}

// The widest pack of up to `widest` channels that divides the channel count
// and keeps `data` aligned (1, 2 or 4).
inline int pack_width(int widest, int64_t channels, const void* data, size_t element_size) {
  for (int vec = widest; vec > 1; vec /= 2) {
    if (channels % vec == 0 && reinterpret_cast<uintptr_t>(data) % (vec * element_size) == 0) {
      return vec;
    }
  }
  return 1;
}

// Calls f(std::integral_constant<int, VEC>) for vec in {1, 2, 4}, instantiating
// f for the widths up to Widest only.
template <int Widest, typename F>
void with_pack_width(int vec, F&& f) {
  if constexpr (Widest >= 4) {
    if (vec == 4) {
      f(std::integral_constant<int, 4>{});
      return;
    }
  }
  if constexpr (Widest >= 2) {
    if (vec == 2) {
      f(std::integral_constant<int, 2>{});
      return;
    }
  }
  f(std::integral_constant<int, 1>{});
}

// Blocks of the channels-last kernels (a warp per pixel).
template <typename acc_t>
unsigned nhwc_blocks(const Map<acc_t>& m) {
  const int64_t blocks = (m.pixels + kWarpPixels - 1) / kWarpPixels;
  TORCH_CHECK(blocks <= kMaxGridX, "mmops::rotated_feature_align: too many pixels for one launch");
  return static_cast<unsigned>(blocks);
}

// The NCHW kernel on the current stream.
template <bool Backward, typename scalar_t, typename acc_t>
void launch_nchw(const scalar_t* src, const scalar_t* boxes, scalar_t* out, acc_t* grad, const Map<acc_t>& m) {
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int64_t blocks = (m.pixels + kThreads - 1) / kThreads;
  TORCH_CHECK(blocks <= kMaxGridX, "mmops::rotated_feature_align: too many pixels for one launch");
  const int64_t chunks = std::min<int64_t>((m.channels + kChannelChunk - 1) / kChannelChunk, kMaxGridY);
  nchw_kernel<Backward, scalar_t, acc_t>
      <<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(chunks)), kThreads, 0, stream>>>(src, boxes, out,
                                                                                                    grad, m);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Channels-last forward of `in` into `out` (channels-last, same sizes).
template <typename scalar_t>
void forward_nhwc(const at::Tensor& in, const at::Tensor& boxes, at::Tensor& out,
                  const RotatedFeatureAlignParams& params) {
  using acc_t = at::opmath_type<scalar_t>;
  const Map<acc_t> m = map_of<acc_t>(in, params);
  const scalar_t* src = in.const_data_ptr<scalar_t>();
  constexpr int kWidest = cuda_helpers::channel_vector<scalar_t>();
  const int vec = pack_width(kWidest, m.channels, src, sizeof(scalar_t));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  with_pack_width<kWidest>(vec, [&](auto V) {
    nhwc_forward_kernel<decltype(V)::value, scalar_t, acc_t><<<nhwc_blocks(m), dim3(32, kWarpPixels), 0, stream>>>(
        src, boxes.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), m);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

// Channels-last backward: `grad` (channels-last, compute type) holds the
// identity term and receives the samples' adds.
template <typename scalar_t, typename acc_t>
void backward_nhwc(const at::Tensor& go, const at::Tensor& boxes, at::Tensor& grad,
                   const RotatedFeatureAlignParams& params) {
  const Map<acc_t> m = map_of<acc_t>(go, params);
  acc_t* dst = grad.mutable_data_ptr<acc_t>();
  // Vector atomics exist for float only.
  constexpr int kWidest = std::is_same_v<acc_t, float> ? 4 : 1;
  const int vec = pack_width(kWidest, m.channels, dst, sizeof(acc_t));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  with_pack_width<kWidest>(vec, [&](auto V) {
    nhwc_backward_kernel<decltype(V)::value, scalar_t, acc_t><<<nhwc_blocks(m), dim3(32, kWarpPixels), 0, stream>>>(
        go.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(), dst, m);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

// Whether an NCHW tensor with `min_channels` or more channels goes through
// channels-last: the way back to NCHW (rows = H * W) must fit the grid.
bool via_channels_last(const at::Tensor& t, int64_t min_channels) {
  return t.size(1) >= min_channels && t.size(2) * t.size(3) <= kMaxGridY * layout::kTransposeTile;
}

} // namespace

at::Tensor rotated_feature_align_forward_cuda(const at::Tensor& features, const at::Tensor& best_rbboxes,
                                              const RotatedFeatureAlignParams& params) {
  const c10::cuda::CUDAGuard guard(features.device());
  const at::MemoryFormat format = features.suggest_memory_format();
  const at::Tensor in = features.contiguous(format);
  const at::Tensor boxes = best_rbboxes.contiguous();
  at::Tensor out = at::empty(in.sizes(), in.options().memory_format(format));
  if (out.numel() == 0) {
    return out;
  }
  const bool channels_last = format == at::MemoryFormat::ChannelsLast;
  const bool transposed = !channels_last && via_channels_last(in, kForwardTransposeChannels);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, in.scalar_type(), "rotated_feature_align_forward_cuda", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        if (channels_last) {
          forward_nhwc<scalar_t>(in, boxes, out, params);
        } else if (transposed) {
          // NCHW -> channels-last, align there, and back (rows = H * W, cols = C).
          const at::Tensor in_cl = channels_last_cuda(in);
          at::Tensor out_cl = at::empty(in.sizes(), in.options().memory_format(at::MemoryFormat::ChannelsLast));
          forward_nhwc<scalar_t>(in_cl, boxes, out_cl, params);
          layout::transpose(out_cl.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), in.size(0),
                            in.size(2) * in.size(3), in.size(1), c10::cuda::getCurrentCUDAStream());
        } else {
          launch_nchw<false, scalar_t, acc_t>(in.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(),
                                              out.mutable_data_ptr<scalar_t>(), nullptr, map_of<acc_t>(in, params));
        }
      });
  return out;
}

at::Tensor rotated_feature_align_backward_cuda(const at::Tensor& grad_output, const at::Tensor& best_rbboxes,
                                               const RotatedFeatureAlignParams& params) {
  const c10::cuda::CUDAGuard guard(grad_output.device());
  at::globalContext().alertNotDeterministic("mmops::rotated_feature_align backward (CUDA)");
  const at::MemoryFormat format = grad_output.suggest_memory_format();
  const at::Tensor go = grad_output.contiguous(format);
  const at::Tensor boxes = best_rbboxes.contiguous();
  if (go.numel() == 0) {
    return at::empty(go.sizes(), go.options().memory_format(format));
  }
  const at::ScalarType acc_dtype = go.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const bool channels_last = format == at::MemoryFormat::ChannelsLast;
  if (!channels_last && !via_channels_last(go, kBackwardTransposeChannels)) {
    at::Tensor grad = at::empty(go.sizes(), go.options().dtype(acc_dtype));
    grad.copy_(go); // the identity term
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kHalf, at::kBFloat16, go.scalar_type(), "rotated_feature_align_backward_cuda", [&] {
          using acc_t = at::opmath_type<scalar_t>;
          launch_nchw<true, scalar_t, acc_t>(go.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(), nullptr,
                                             grad.mutable_data_ptr<acc_t>(), map_of<acc_t>(go, params));
        });
    return grad.scalar_type() == go.scalar_type() ? grad : grad.to(go.scalar_type());
  }
  // Channels-last: the scatter reads grad_output there (a copy of an NCHW
  // one) and adds into a channels-last buffer that starts as the identity term.
  const at::Tensor go_cl = channels_last ? go : channels_last_cuda(go);
  at::Tensor grad = at::empty(go.sizes(), go.options().dtype(acc_dtype).memory_format(at::MemoryFormat::ChannelsLast));
  grad.copy_(go_cl);
  at::Tensor out;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, go.scalar_type(), "rotated_feature_align_backward_cuda", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        backward_nhwc<scalar_t, acc_t>(go_cl, boxes, grad, params);
        if (channels_last) {
          out = grad.scalar_type() == go.scalar_type() ? grad : grad.to(go.scalar_type());
        } else {
          // Back to NCHW in the output type (rows = H * W, cols = C).
          out = at::empty(go.sizes(), go.options());
          layout::transpose(grad.const_data_ptr<acc_t>(), out.mutable_data_ptr<scalar_t>(), go.size(0),
                            go.size(2) * go.size(3), go.size(1), c10::cuda::getCurrentCUDAStream());
        }
      });
  return out;
}

} // namespace kernels
} // namespace mmops

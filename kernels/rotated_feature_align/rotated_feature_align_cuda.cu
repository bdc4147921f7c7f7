// CUDA kernels of rotated_feature_align.
//
// The taps of a pixel (up to 5 points x 4 neighbours) depend on its rbox only,
// so a thread computes them once and applies them to many channels:
//  * NCHW: a thread owns one pixel (threads along the row: coalesced box reads
//    and output writes) and a chunk of channels (blockIdx.y);
//  * channels-last: a warp owns one pixel, its lanes stride over the channels
//    (coalesced channel reads at every tap and coalesced writes).
// Backward: the gradient starts as grad_output (the identity term) in the
// compute type, then every pixel's samples add their weighted gradient with
// atomics (float for half/bfloat16, converted once at the end). The order of
// the adds is not fixed: torch.use_deterministic_algorithms(True) raises.
// A sample at a non-finite or outside coordinate contributes nothing.

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

namespace mmops {
namespace kernels {
namespace {

using namespace rotated_feature_align_math;

constexpr int kThreads = 256;
constexpr int kChannelChunk = 16; // channels of one NCHW thread
constexpr int kWarpPixels = 8;    // pixels (warps) of one channels-last block
constexpr int64_t kMaxGridY = 65535;
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

template <typename scalar_t, typename acc_t>
__device__ inline void align_channel(const scalar_t* __restrict__ in, scalar_t* __restrict__ out,
                                     const PixelTaps<acc_t>& taps, int64_t base, int64_t at) {
  const scalar_t* plane = in + base;
  out[base + at] = static_cast<scalar_t>(static_cast<acc_t>(plane[at]) + sample_sum(taps, plane));
}

template <typename scalar_t, typename acc_t>
__device__ inline void scatter_channel(const scalar_t* __restrict__ go, acc_t* __restrict__ grad,
                                       const PixelTaps<acc_t>& taps, int64_t base, int64_t at) {
  const acc_t v = static_cast<acc_t>(go[base + at]);
  for (int k = 0; k < taps.count; ++k) {
    if (taps.tap[k].valid) {
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

// Channels-last: a warp per pixel, lanes over channels.
template <bool Backward, typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kThreads)
    nhwc_kernel(const scalar_t* __restrict__ src, const scalar_t* __restrict__ boxes, scalar_t* __restrict__ out,
                acc_t* __restrict__ grad, Map<acc_t> m) {
  const int64_t pixel = blockIdx.x * int64_t(kWarpPixels) + threadIdx.y;
  if (pixel >= m.pixels) {
    return;
  }
  const int64_t n = pixel / m.plane, at = pixel_offset(pixel % m.plane, m);
  const PixelTaps<acc_t> taps = load_taps(boxes, pixel, m);
  for (int64_t c = threadIdx.x; c < m.channels; c += blockDim.x) {
    const int64_t base = n * m.image_stride + c * m.channel_stride;
    if constexpr (Backward) {
      scatter_channel(src, grad, taps, base, at);
    } else {
      align_channel(src, out, taps, base, at);
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

// Launches the kernel of the tensor's layout on the current stream.
template <bool Backward, typename scalar_t, typename acc_t>
void launch(bool channels_last, const scalar_t* src, const scalar_t* boxes, scalar_t* out, acc_t* grad,
            const Map<acc_t>& m) {
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (channels_last) {
    const int64_t blocks = (m.pixels + kWarpPixels - 1) / kWarpPixels;
    TORCH_CHECK(blocks <= kMaxGridX, "mmops::rotated_feature_align: too many pixels for one launch");
    nhwc_kernel<Backward, scalar_t, acc_t>
        <<<static_cast<unsigned>(blocks), dim3(32, kWarpPixels), 0, stream>>>(src, boxes, out, grad, m);
  } else {
    const int64_t blocks = (m.pixels + kThreads - 1) / kThreads;
    TORCH_CHECK(blocks <= kMaxGridX, "mmops::rotated_feature_align: too many pixels for one launch");
    const int64_t chunks = std::min<int64_t>((m.channels + kChannelChunk - 1) / kChannelChunk, kMaxGridY);
    nchw_kernel<Backward, scalar_t, acc_t>
        <<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(chunks)), kThreads, 0, stream>>>(src, boxes, out,
                                                                                                      grad, m);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
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
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, in.scalar_type(), "rotated_feature_align_forward_cuda", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        launch<false, scalar_t, acc_t>(channels_last, in.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(),
                                       out.mutable_data_ptr<scalar_t>(), nullptr, map_of<acc_t>(in, params));
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
  const at::ScalarType acc_dtype = go.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor grad = at::empty(go.sizes(), go.options().dtype(acc_dtype).memory_format(format));
  grad.copy_(go); // the identity term
  if (grad.numel() == 0) {
    return grad.to(go.scalar_type());
  }
  const bool channels_last = format == at::MemoryFormat::ChannelsLast;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, go.scalar_type(), "rotated_feature_align_backward_cuda", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        launch<true, scalar_t, acc_t>(channels_last, go.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(),
                                      nullptr, grad.mutable_data_ptr<acc_t>(), map_of<acc_t>(go, params));
      });
  return grad.scalar_type() == go.scalar_type() ? grad : grad.to(go.scalar_type());
}

} // namespace kernels
} // namespace mmops

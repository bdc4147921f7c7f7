// CUDA kernels of roi_pool.
//
// Forward: the kernel reads the input channels-last ([N, H, W, C] in memory):
// the 32 lanes of a warp load one pixel for 32 (64 for half/bfloat16: two per
// lane) consecutive channels with one coalesced 128-byte load, and every loaded
// byte is used (a bin's max needs all its pixels). An NCHW input is transposed
// once first; a channels_last input is read as it is. One block handles one roi
// and one chunk of channels: warps walk the bins, lanes the channels; results
// go through a shared tile so that the NCHW output [K, C, PH, PW] (and argmax)
// is written coalesced. The grid runs chunk-major, so a chunk's slice of the
// input stays in L2 while all rois read it.
// Backward: every output adds its gradient to exactly one input pixel (its
// argmax), different for every channel, so a channels-last buffer would not
// make the atomic adds coalesced. They go straight into the NCHW gradient
// (float for half/bfloat16, then converted once): one thread per output, in
// output order, so a warp's adds land in one plane of one roi. No transpose.
// With torch.use_deterministic_algorithms(True) the adds are int64 fixed point
// (scaled from max |grad_output| so that no sum can overflow; resolution about
// 2^-46 of max |grad_output| per add for 1024 rois of 7x7), whose total does
// not depend on the order of the adds: bitwise repeatable gradients. A
// non-finite grad_output makes that gradient all NaN.
// A roi whose batch index is out of range, or whose box is not finite, pools
// zeros (argmax -1) and receives no gradient.

#include "roi_pool/roi_pool_kernels.h"
#include "roi_pool/roi_pool_math.h"

#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/Atomic.cuh>
#include <ATen/ops/abs.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <limits>
#include <type_traits>

namespace mmops {
namespace kernels {
namespace {

using namespace roi_pool_math;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kBinChunk = 64;  // bins staged in the shared tile at a time

__device__ inline int64_t smaller(int64_t a, int64_t b) {
  return a < b ? a : b;
}

template <typename scalar_t>
constexpr int channel_vector() {
  return sizeof(scalar_t) == 2 ? 2 : 1;
}

template <typename scalar_t, int VEC>
struct alignas(sizeof(scalar_t) * VEC) Pack {
  scalar_t v[VEC];
};

template <typename acc_t, int VEC>
struct Tile {
  static constexpr int kChannels = 32 * VEC;
  static constexpr int kStride = kChannels + 1;  // padded against bank conflicts
  acc_t value[kBinChunk * kStride];
  int32_t argmax[kBinChunk * kStride];
  __device__ inline int at(int bin, int channel) const { return bin * kStride + channel; }
};

template <typename scalar_t, int VEC, bool kArgmax>
__global__ void __launch_bounds__(kThreads) forward_kernel(
    const scalar_t* __restrict__ input,  // [N, H, W, C]
    const scalar_t* __restrict__ rois, scalar_t* __restrict__ output,  // [K, C, PH, PW]
    int32_t* __restrict__ argmax, int64_t batch, int64_t channels, int64_t height, int64_t width,
    RoIPoolParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  using TileT = Tile<acc_t, VEC>;
  __shared__ TileT tile;

  const int64_t k = blockIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * TileT::kChannels;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t bins = p.pooled_height * p.pooled_width;
  const int64_t chunk_channels = smaller(TileT::kChannels, channels - c0);
  const scalar_t* roi = rois + k * 5;
  const PoolBox<acc_t> box = make_pool_box<acc_t>(
      static_cast<acc_t>(roi[1]), static_cast<acc_t>(roi[2]), static_cast<acc_t>(roi[3]),
      static_cast<acc_t>(roi[4]), static_cast<acc_t>(p.spatial_scale), p.pooled_height,
      p.pooled_width);
  const int64_t b = box.valid ? batch_index(static_cast<acc_t>(roi[0]), batch) : -1;
  const int64_t c = c0 + lane * VEC;
  const scalar_t* pixels = input + (b > 0 ? b : 0) * height * width * channels + c;

  for (int64_t bin0 = 0; bin0 < bins; bin0 += kBinChunk) {
    const int64_t chunk_bins = smaller(kBinChunk, bins - bin0);
    for (int bl = warp; bl < chunk_bins; bl += kWarps) {
      const int64_t ph = (bin0 + bl) / p.pooled_width, pw = (bin0 + bl) % p.pooled_width;
      MaxTracker<acc_t> tracker[VEC];
      if (b >= 0 && c < channels) {
        const Range hr = bin_range(box.start_h, box.bin_h, ph, height);
        const Range wr = bin_range(box.start_w, box.bin_w, pw, width);
        for (int64_t h = hr.begin; h < hr.end; ++h) {
#pragma unroll 4
          for (int64_t w = wr.begin; w < wr.end; ++w) {
            const int64_t pix = h * width + w;
            const Pack<scalar_t, VEC> v =
                *reinterpret_cast<const Pack<scalar_t, VEC>*>(pixels + pix * channels);
#pragma unroll
            for (int i = 0; i < VEC; ++i) {
              tracker[i].update(static_cast<acc_t>(v.v[i]), static_cast<int32_t>(pix));
            }
          }
        }
      }
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        tile.value[tile.at(bl, lane * VEC + i)] = tracker[i].result();
        if (kArgmax) {
          tile.argmax[tile.at(bl, lane * VEC + i)] = tracker[i].index;
        }
      }
    }
    __syncthreads();
    // Coalesced NCHW write: the chunk's channels are contiguous runs of bins.
    for (int i = threadIdx.x; i < chunk_channels * chunk_bins; i += kThreads) {
      const int cl = i / chunk_bins, bl = i % chunk_bins;
      const int64_t o = ((k * channels) + c0 + cl) * bins + bin0 + bl;
      output[o] = static_cast<scalar_t>(tile.value[tile.at(bl, cl)]);
      if (kArgmax) {
        argmax[o] = tile.argmax[tile.at(bl, cl)];
      }
    }
    __syncthreads();
  }
}

// One thread per output (grid-stride), in output order.
// index_t: 32-bit when every output index fits (cheaper divisions), else 64-bit.
template <typename scalar_t, typename acc_t, typename index_t>
__global__ void __launch_bounds__(kThreads) backward_kernel(
    const scalar_t* __restrict__ grad_output,  // [K, C, PH, PW]
    const scalar_t* __restrict__ rois, const int32_t* __restrict__ argmax,
    acc_t* __restrict__ grad,  // [N, C, H, W]
    index_t total, int64_t batch, index_t channels, index_t bins, int64_t plane) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < total;
       i += index_t(gridDim.x) * blockDim.x) {
    const int32_t a = argmax[i];
    if (a < 0 || a >= plane) {
      continue;
    }
    const index_t kc = i / bins;
    const index_t k = kc / channels, c = kc - k * channels;
    const int64_t b = batch_index(static_cast<acc_t>(rois[int64_t(k) * 5]), batch);
    if (b < 0) {
      continue;
    }
    gpuAtomicAdd(grad + (b * channels + c) * plane + a, static_cast<acc_t>(grad_output[i]));
  }
}

// Deterministic variant: int64 fixed-point adds (see roi_pool_math.h).
template <typename scalar_t, typename acc_t, typename index_t>
__global__ void __launch_bounds__(kThreads) backward_fixed_point_kernel(
    const scalar_t* __restrict__ grad_output, const scalar_t* __restrict__ rois,
    const int32_t* __restrict__ argmax, int64_t* __restrict__ sums, const float* __restrict__ max_abs,
    double adds_bound, index_t total, int64_t batch, index_t channels, index_t bins, int64_t plane) {
  const double scale = fixed_point_scale(*max_abs, adds_bound);
  if (!isfinite(scale)) {
    return;  // the conversion writes NaN everywhere
  }
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < total;
       i += index_t(gridDim.x) * blockDim.x) {
    const int32_t a = argmax[i];
    if (a < 0 || a >= plane) {
      continue;
    }
    const index_t kc = i / bins;
    const index_t k = kc / channels, c = kc - k * channels;
    const int64_t b = batch_index(static_cast<acc_t>(rois[int64_t(k) * 5]), batch);
    if (b < 0) {
      continue;
    }
    const double v = static_cast<double>(static_cast<acc_t>(grad_output[i])) * scale;
    // Two's complement: adding the unsigned image of a negative value subtracts.
    atomicAdd(reinterpret_cast<unsigned long long*>(sums + (b * channels + c) * plane + a),
              static_cast<unsigned long long>(llrint(v)));
  }
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads) fixed_point_to_value_kernel(
    const int64_t* __restrict__ sums, scalar_t* __restrict__ out, int64_t n,
    const float* __restrict__ max_abs, double adds_bound) {
  const double scale = fixed_point_scale(*max_abs, adds_bound);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = static_cast<scalar_t>(isfinite(scale) ? static_cast<double>(sums[i]) / scale : NAN);
  }
}

// out[b][c][r] = in[b][r][c] for `batches` rows x cols matrices, through a
// padded shared tile (coalesced reads and writes): NCHW -> NHWC in one pass.
constexpr int kTransposeTile = 32;

template <typename T>
__global__ void __launch_bounds__(kTransposeTile * 8) transpose_kernel(
    const T* __restrict__ in, T* __restrict__ out, int64_t rows, int64_t cols) {
  __shared__ T tile[kTransposeTile][kTransposeTile + 1];
  const int64_t b = blockIdx.z;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTransposeTile;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTransposeTile;
  const T* src = in + b * rows * cols;
  T* dst = out + b * rows * cols;
  for (int i = threadIdx.y; i < kTransposeTile; i += blockDim.y) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) {
      tile[i][threadIdx.x] = src[r * cols + c];
    }
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTransposeTile; i += blockDim.y) {
    const int64_t c = c0 + i, r = r0 + threadIdx.x;
    if (r < rows && c < cols) {
      dst[c * rows + r] = tile[threadIdx.x][i];
    }
  }
}

at::Tensor channels_last_input(const at::Tensor& input, cudaStream_t stream) {
  if (input.is_contiguous(at::MemoryFormat::ChannelsLast)) {
    return input;
  }
  const at::Tensor nchw = input.contiguous();
  at::Tensor out = at::empty(input.sizes(), input.options(), at::MemoryFormat::ChannelsLast);
  const int64_t batches = input.size(0), rows = input.size(1), cols = input.size(2) * input.size(3);
  if (out.numel() == 0) {
    return out;
  }
  const dim3 grid((cols + kTransposeTile - 1) / kTransposeTile,
                  (rows + kTransposeTile - 1) / kTransposeTile, batches);
  TORCH_CHECK(grid.y <= 65535 && grid.z <= 65535, "mmops::roi_pool: input too large to transpose");
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::roi_pool transpose", [&] {
    transpose_kernel<scalar_t><<<grid, dim3(kTransposeTile, 8), 0, stream>>>(
        nchw.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

// Calls fn(int32_t{}) when no output index (plus one grid stride, at most
// 2^28) can overflow 32 bits, else fn(int64_t{}).
template <typename Fn>
void with_index_type(int64_t total, Fn&& fn) {
  if (total + (int64_t(1) << 28) <= std::numeric_limits<int32_t>::max()) {
    fn(int32_t{});
  } else {
    fn(int64_t{});
  }
}

} // namespace

std::tuple<at::Tensor, at::Tensor> roi_pool_forward_cuda(
    const at::Tensor& input_, const at::Tensor& rois_, const RoIPoolParams& params,
    bool with_argmax) {
  c10::cuda::CUDAGuard device_guard(input_.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int64_t num_rois = rois_.size(0), channels = input_.size(1);
  at::Tensor output = at::empty({num_rois, channels, params.pooled_height, params.pooled_width},
                                input_.options());
  at::Tensor argmax = at::empty(with_argmax ? output.sizes() : at::IntArrayRef{0},
                                input_.options().dtype(at::kInt));
  if (output.numel() == 0) {
    return {output, argmax};
  }
  const at::Tensor rois = rois_.contiguous();
  const at::Tensor input = channels_last_input(input_, stream);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::roi_pool (CUDA)", [&] {
    constexpr int kVec = channel_vector<scalar_t>();
    const bool aligned =
        reinterpret_cast<uintptr_t>(input.const_data_ptr()) % (sizeof(scalar_t) * kVec) == 0;
    const bool vectorized = kVec > 1 && channels % kVec == 0 && aligned;
    auto launch = [&](auto vec_tag, auto arg_tag) {
      constexpr int VEC = decltype(vec_tag)::value;
      constexpr bool kArg = decltype(arg_tag)::value;
      const dim3 grid(num_rois, (channels + 32 * VEC - 1) / (32 * VEC));
      TORCH_CHECK(grid.y <= 65535, "mmops::roi_pool: too many channels (", channels, ")");
      forward_kernel<scalar_t, VEC, kArg><<<grid, kThreads, 0, stream>>>(
          input.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(),
          output.mutable_data_ptr<scalar_t>(), kArg ? argmax.mutable_data_ptr<int32_t>() : nullptr,
          input.size(0), channels, input.size(2), input.size(3), params);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    };
    using Yes = std::true_type;
    using No = std::false_type;
    if (vectorized) {
      with_argmax ? launch(std::integral_constant<int, kVec>{}, Yes{})
                  : launch(std::integral_constant<int, kVec>{}, No{});
    } else {
      with_argmax ? launch(std::integral_constant<int, 1>{}, Yes{})
                  : launch(std::integral_constant<int, 1>{}, No{});
    }
  });
  return {output, argmax};
}

at::Tensor roi_pool_backward_cuda(const at::Tensor& grad_output_, const at::Tensor& rois_,
                                  const at::Tensor& argmax_, const std::vector<int64_t>& input_shape,
                                  const RoIPoolParams& params) {
  c10::cuda::CUDAGuard device_guard(grad_output_.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const auto dtype = grad_output_.scalar_type();
  const bool reduced = dtype == at::kHalf || dtype == at::kBFloat16;
  const bool deterministic = at::globalContext().deterministicAlgorithms();
  const int64_t total = grad_output_.numel();
  const int64_t numel = input_shape[0] * input_shape[1] * input_shape[2] * input_shape[3];
  if (total == 0 || numel == 0) {
    return at::zeros(input_shape, grad_output_.options());
  }
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor rois = rois_.contiguous();
  const at::Tensor argmax = argmax_.contiguous();
  const int64_t bins = params.pooled_height * params.pooled_width;
  const int64_t plane = input_shape[2] * input_shape[3];
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, int64_t(1) << 20);
  const int64_t out_blocks = std::min<int64_t>((numel + kThreads - 1) / kThreads, int64_t(1) << 20);
  at::Tensor grad;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mmops::roi_pool backward (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    if (deterministic) {
      // every pixel of a plane receives at most one add per output bin of every roi
      const double adds_bound = static_cast<double>(rois.size(0)) * static_cast<double>(bins);
      const at::Tensor max_abs = grad_output.abs().amax().to(at::kFloat);
      at::Tensor sums = at::zeros(input_shape, grad_output.options().dtype(at::kLong));
      with_index_type(total, [&](auto index_tag) {
        using index_t = decltype(index_tag);
        backward_fixed_point_kernel<scalar_t, acc_t, index_t><<<blocks, kThreads, 0, stream>>>(
            grad_output.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(),
            argmax.const_data_ptr<int32_t>(), sums.mutable_data_ptr<int64_t>(),
            max_abs.const_data_ptr<float>(), adds_bound, static_cast<index_t>(total), input_shape[0],
            static_cast<index_t>(input_shape[1]), static_cast<index_t>(bins), plane);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
      grad = at::empty(input_shape, grad_output.options());
      fixed_point_to_value_kernel<scalar_t><<<out_blocks, kThreads, 0, stream>>>(
          sums.const_data_ptr<int64_t>(), grad.mutable_data_ptr<scalar_t>(), numel,
          max_abs.const_data_ptr<float>(), adds_bound);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
    // float / double atomics straight into the gradient; half / bfloat16 into a float buffer
    grad = at::zeros(input_shape, grad_output.options().dtype(reduced ? at::kFloat : dtype));
    with_index_type(total, [&](auto index_tag) {
      using index_t = decltype(index_tag);
      backward_kernel<scalar_t, acc_t, index_t><<<blocks, kThreads, 0, stream>>>(
          grad_output.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(),
          argmax.const_data_ptr<int32_t>(), grad.mutable_data_ptr<acc_t>(),
          static_cast<index_t>(total), input_shape[0], static_cast<index_t>(input_shape[1]),
          static_cast<index_t>(bins), plane);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  return reduced && !deterministic ? grad.to(dtype) : grad;
}

} // namespace kernels
} // namespace mmops

// CUDA kernels of roi_align.
//
// Layout: the kernels read features channels-last ([N, H, W, C] in memory), so
// that the 32 lanes of a warp fetch one bilinear tap for 32 (or 64) consecutive
// channels with one coalesced load; an NCHW input is transposed once first.
// One block handles one roi and one chunk of channels:
//   * the per-axis bilinear taps of the roi's samples are computed once into
//     shared memory (the weights are separable) and reused by every channel;
//   * warps walk the bins, lanes the channels; results go through a shared
//     tile so that the NCHW output [K, C, PH, PW] is written coalesced.
// Backward: the same blocks read grad_output through the tile and scatter into
// a channels-last accumulation buffer (float for half/bfloat16), whose atomic
// adds are coalesced across channels. When deterministic algorithms are
// requested the adds are integer (fixed point, scaled from max |grad_output|),
// so the sum does not depend on their order: bitwise repeatable.
// A roi whose batch index is out of range pools zeros and scatters nothing.

#include "roi_align/roi_align_kernels.h"
#include "roi_align/roi_align_math.h"

#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/Atomic.cuh>
#include <ATen/ops/abs.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cmath>
#include <type_traits>

namespace mmops {
namespace kernels {
namespace {

using namespace roi_align_math;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxTaps = 256;   // per-axis taps cached in shared memory
constexpr int kBinChunk = 32;   // bins staged in the shared tile at a time

template <typename T>
__device__ inline T smaller(T a, T b) {
  return a < b ? a : b;
}

// VEC consecutive channels travel together: 2 for 16-bit types so that a warp
// moves 128 bytes per tap, as it does with 32 floats.
template <typename scalar_t>
constexpr int channel_vector() {
  return sizeof(scalar_t) == 2 ? 2 : 1;
}

template <typename scalar_t, int VEC>
struct alignas(sizeof(scalar_t) * VEC) Pack {
  scalar_t v[VEC];
};

// Pixel data and size of each feature map, passed by value to the kernels.
template <typename T>
struct LevelTable {
  T* data[kMaxLevels];
  int64_t height[kMaxLevels];
  int64_t width[kMaxLevels];
};

// Everything a block needs to know about its roi.
template <typename acc_t>
struct BlockRoi {
  int64_t batch;   // -1: the roi pools zeros (bad index or non-finite box)
  int level;
  int64_t height, width;  // of its feature map
  RoiBox<acc_t> box;
  bool cached;     // taps in shared memory (else computed per sample)
};

template <typename scalar_t, typename acc_t, typename T>
__device__ BlockRoi<acc_t> setup_roi(const scalar_t* rois, int64_t k, int64_t batch,
                                     const LevelTable<T>& levels, const RoIAlignParams& p,
                                     AxisTap<acc_t>* ytaps, AxisTap<acc_t>* xtaps) {
  const scalar_t* roi = rois + k * 5;
  const RoiSource<acc_t> src = locate_roi<acc_t>(
      static_cast<acc_t>(roi[0]), static_cast<acc_t>(roi[1]), static_cast<acc_t>(roi[2]),
      static_cast<acc_t>(roi[3]), static_cast<acc_t>(roi[4]), batch, p.spatial_scale,
      p.num_levels, p.finest_scale, p.aligned, p.pooled_height, p.pooled_width, p.sampling_ratio);
  BlockRoi<acc_t> r;
  r.batch = src.batch;
  r.level = src.level;
  r.box = src.box;
  r.height = levels.height[r.level];
  r.width = levels.width[r.level];
  const int ny = static_cast<int>(p.pooled_height) * r.box.grid_h;
  const int nx = static_cast<int>(p.pooled_width) * r.box.grid_w;
  r.cached = ny <= kMaxTaps && nx <= kMaxTaps;
  if (r.batch >= 0 && r.cached) {
    for (int i = threadIdx.x; i < ny + nx; i += blockDim.x) {
      if (i < ny) {
        ytaps[i] = axis_tap(sample_coord(r.box.start_y, r.box.bin_h, i / r.box.grid_h, i % r.box.grid_h, r.box.grid_h), r.height);
      } else {
        const int j = i - ny;
        xtaps[j] = axis_tap(sample_coord(r.box.start_x, r.box.bin_w, j / r.box.grid_w, j % r.box.grid_w, r.box.grid_w), r.width);
      }
    }
  }
  __syncthreads();
  return r;
}

template <typename acc_t>
__device__ inline AxisTap<acc_t> y_tap(const BlockRoi<acc_t>& r, const AxisTap<acc_t>* ytaps,
                                        int64_t ph, int iy) {
  return r.cached ? ytaps[ph * r.box.grid_h + iy]
                  : axis_tap(sample_coord(r.box.start_y, r.box.bin_h, ph, iy, r.box.grid_h), r.height);
}

template <typename acc_t>
__device__ inline AxisTap<acc_t> x_tap(const BlockRoi<acc_t>& r, const AxisTap<acc_t>* xtaps,
                                        int64_t pw, int ix) {
  return r.cached ? xtaps[pw * r.box.grid_w + ix]
                  : axis_tap(sample_coord(r.box.start_x, r.box.bin_w, pw, ix, r.box.grid_w), r.width);
}

// Interpolated values of VEC channels at one sample. `pixels` points at
// channel c of pixel (0, 0) of the roi's image, channels-last.
template <typename scalar_t, typename acc_t, int VEC>
__device__ inline void sample_values(const scalar_t* pixels, int64_t channels, int64_t width,
                                     const AxisTap<acc_t>& ty, const AxisTap<acc_t>& tx,
                                     acc_t (&out)[VEC]) {
#pragma unroll
  for (int v = 0; v < VEC; ++v) {
    out[v] = acc_t(0);
  }
  if (!(ty.valid && tx.valid)) {
    return;
  }
  const Corners<acc_t> cr = corners(ty, tx, width);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const Pack<scalar_t, VEC> px =
        *reinterpret_cast<const Pack<scalar_t, VEC>*>(pixels + cr.offset[j] * channels);
#pragma unroll
    for (int v = 0; v < VEC; ++v) {
      out[v] += cr.weight[j] * static_cast<acc_t>(px.v[v]);
    }
  }
}

// Shared tile: kBinChunk bins x (32 * VEC) channels, padded against bank conflicts.
template <typename acc_t, int VEC>
struct Tile {
  static constexpr int kChannels = 32 * VEC;
  static constexpr int kStride = kChannels + 1;
  acc_t value[kBinChunk * kStride];
  int32_t argmax[kBinChunk * kStride];
  __device__ inline int at(int bin, int channel) const { return bin * kStride + channel; }
};

template <typename scalar_t, int VEC, bool kMax>
__global__ void __launch_bounds__(kThreads) forward_kernel(
    const LevelTable<const scalar_t> levels,  // each [N, H_l, W_l, C]
    const scalar_t* __restrict__ rois, scalar_t* __restrict__ output,  // [K, C, PH, PW]
    int32_t* __restrict__ argmax, int64_t batch, int64_t channels, RoIAlignParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  using TileT = Tile<acc_t, VEC>;
  __shared__ AxisTap<acc_t> ytaps[kMaxTaps];
  __shared__ AxisTap<acc_t> xtaps[kMaxTaps];
  __shared__ TileT tile;

  const int64_t k = blockIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * TileT::kChannels;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t bins = p.pooled_height * p.pooled_width;
  const int64_t chunk_channels = smaller<int64_t>(TileT::kChannels, channels - c0);
  const BlockRoi<acc_t> r = setup_roi(rois, k, batch, levels, p, ytaps, xtaps);
  const int gh = r.box.grid_h, gw = r.box.grid_w;
  const acc_t inv_count = gh * gw > 0 ? acc_t(1) / static_cast<acc_t>(gh * gw) : acc_t(0);
  const int64_t c = c0 + lane * VEC;
  const int64_t width = r.width;
  const scalar_t* pixels =
      levels.data[r.level] + ((r.batch > 0 ? r.batch : 0) * r.height * r.width) * channels + c;

  for (int64_t bin0 = 0; bin0 < bins; bin0 += kBinChunk) {
    const int64_t chunk_bins = smaller<int64_t>(kBinChunk, bins - bin0);
    for (int bl = warp; bl < chunk_bins; bl += kWarps) {
      const int64_t ph = (bin0 + bl) / p.pooled_width, pw = (bin0 + bl) % p.pooled_width;
      acc_t result[VEC];
      int32_t best_sample[VEC];
      MaxTracker<acc_t> tracker[VEC];
      acc_t sum[VEC];
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        sum[v] = acc_t(0);
      }
      if (r.batch >= 0 && c < channels) {
        for (int iy = 0; iy < gh; ++iy) {
          const AxisTap<acc_t> ty = y_tap(r, ytaps, ph, iy);
          for (int ix = 0; ix < gw; ++ix) {
            const AxisTap<acc_t> tx = x_tap(r, xtaps, pw, ix);
            acc_t value[VEC];
            sample_values<scalar_t, acc_t, VEC>(pixels, channels, width, ty, tx, value);
#pragma unroll
            for (int v = 0; v < VEC; ++v) {
              if (kMax) {
                tracker[v].update(value[v], iy * gw + ix);
              } else {
                sum[v] += value[v];
              }
            }
          }
        }
      }
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        result[v] = kMax ? tracker[v].result() : sum[v] * inv_count;
        best_sample[v] = kMax ? tracker[v].index : -1;
        tile.value[tile.at(bl, lane * VEC + v)] = result[v];
        if (kMax) {
          tile.argmax[tile.at(bl, lane * VEC + v)] = best_sample[v];
        }
      }
    }
    __syncthreads();
    // Coalesced NCHW write: the chunk's channels are contiguous runs of bins.
    for (int i = threadIdx.x; i < chunk_channels * chunk_bins; i += kThreads) {
      const int cl = i / chunk_bins, bl = i % chunk_bins;
      const int64_t o = ((k * channels) + c0 + cl) * bins + bin0 + bl;
      output[o] = static_cast<scalar_t>(tile.value[tile.at(bl, cl)]);
      if (kMax && argmax) {
        argmax[o] = tile.argmax[tile.at(bl, cl)];
      }
    }
    __syncthreads();
  }
}

// Adds one value into the accumulation buffer: floating atomics, or integer
// (fixed point) atomics whose result does not depend on the order of adds.
template <typename acc_t, typename sum_t>
__device__ inline void accumulate(sum_t* address, acc_t value, double scale) {
  if constexpr (std::is_same_v<sum_t, int64_t>) {
    // Two's complement: adding the unsigned image of a negative value subtracts.
    atomicAdd(reinterpret_cast<unsigned long long*>(address),
              static_cast<unsigned long long>(llrint(static_cast<double>(value) * scale)));
  } else {
    gpuAtomicAdd(address, value);
  }
}

template <typename scalar_t, typename sum_t, int VEC, bool kMax>
__global__ void __launch_bounds__(kThreads) backward_kernel(
    const scalar_t* __restrict__ grad_output,  // [K, C, PH, PW]
    const scalar_t* __restrict__ rois, const int32_t* __restrict__ argmax,
    const LevelTable<sum_t> grad_sums,  // each [N, H_l, W_l, C]
    const float* __restrict__ max_abs_grad, int64_t batch, int64_t channels, RoIAlignParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  using TileT = Tile<acc_t, VEC>;
  __shared__ AxisTap<acc_t> ytaps[kMaxTaps];
  __shared__ AxisTap<acc_t> xtaps[kMaxTaps];
  __shared__ TileT tile;

  const int64_t k = blockIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * TileT::kChannels;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t bins = p.pooled_height * p.pooled_width;
  const int64_t chunk_channels = smaller<int64_t>(TileT::kChannels, channels - c0);
  const BlockRoi<acc_t> r = setup_roi(rois, k, batch, grad_sums, p, ytaps, xtaps);
  const int gh = r.box.grid_h, gw = r.box.grid_w;
  if (r.batch < 0 || gh * gw == 0) {
    return;  // uniform across the block
  }
  double scale = 1.0;
  if constexpr (std::is_same_v<sum_t, int64_t>) {
    scale = fixed_point_scale(*max_abs_grad, static_cast<double>(gridDim.x) * bins);
    if (!isfinite(scale)) {
      return;  // non-finite grad_output: the conversion writes NaN everywhere
    }
  }
  const acc_t inv_count = acc_t(1) / static_cast<acc_t>(gh * gw);
  const int64_t c = c0 + lane * VEC;
  const int64_t width = r.width;
  sum_t* pixels = grad_sums.data[r.level] + (r.batch * r.height * r.width) * channels + c;

  for (int64_t bin0 = 0; bin0 < bins; bin0 += kBinChunk) {
    const int64_t chunk_bins = smaller<int64_t>(kBinChunk, bins - bin0);
    for (int i = threadIdx.x; i < chunk_channels * chunk_bins; i += kThreads) {
      const int cl = i / chunk_bins, bl = i % chunk_bins;
      const int64_t o = ((k * channels) + c0 + cl) * bins + bin0 + bl;
      tile.value[tile.at(bl, cl)] = static_cast<acc_t>(grad_output[o]);
      if (kMax) {
        tile.argmax[tile.at(bl, cl)] = argmax[o];
      }
    }
    __syncthreads();
    if (c < channels) {
      for (int bl = warp; bl < chunk_bins; bl += kWarps) {
        const int64_t ph = (bin0 + bl) / p.pooled_width, pw = (bin0 + bl) % p.pooled_width;
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
          const acc_t g = tile.value[tile.at(bl, lane * VEC + v)];
          auto scatter = [&](const AxisTap<acc_t>& ty, const AxisTap<acc_t>& tx, acc_t value) {
            if (!(ty.valid && tx.valid)) {
              return;
            }
            const Corners<acc_t> cr = corners(ty, tx, width);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              accumulate(pixels + cr.offset[j] * channels + v, value * cr.weight[j], scale);
            }
          };
          if (kMax) {
            const int s = tile.argmax[tile.at(bl, lane * VEC + v)];
            if (s >= 0 && s < gh * gw) {
              scatter(y_tap(r, ytaps, ph, s / gw), x_tap(r, xtaps, pw, s % gw), g);
            }
          } else {
            const acc_t g_sample = g * inv_count;
            for (int iy = 0; iy < gh; ++iy) {
              const AxisTap<acc_t> ty = y_tap(r, ytaps, ph, iy);
              for (int ix = 0; ix < gw; ++ix) {
                scatter(ty, x_tap(r, xtaps, pw, ix), g_sample);
              }
            }
          }
        }
      }
    }
    __syncthreads();
  }
}

// Fixed point -> value, for the deterministic backward. A non-finite
// grad_output cannot be summed in fixed point: the whole gradient is NaN then.
template <typename acc_t>
__global__ void fixed_point_to_value_kernel(const int64_t* __restrict__ sums, acc_t* __restrict__ out,
                                            int64_t n, const float* __restrict__ max_abs_grad,
                                            double adds_bound) {
  const double scale = fixed_point_scale(*max_abs_grad, adds_bound);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = isfinite(scale) ? static_cast<acc_t>(static_cast<double>(sums[i]) / scale)
                             : static_cast<acc_t>(NAN);
  }
}

// out[b][c][r] = in[b][r][c] for a batch of rows x cols matrices, through a
// padded shared tile so that both the reads and the writes are coalesced.
// Converts NCHW <-> channels-last (and the element type) in one pass.
constexpr int kTransposeTile = 32;

template <typename in_t, typename out_t>
__global__ void __launch_bounds__(kTransposeTile * 8) transpose_kernel(
    const in_t* __restrict__ in, out_t* __restrict__ out, int64_t rows, int64_t cols) {
  __shared__ out_t tile[kTransposeTile][kTransposeTile + 1];
  const int64_t b = blockIdx.z;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTransposeTile;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTransposeTile;
  const in_t* src = in + b * rows * cols;
  out_t* dst = out + b * rows * cols;
  for (int i = threadIdx.y; i < kTransposeTile; i += blockDim.y) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) {
      tile[i][threadIdx.x] = static_cast<out_t>(src[r * cols + c]);
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

// Launches transpose_kernel over `batches` matrices of rows x cols.
template <typename in_t, typename out_t>
void transpose(const in_t* in, out_t* out, int64_t batches, int64_t rows, int64_t cols,
               cudaStream_t stream) {
  if (batches * rows * cols == 0) {
    return;
  }
  const dim3 grid((cols + kTransposeTile - 1) / kTransposeTile,
                  (rows + kTransposeTile - 1) / kTransposeTile, batches);
  TORCH_CHECK(grid.y <= 65535 && grid.z <= 65535, "mmops::roi_align: tensor too large to transpose");
  transpose_kernel<in_t, out_t><<<grid, dim3(kTransposeTile, 8), 0, stream>>>(in, out, rows, cols);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The input in channels-last memory order: as it is if it already is, else
// transposed by one kernel (ATen's generic copy is several times slower here).
at::Tensor channels_last_input(const at::Tensor& input, cudaStream_t stream) {
  if (input.is_contiguous(at::MemoryFormat::ChannelsLast)) {
    return input;
  }
  const at::Tensor nchw = input.contiguous();
  at::Tensor out = at::empty(input.sizes(), input.options(), at::MemoryFormat::ChannelsLast);
  if (out.numel() > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::roi_align transpose", [&] {
      transpose(nchw.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), input.size(0),
                input.size(1), input.size(2) * input.size(3), stream);
    });
  }
  return out;
}

int64_t blocks_for(int64_t n) {
  return std::min<int64_t>(std::max<int64_t>((n + kThreads - 1) / kThreads, 1), int64_t(1) << 20);
}

template <typename scalar_t>
int vector_width(const at::Tensor& t, int64_t channels) {
  constexpr int vec = channel_vector<scalar_t>();
  const bool aligned = reinterpret_cast<uintptr_t>(t.const_data_ptr()) % (sizeof(scalar_t) * vec) == 0;
  return channels % vec == 0 && aligned ? vec : 1;
}

} // namespace

bool current_cuda_stream_is_capturing() {
  return c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
}

// Calls launch(vec, max) with the compile-time channel vector width (the wide
// one when `vectorized`) and pool mode.
template <typename scalar_t, typename Launch>
void launch_variant(bool vectorized, bool max_mode, Launch&& launch) {
  constexpr int kVec = channel_vector<scalar_t>();
  using Max = std::true_type;
  using Avg = std::false_type;
  if (vectorized && max_mode) {
    launch(std::integral_constant<int, kVec>{}, Max{});
  } else if (vectorized) {
    launch(std::integral_constant<int, kVec>{}, Avg{});
  } else if (max_mode) {
    launch(std::integral_constant<int, 1>{}, Max{});
  } else {
    launch(std::integral_constant<int, 1>{}, Avg{});
  }
}

std::tuple<at::Tensor, at::Tensor> roi_align_forward_cuda(
    at::TensorList features_, const at::Tensor& rois_, const RoIAlignParams& params,
    bool with_argmax) {
  c10::cuda::CUDAGuard device_guard(features_.front().device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  // Channels-last is what the kernel reads; NCHW maps are transposed once.
  std::vector<at::Tensor> features;
  for (const at::Tensor& f : features_) {
    features.push_back(channels_last_input(f, stream));
  }
  const at::Tensor& first = features.front();
  const at::Tensor rois = rois_.contiguous();
  const int64_t num_rois = rois.size(0), channels = first.size(1);
  at::Tensor output = at::empty({num_rois, channels, params.pooled_height, params.pooled_width}, first.options());
  const bool max_mode = params.pool_mode == PoolMode::Max;
  const bool store_argmax = with_argmax && max_mode;
  at::Tensor argmax = at::empty(store_argmax ? output.sizes() : at::IntArrayRef{0},
                                first.options().dtype(at::kInt));
  if (output.numel() == 0) {
    return {output, argmax};
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, first.scalar_type(), "mmops::roi_align (CUDA)", [&] {
    LevelTable<const scalar_t> levels{};
    bool vectorized = true;
    for (size_t l = 0; l < features.size(); ++l) {
      levels.data[l] = features[l].const_data_ptr<scalar_t>();
      levels.height[l] = features[l].size(2);
      levels.width[l] = features[l].size(3);
      vectorized = vectorized && vector_width<scalar_t>(features[l], channels) == channel_vector<scalar_t>();
    }
    launch_variant<scalar_t>(vectorized, max_mode, [&](auto vec_tag, auto max_tag) {
      constexpr int VEC = decltype(vec_tag)::value;
      constexpr bool kMax = decltype(max_tag)::value;
      const dim3 grid(num_rois, (channels + 32 * VEC - 1) / (32 * VEC));
      forward_kernel<scalar_t, VEC, kMax><<<grid, kThreads, 0, stream>>>(
          levels, rois.const_data_ptr<scalar_t>(), output.mutable_data_ptr<scalar_t>(),
          store_argmax ? argmax.mutable_data_ptr<int32_t>() : nullptr, first.size(0), channels, params);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  return {output, argmax};
}

std::vector<at::Tensor> roi_align_backward_cuda(
    const at::Tensor& grad_output_, const at::Tensor& rois_, const at::Tensor& argmax_,
    const std::vector<std::vector<int64_t>>& feature_shapes, const RoIAlignParams& params) {
  c10::cuda::CUDAGuard device_guard(grad_output_.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor rois = rois_.contiguous();
  const bool max_mode = params.pool_mode == PoolMode::Max;
  const at::Tensor argmax = max_mode ? argmax_.contiguous() : argmax_;
  const auto dtype = grad_output.scalar_type();
  const bool deterministic = at::globalContext().deterministicAlgorithms();
  const auto acc_dtype = (dtype == at::kHalf || dtype == at::kBFloat16) ? at::kFloat : dtype;
  const auto options = grad_output.options();
  const int64_t num_rois = rois.size(0);
  const int64_t batch = feature_shapes.front()[0], channels = feature_shapes.front()[1];
  const int64_t bins = params.pooled_height * params.pooled_width;
  std::vector<at::Tensor> grads;
  // Channels-last accumulation buffers ([N, H, W, C] in memory; at::zeros would
  // drop the memory format); deterministic mode sums int64 fixed point.
  std::vector<at::Tensor> sums;
  for (const auto& shape : feature_shapes) {
    grads.push_back(at::empty(shape, options));
    sums.push_back(at::empty(shape, options.dtype(deterministic ? at::kLong : acc_dtype),
                             at::MemoryFormat::ChannelsLast).zero_());
  }
  if (grad_output.numel() == 0 || batch * channels == 0) {
    for (at::Tensor& g : grads) {
      g.zero_();
    }
    return grads;
  }
  at::Tensor max_abs;
  if (deterministic) {
    max_abs = grad_output.abs().amax().to(at::kFloat);
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mmops::roi_align backward (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    auto scatter_into = [&](auto sum_tag) {
      using sum_t = typename decltype(sum_tag)::type;
      LevelTable<sum_t> levels{};
      for (size_t l = 0; l < sums.size(); ++l) {
        levels.data[l] = sums[l].mutable_data_ptr<sum_t>();
        levels.height[l] = sums[l].size(2);
        levels.width[l] = sums[l].size(3);
      }
      // Vectors of 2 channels need even channel counts; the buffers are fresh, so aligned.
      const bool vectorized = channels % channel_vector<scalar_t>() == 0;
      launch_variant<scalar_t>(vectorized, max_mode, [&](auto vec_tag, auto max_tag) {
        constexpr int VEC = decltype(vec_tag)::value;
        constexpr bool kMax = decltype(max_tag)::value;
        const dim3 grid(num_rois, (channels + 32 * VEC - 1) / (32 * VEC));
        backward_kernel<scalar_t, sum_t, VEC, kMax><<<grid, kThreads, 0, stream>>>(
            grad_output.const_data_ptr<scalar_t>(), rois.const_data_ptr<scalar_t>(),
            kMax ? argmax.const_data_ptr<int32_t>() : nullptr, levels,
            deterministic ? max_abs.const_data_ptr<float>() : nullptr, batch, channels, params);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
    };
    if (deterministic) {
      scatter_into(std::type_identity<int64_t>{});
      for (at::Tensor& sum : sums) {
        at::Tensor values = at::empty(sum.sizes(), options.dtype(acc_dtype), at::MemoryFormat::ChannelsLast);
        fixed_point_to_value_kernel<acc_t><<<blocks_for(values.numel()), kThreads, 0, stream>>>(
            sum.const_data_ptr<int64_t>(), values.mutable_data_ptr<acc_t>(), values.numel(),
            max_abs.const_data_ptr<float>(), static_cast<double>(num_rois) * bins);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        sum = values;
      }
    } else {
      scatter_into(std::type_identity<acc_t>{});
    }
    // One pass per map converts the layout (channels-last -> NCHW) and the dtype.
    for (size_t l = 0; l < sums.size(); ++l) {
      transpose(sums[l].const_data_ptr<acc_t>(), grads[l].mutable_data_ptr<scalar_t>(), batch,
                sums[l].size(2) * sums[l].size(3), channels, stream);
    }
  });
  return grads;
}

} // namespace kernels
} // namespace mmops

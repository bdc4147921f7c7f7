// CUDA backward of roi_align and multi_level_roi_align, deterministic
// (torch.use_deterministic_algorithms): a gather.
//
// Every gradient value is owned by one thread that sums, in a fixed order, the
// contributions of the samples that touch it. A block owns a tile of 8 rows x
// 32 pixels of one image and 64 channels (32 for double); warp w owns tile row
// w and lane l channels l and l + 32. The block examines every roi (culled by
// its footprint) and each warp adds the samples whose taps fall on its row
// into a shared tile, written once to the NCHW gradient. No atomics: bitwise
// repeatable.

#include "common/layout_cuda.cuh"
#include "roi_align/roi_align_cuda.cuh"

#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>

#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace mmops {
namespace kernels {
namespace roi_align_cuda {
namespace {

constexpr int kGatherRows = kWarps; // tile rows: one per warp
constexpr int kGatherWidth = 32;    // tile columns

// Channels per lane: each roi found near a tile is scanned once per block, so
// more channels per block means less scanning per gradient value. The tile
// is 8 x 32 pixels x 64 channels of float (x 32 channels of double), 66 KB.
template <typename acc_t>
constexpr int gather_vector() {
  return sizeof(acc_t) == 8 ? 1 : 2;
}

template <typename acc_t>
constexpr int gather_channels() {
  return 32 * gather_vector<acc_t>();
}

// acc[row][x][v * 32 + lane]; the padding makes the write-out (threads along
// x) conflict-free, and lanes on consecutive channels are too.
template <typename acc_t>
constexpr int gather_stride() {
  return gather_channels<acc_t>() + 1;
}

template <typename acc_t>
constexpr size_t gather_smem_bytes() {
  return sizeof(acc_t) * kGatherRows * kGatherWidth * gather_stride<acc_t>();
}

// Gradient maps, NCHW, and how the grid's tiles are numbered: level l's
// tiles are [first_tile[l], first_tile[l + 1]), image-major, then row-major.
template <typename T>
struct GatherTable {
  T* data[kMaxLevels];
  int64_t height[kMaxLevels];
  int64_t width[kMaxLevels];
  int64_t tiles_x[kMaxLevels];
  int64_t tiles_per_image[kMaxLevels];
  int64_t first_tile[kMaxLevels];
};

// The tile of a block: map (level) and its size, image n, first row and column.
struct GatherTile {
  int level;
  int64_t height, width;
  int64_t n, y0, x0;
};

template <typename T>
__device__ __forceinline__ GatherTile locate_tile(const GatherTable<T>& table, int num_levels) {
  const int64_t tile = blockIdx.x;
  GatherTile t;
  t.level = 0;
#pragma unroll
  for (int l = 1; l < kMaxLevels; ++l) {
    t.level = (l < num_levels && tile >= table.first_tile[l]) ? l : t.level;
  }
  t.height = select_entry(table.height, t.level);
  t.width = select_entry(table.width, t.level);
  const int64_t tiles_x = select_entry(table.tiles_x, t.level);
  const int64_t tiles_per_image = select_entry(table.tiles_per_image, t.level);
  const int64_t local = tile - select_entry(table.first_tile, t.level);
  t.n = local / tiles_per_image;
  t.y0 = (local % tiles_per_image) / tiles_x * kGatherRows;
  t.x0 = (local % tiles_per_image) % tiles_x * kGatherWidth;
  return t;
}

// A roi that may touch the block's tile.
template <typename acc_t>
struct ListedRoi {
  acc_t start_y, start_x, bin_h, bin_w;
  int32_t k;
  int16_t grid_h, grid_w;
};

// True if the taps of some sample of `box` may fall inside rows [y0, y1) and
// columns [x0, x1). Conservative: every sample lies strictly inside the box
// and its taps within one pixel of it.
template <typename acc_t>
__device__ inline bool may_touch(const RoiBox<acc_t>& box, int64_t pooled_h, int64_t pooled_w, int64_t y0, int64_t y1,
                                 int64_t x0, int64_t x1) {
  const acc_t y_end = box.start_y + box.bin_h * static_cast<acc_t>(pooled_h);
  const acc_t x_end = box.start_x + box.bin_w * static_cast<acc_t>(pooled_w);
  const acc_t lo_y = smaller(box.start_y, y_end) - acc_t(1), hi_y = larger(box.start_y, y_end) + acc_t(1);
  const acc_t lo_x = smaller(box.start_x, x_end) - acc_t(1), hi_x = larger(box.start_x, x_end) + acc_t(1);
  return hi_y >= static_cast<acc_t>(y0) && lo_y < static_cast<acc_t>(y1) && hi_x >= static_cast<acc_t>(x0) &&
         lo_x < static_cast<acc_t>(x1);
}

// Phase 1, rois [r0, r0 + kThreads): each thread examines one roi; the ones
// that may touch the tile are listed in roi order (the order of the adds,
// hence deterministic). Returns how many were listed (the same in every thread).
template <typename scalar_t, typename acc_t>
__device__ __forceinline__ int list_rois(const scalar_t* rois, int64_t num_rois, int64_t r0, int64_t batch,
                                         const GatherTile& t, const RoIAlignParams& p, ListedRoi<acc_t>* listed,
                                         int* warp_counts) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t k = r0 + threadIdx.x;
  bool take = false;
  ListedRoi<acc_t> entry{};
  if (k < num_rois) {
    const scalar_t* roi = rois + k * 5;
    const RoiSource<acc_t> src =
        locate_roi<acc_t>(static_cast<acc_t>(roi[0]), static_cast<acc_t>(roi[1]), static_cast<acc_t>(roi[2]),
                          static_cast<acc_t>(roi[3]), static_cast<acc_t>(roi[4]), batch, p.spatial_scale, p.num_levels,
                          p.finest_scale, p.aligned, p.pooled_height, p.pooled_width, p.sampling_ratio);
    take = src.batch == t.n && src.level == t.level && src.box.grid_h > 0 && src.box.grid_w > 0 &&
           may_touch(src.box, p.pooled_height, p.pooled_width, t.y0, t.y0 + kGatherRows, t.x0, t.x0 + kGatherWidth);
    entry = {src.box.start_y,
             src.box.start_x,
             src.box.bin_h,
             src.box.bin_w,
             static_cast<int32_t>(k),
             static_cast<int16_t>(src.box.grid_h),
             static_cast<int16_t>(src.box.grid_w)};
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
    listed[offset + __popc(ballot & ((1u << lane) - 1u))] = entry;
  }
  __syncthreads();
  return total;
}

// Phase 2, one sample whose taps hit the warp's row: its bin's grad_output
// (grad_t[at_bin + 32 * v]; in max mode only where `sample` won) times the
// bilinear weights weight_lo / weight_hi goes to tile columns x_lo / x_hi
// (none outside [0, TW)) of the lane's channels c + 32 * v.
template <typename acc_t, bool kMax>
__device__ __forceinline__ void add_hit(const acc_t* grad_t, const int32_t* argmax_t, int64_t at_bin, int sample,
                                        acc_t inv_count, int x_lo, int x_hi, acc_t weight_lo, acc_t weight_hi,
                                        int64_t c, int64_t channels, acc_t* my_row) {
  constexpr int TW = kGatherWidth;
  constexpr int VEC = gather_vector<acc_t>();
  constexpr int kStride = gather_stride<acc_t>();
#pragma unroll
  for (int v = 0; v < VEC; ++v) {
    if (c + 32 * v >= channels) {
      continue;
    }
    acc_t g;
    if (kMax) {
      if (argmax_t[at_bin + 32 * v] != sample) {
        continue; // not this channel's winning sample
      }
      g = grad_t[at_bin + 32 * v];
    } else {
      g = grad_t[at_bin + 32 * v] * inv_count;
    }
    if (x_lo >= 0 && x_lo < TW) {
      my_row[x_lo * kStride + v * 32] += g * weight_lo;
    }
    if (x_hi >= 0 && x_hi < TW) {
      my_row[x_hi * kStride + v * 32] += g * weight_hi;
    }
  }
}

// Phase 3: the tile to the NCHW gradient, rows of kGatherWidth consecutive pixels.
template <typename scalar_t, typename acc_t>
__device__ __forceinline__ void write_tile(const acc_t* acc, scalar_t* grad, const GatherTile& t, int64_t c0,
                                           int64_t channels) {
  constexpr int TW = kGatherWidth;
  constexpr int kStride = gather_stride<acc_t>();
  for (int i = threadIdx.x; i < gather_channels<acc_t>() * kGatherRows * TW; i += kThreads) {
    const int x = i % TW, y = (i / TW) % kGatherRows, cl = i / (TW * kGatherRows);
    const int64_t cc = c0 + cl;
    if (cc < channels && t.y0 + y < t.height && t.x0 + x < t.width) {
      grad[((t.n * channels + cc) * t.height + t.y0 + y) * t.width + t.x0 + x] =
          static_cast<scalar_t>(acc[(y * TW + x) * kStride + cl]);
    }
  }
}

template <typename scalar_t, bool kMax>
__global__ void __launch_bounds__(kThreads)
    gather_backward_kernel(const at::opmath_type<scalar_t>* __restrict__ grad_t, // [K, PH*PW, C]
                           const int32_t* __restrict__ argmax_t,                 // [K, PH*PW, C] (max mode)
                           const scalar_t* __restrict__ rois, int64_t num_rois, const GatherTable<scalar_t> table,
                           int64_t batch, int64_t channels, RoIAlignParams p) {
  using acc_t = at::opmath_type<scalar_t>;
  constexpr int TW = kGatherWidth;
  constexpr int VEC = gather_vector<acc_t>();
  constexpr int kStride = gather_stride<acc_t>();
  extern __shared__ __align__(16) unsigned char gather_smem[];
  acc_t* acc = reinterpret_cast<acc_t*>(gather_smem); // [kGatherRows][TW][kStride]
  __shared__ ListedRoi<acc_t> listed[kThreads];
  __shared__ int warp_counts[kWarps];

  const GatherTile tile = locate_tile(table, p.num_levels);
  const int64_t height = tile.height, width = tile.width, x0 = tile.x0;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * gather_channels<acc_t>();
  const int64_t c = c0 + lane;        // and c + 32 * v
  const int64_t row = tile.y0 + warp; // the tile row this warp owns
  const int64_t bins = p.pooled_height * p.pooled_width;

  acc_t* my_row = acc + warp * TW * kStride + lane; // acc[warp][x][v * 32 + lane]
  for (int x = 0; x < TW; ++x) {
#pragma unroll
    for (int v = 0; v < VEC; ++v) {
      my_row[x * kStride + v * 32] = acc_t(0);
    }
  }

  for (int64_t r0 = 0; r0 < num_rois; r0 += kThreads) {
    const int total = list_rois<scalar_t, acc_t>(rois, num_rois, r0, batch, tile, p, listed, warp_counts);
    // Phase 2: each warp adds the samples of the listed rois whose taps fall
    // on its row and inside the tile's columns; lane = channel.
    for (int i = 0; i < total && row < height; ++i) {
      const ListedRoi<acc_t> roi = listed[i];
      const int gh = roi.grid_h, gw = roi.grid_w;
      const int ny = static_cast<int>(p.pooled_height) * gh, nx = static_cast<int>(p.pooled_width) * gw;
      const acc_t inv_count = acc_t(1) / static_cast<acc_t>(gh * gw);
      const int64_t roi_grads = static_cast<int64_t>(roi.k) * bins * channels + c;
      for (int sy0 = 0; sy0 < ny; sy0 += 32) {
        // Lane j looks at sample row sy0 + j: its weight on this warp's row.
        const int sy = sy0 + lane;
        acc_t wy = acc_t(0);
        bool row_hit = false;
        if (sy < ny) {
          const AxisTap<acc_t> t = axis_tap(sample_coord(roi.start_y, roi.bin_h, sy / gh, sy % gh, gh), height);
          row_hit = t.valid && (t.lo == row || t.hi == row);
          wy = (t.lo == row ? t.w_lo : acc_t(0)) + (t.hi == row ? t.w_hi : acc_t(0));
        }
        for (unsigned rows = __ballot_sync(0xffffffffu, row_hit); rows != 0; rows &= rows - 1) {
          const int j = __ffs(rows) - 1;
          const acc_t weight_y = __shfl_sync(0xffffffffu, wy, j);
          const int ph = (sy0 + j) / gh, iy = (sy0 + j) % gh;
          for (int sx0 = 0; sx0 < nx; sx0 += 32) {
            // Lane j looks at sample column sx0 + j: its taps inside the tile.
            const int sx = sx0 + lane;
            AxisTap<acc_t> t{0, 0, acc_t(0), acc_t(0), false};
            if (sx < nx) {
              t = axis_tap(sample_coord(roi.start_x, roi.bin_w, sx / gw, sx % gw, gw), width);
            }
            const bool lo_in = t.valid && t.lo >= x0 && t.lo < x0 + TW;
            const bool hi_in = t.valid && t.hi >= x0 && t.hi < x0 + TW;
            for (unsigned cols = __ballot_sync(0xffffffffu, lo_in || hi_in); cols != 0; cols &= cols - 1) {
              const int m = __ffs(cols) - 1;
              const int x_lo = __shfl_sync(0xffffffffu, t.lo, m) - static_cast<int>(x0);
              const int x_hi = __shfl_sync(0xffffffffu, t.hi, m) - static_cast<int>(x0);
              const acc_t w_lo = __shfl_sync(0xffffffffu, t.w_lo, m);
              const acc_t w_hi = __shfl_sync(0xffffffffu, t.w_hi, m);
              const int pw = (sx0 + m) / gw, ix = (sx0 + m) % gw;
              add_hit<acc_t, kMax>(grad_t, argmax_t, roi_grads + (ph * p.pooled_width + pw) * channels, iy * gw + ix,
                                   inv_count, x_lo, x_hi, weight_y * w_lo, weight_y * w_hi, c, channels, my_row);
            }
          }
        }
      }
    }
    __syncthreads(); // `listed` is rewritten by the next round
  }

  __syncthreads();
  write_tile(acc, select_entry(table.data, tile.level), tile, c0, channels);
}

} // namespace

// The gather kernel writes every gradient value once.
void gather_backward(const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
                     std::vector<at::Tensor>& grads, const RoIAlignParams& params, cudaStream_t stream) {
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad_output.scalar_type(), "mmops::roi_align backward (CUDA)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        constexpr int TW = kGatherWidth;
        const int64_t num_rois = rois.size(0), batch = grads.front().size(0), channels = grads.front().size(1);
        const int64_t bins = params.pooled_height * params.pooled_width;
        const bool max_mode = params.pool_mode == PoolMode::Max;
        TORCH_CHECK(num_rois <= std::numeric_limits<int32_t>::max(),
                    "mmops::roi_align backward: at most 2^31 - 1 rois, got ", num_rois);
        // Channels innermost, so that a warp's lanes read 32 channels of one bin at once.
        at::Tensor grad_t =
            at::empty({num_rois, bins, channels}, grad_output.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
        layout::transpose(grad_output.const_data_ptr<scalar_t>(), grad_t.mutable_data_ptr<acc_t>(), num_rois, channels,
                          bins, stream);
        at::Tensor argmax_t;
        if (max_mode) {
          argmax_t = at::empty({num_rois, bins, channels}, argmax.options());
          layout::transpose(argmax.const_data_ptr<int32_t>(), argmax_t.mutable_data_ptr<int32_t>(), num_rois, channels,
                            bins, stream);
        }
        GatherTable<scalar_t> table{};
        int64_t tiles = 0;
        for (size_t l = 0; l < grads.size(); ++l) {
          const int64_t height = grads[l].size(2), width = grads[l].size(3);
          table.data[l] = grads[l].mutable_data_ptr<scalar_t>();
          table.height[l] = height;
          table.width[l] = width;
          table.tiles_x[l] = (width + TW - 1) / TW;
          table.tiles_per_image[l] = (height + kGatherRows - 1) / kGatherRows * table.tiles_x[l];
          table.first_tile[l] = tiles;
          tiles += batch * table.tiles_per_image[l];
        }
        if (tiles == 0) {
          return; // every map is empty
        }
        const dim3 grid(tiles, (channels + gather_channels<acc_t>() - 1) / gather_channels<acc_t>());
        TORCH_CHECK(grid.y <= 65535, "mmops::roi_align backward: too many channels (", channels, ")");
        constexpr size_t smem = gather_smem_bytes<acc_t>();
        auto launch = [&](auto max_tag) {
          constexpr bool kMax = decltype(max_tag)::value;
          // More than the default 48 KB of dynamic shared memory must be asked for.
          C10_CUDA_CHECK(cudaFuncSetAttribute(gather_backward_kernel<scalar_t, kMax>,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
          gather_backward_kernel<scalar_t, kMax><<<grid, kThreads, smem, stream>>>(
              grad_t.const_data_ptr<acc_t>(), kMax ? argmax_t.const_data_ptr<int32_t>() : nullptr,
              rois.const_data_ptr<scalar_t>(), num_rois, table, batch, channels, params);
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        };
        if (max_mode) {
          launch(std::true_type{});
        } else {
          launch(std::false_type{});
        }
      });
}

} // namespace roi_align_cuda
} // namespace kernels
} // namespace mmops

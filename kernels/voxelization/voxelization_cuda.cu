// CUDA kernels of dynamic_voxelize, hard_voxelize and dynamic_scatter.
//
// dynamic_voxelize: one thread per point.
// hard_voxelize, deterministic without atomics (mmcv's deterministic mode
// compares every point with all earlier ones, O(N^2)):
//   1. key of every point (voxel_key; the grid's voxel count when out of range);
//   2. a stable radix sort of the keys over the bits the grid needs: the points
//      of a voxel are one run of sorted positions, in input order; a run's
//      first position holds the voxel's first point;
//   3. heads: flag the first position of every run, and the first point of
//      every run in input order; a cumsum of the run flags numbers the runs and
//      the head of run r records its position in run_start[r];
//   4. an inclusive cumsum of the first-point flags in input order numbers the
//      voxels by their first point: mmcv's order. M = min(voxels, max_voxels)
//      is read on the host (the only sync: the output size);
//   5. one thread per sorted position copies its point to (voxel, place in
//      run) when both are kept; a run's first thread writes the coordinates,
//      the thread of its last kept place the count.
// dynamic_scatter, one host sync (the voxel count) and no ATen op but the
// allocations (scratch and outputs), 1 + cub's launches before the sync, one after:
//   1. one kernel packs every row of coors into one key (column j in a width
//      of bits, the first column highest: keys order rows lexicographically;
//      a dropped row, one with a negative value, above every kept key),
//      writes the positions 0..N-1 and measures the column maxima (block
//      maxima, then integer atomicMax: order-free);
//   2. cub's stable radix sort of (key, position) pairs over the layout's bits
//      on one scratch allocation: the points of a voxel are one run of sorted
//      positions, in ascending point index;
//   3. cub's inclusive scan of the run heads (flags computed on the fly from
//      the sorted keys) numbers the voxels; its output iterator writes
//      point2voxel, the voxels' starts and the voxel count directly. One copy
//      brings back [voxel count, overflow flag, maxima] (the sync);
//   4. one kernel, a thread per (voxel, channel): the channel's reduction over
//      the voxel's points in index order (sum and mean add in that order, max
//      keeps the first maximum: CUDA == CPU bit for bit), and the voxel's
//      count and coordinates.
//   The column widths are those of earlier calls (per device and column
//   count), so no sync waits for the maxima: the key kernel flags a row wider
//   than the guess and the call redoes 1-3 with the measured widths (the first
//   call, or a larger range: one more sync). The widths change the keys only,
//   never the result. Rows that need more than 64 key bits, or more than 8
//   columns, take group_by_coordinates (ATen sorts) and the kernel of 4.
//   Backward: one thread per (point, channel), a gather.

#include "voxelization/voxelization_kernels.h"

#include "common/radix_sort.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/tabulate_output_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

namespace mmops {
namespace kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t(1) << 20; // grid-stride loops beyond

int64_t blocks_for(int64_t n) {
  return std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks);
}

#define MMOPS_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

// zyx (coors != nullptr) and/or the key (key != nullptr) of every point.
template <typename scalar_t>
__global__ void voxelize_kernel(const scalar_t* __restrict__ points, int64_t n, int64_t ndim, VoxelGrid grid,
                                int64_t out_of_range, int32_t* __restrict__ coors, int64_t* __restrict__ key) {
  using acc_t = at::opmath_type<scalar_t>;
  MMOPS_GRID_STRIDE(i, n) {
    int32_t zyx[3] = {-1, -1, -1};
    const bool in_range = voxelization::point_voxel<acc_t>(points + i * ndim, grid, zyx);
    if (coors != nullptr) {
      coors[3 * i] = zyx[0];
      coors[3 * i + 1] = zyx[1];
      coors[3 * i + 2] = zyx[2];
    }
    if (key != nullptr) {
      key[i] = in_range ? voxelization::voxel_key(zyx, grid) : out_of_range;
    }
  }
}

// Step 3: is_head[i] = 1 at the first position of every run of kept keys
// (keys below `dropped`), first[point] = 1 for the run's first point.
__global__ void run_heads_kernel(const int64_t* __restrict__ key, const int64_t* __restrict__ perm, int64_t n,
                                 int64_t dropped, int32_t* __restrict__ is_head, int32_t* __restrict__ first) {
  MMOPS_GRID_STRIDE(i, n) {
    const bool head = key[i] < dropped && (i == 0 || key[i] != key[i - 1]);
    is_head[i] = head ? 1 : 0;
    if (first != nullptr && head) {
      first[perm[i]] = 1;
    }
  }
}

// run_start[r] = the position of run r's head (run_id: inclusive cumsum of is_head).
__global__ void run_starts_kernel(const int32_t* __restrict__ is_head, const int64_t* __restrict__ run_id, int64_t n,
                                  int64_t* __restrict__ run_start) {
  MMOPS_GRID_STRIDE(i, n) {
    if (is_head[i] != 0) {
      run_start[run_id[i] - 1] = i;
    }
  }
}

// Step 5.
template <typename scalar_t>
__global__ void fill_voxels_kernel(const scalar_t* __restrict__ points, const int64_t* __restrict__ key,
                                   const int64_t* __restrict__ perm, const int64_t* __restrict__ run_id,
                                   const int64_t* __restrict__ run_start, const int64_t* __restrict__ voxel_rank,
                                   int64_t n, int64_t ndim, VoxelGrid grid, int64_t dropped, int64_t max_points,
                                   int64_t voxels, scalar_t* __restrict__ out, int32_t* __restrict__ coors,
                                   int32_t* __restrict__ count) {
  MMOPS_GRID_STRIDE(i, n) {
    if (key[i] >= dropped) {
      continue;
    }
    const int64_t start = run_start[run_id[i] - 1];
    const int64_t place = i - start;
    const int64_t v = voxel_rank[perm[start]] - 1;
    if (v >= voxels || place >= max_points) {
      continue;
    }
    const scalar_t* src = points + perm[i] * ndim;
    scalar_t* dst = out + (v * max_points + place) * ndim;
    for (int64_t k = 0; k < ndim; ++k) {
      dst[k] = src[k];
    }
    if (place == 0) {
      voxelization::voxel_of_key(key[i], grid, coors + 3 * v);
    }
    if (place == max_points - 1 || i + 1 == n || key[i + 1] != key[i]) {
      count[v] = static_cast<int32_t>(place + 1);
    }
  }
}

// ----------------------------------------------------------------------------
// dynamic_scatter

// The row key: the columns of a row side by side (column j in bits [shift[j],
// shift[j] + width[j]), the first column highest), so keys order rows
// lexicographically. Keys below 2^total are kept rows; a row with a negative
// value gets `dropped` = 2^total, a kept row with a value wider than its
// column's width gets dropped + 1 (the layout was a guess that did not fit:
// the caller redoes the grouping). Sorting needs total + 1 bits.
constexpr int kMaxKeyColumns = 8;
constexpr int kMaxLayoutBits = 63; // total + 1 sort bits <= 64: uint64 keys
using KeyWidths = std::array<int, kMaxKeyColumns>;

struct RowKeyLayout {
  int columns;
  int total;
  int width[kMaxKeyColumns]; // 0 for j >= columns
  int shift[kMaxKeyColumns];
};

// status[1] = 1 when a kept row did not fit the layout; status[2 + j] = the
// largest value of column j over the kept rows (atomicMax of non-negative
// values: the result does not depend on the order). status was zeroed.
template <typename Key>
__global__ void scatter_keys_kernel(const int32_t* __restrict__ coors, int64_t n, RowKeyLayout layout,
                                    Key* __restrict__ keys, int32_t* __restrict__ positions,
                                    int32_t* __restrict__ status) {
  __shared__ int32_t block_top[kMaxKeyColumns];
  if (threadIdx.x < kMaxKeyColumns) {
    block_top[threadIdx.x] = 0;
  }
  __syncthreads();
  int32_t top[kMaxKeyColumns];
#pragma unroll
  for (int j = 0; j < kMaxKeyColumns; ++j) {
    top[j] = 0;
  }
  bool overflow = false;
  const Key dropped = Key(1) << layout.total;
  MMOPS_GRID_STRIDE(i, n) {
    const int32_t* row = coors + i * layout.columns;
    int32_t value[kMaxKeyColumns];
    bool kept = true;
#pragma unroll
    for (int j = 0; j < kMaxKeyColumns; ++j) {
      value[j] = j < layout.columns ? row[j] : 0;
      kept = kept && value[j] >= 0;
    }
    Key key = dropped;
    if (kept) {
      bool fits = true;
      Key packed = 0;
#pragma unroll
      for (int j = 0; j < kMaxKeyColumns; ++j) {
        const auto v = static_cast<uint32_t>(value[j]); // < 2^31; widths <= 31, shifts < the key's bits
        fits = fits && (v >> layout.width[j]) == 0;
        packed |= static_cast<Key>(v) << layout.shift[j];
        top[j] = max(top[j], value[j]);
      }
      key = fits ? packed : dropped + 1;
      overflow = overflow || !fits;
    }
    keys[i] = key;
    positions[i] = static_cast<int32_t>(i);
  }
  // Every thread gets here (blockDim is a multiple of 32): warp, then block maxima.
#pragma unroll
  for (int j = 0; j < kMaxKeyColumns; ++j) {
    int32_t m = top[j];
    for (int offset = 16; offset > 0; offset /= 2) {
      m = max(m, __shfl_xor_sync(0xffffffffu, m, offset));
    }
    if ((threadIdx.x & 31) == 0 && m > 0) {
      atomicMax(&block_top[j], m);
    }
  }
  const int any_overflow = __syncthreads_or(overflow ? 1 : 0);
  if (threadIdx.x < layout.columns && block_top[threadIdx.x] > 0) {
    atomicMax(&status[2 + threadIdx.x], block_top[threadIdx.x]);
  }
  if (threadIdx.x == 0 && any_overflow != 0) {
    status[1] = 1;
  }
}

// 1 at the first sorted position of every kept key, else 0: the input of the
// scan that numbers the voxels (a thrust iterator: no kernel of its own).
template <typename Key>
struct VoxelHeadFlag {
  const Key* keys;
  Key dropped;
  __host__ __device__ int32_t operator()(int32_t i) const {
    const Key key = keys[i];
    return key < dropped && (i == 0 || keys[i - 1] != key) ? 1 : 0;
  }
};

template <typename Key>
using VoxelHeadIterator = thrust::transform_iterator<VoxelHeadFlag<Key>, thrust::counting_iterator<int32_t>>;

// The scan's output (a thrust tabulate iterator: called once per sorted
// position i with id = the voxels that start at or before i): the voxel of the
// point there, the voxel's start at its first position, the end of the last
// voxel at the last kept position, and the voxel count at position n - 1.
template <typename Key>
struct RecordVoxel {
  const Key* keys;
  const int32_t* perm;
  Key dropped;
  int64_t n;
  int32_t* point2voxel;
  int32_t* starts; // [voxels + 1]
  int32_t* voxels;
  __host__ __device__ void operator()(ptrdiff_t i, int32_t id) const {
    const Key key = keys[i];
    const bool kept = key < dropped;
    point2voxel[perm[i]] = kept ? id - 1 : -1;
    if (kept && (i == 0 || keys[i - 1] != key)) {
      starts[id - 1] = static_cast<int32_t>(i);
    }
    if (kept && (i + 1 == n || keys[i + 1] >= dropped)) {
      starts[id] = static_cast<int32_t>(i + 1);
    }
    if (i + 1 == n) {
      *voxels = id;
    }
  }
};

// One thread per (voxel, channel): channel c of voxel v reduced over its
// points order[starts[v], starts[v + 1]) (ascending point index), and with
// c == 0 the voxel's count and coordinates when counts != nullptr.
template <typename scalar_t, typename index_t>
__global__ void scatter_forward_kernel(const scalar_t* __restrict__ feats, int64_t channels,
                                       const index_t* __restrict__ order, const index_t* __restrict__ starts,
                                       int64_t voxels, ScatterReduce reduce, const int32_t* __restrict__ coors,
                                       int64_t columns, scalar_t* __restrict__ out, int32_t* __restrict__ argmax,
                                       int32_t* __restrict__ voxel_coors, int32_t* __restrict__ counts) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t lanes = channels > 0 ? channels : 1;
  MMOPS_GRID_STRIDE(t, voxels * lanes) {
    const int64_t v = t / lanes;
    const int64_t c = t - v * lanes;
    const int64_t begin = starts[v];
    const int64_t end = starts[v + 1];
    if (c == 0 && counts != nullptr) {
      counts[v] = static_cast<int32_t>(end - begin);
      const int64_t p = order[begin];
      for (int64_t j = 0; j < columns; ++j) {
        voxel_coors[v * columns + j] = coors[p * columns + j];
      }
    }
    if (c < channels) {
      const int64_t at = v * channels + c;
      voxelization::reduce_voxel_channel<scalar_t, acc_t>(feats, channels, order, begin, end, c, reduce, out + at,
                                                          argmax != nullptr ? argmax + at : nullptr);
    }
  }
}

// Backward: one thread per (point, channel).
template <typename scalar_t>
__global__ void scatter_backward_kernel(const scalar_t* __restrict__ grad, const int32_t* __restrict__ point2voxel,
                                        const int32_t* __restrict__ count, const int32_t* __restrict__ argmax,
                                        int64_t points, int64_t voxels, int64_t channels, ScatterReduce reduce,
                                        scalar_t* __restrict__ out) {
  using acc_t = at::opmath_type<scalar_t>;
  MMOPS_GRID_STRIDE(i, points * channels) {
    const int64_t p = i / channels;
    out[i] = voxelization::point_grad<scalar_t, acc_t>(grad, count, argmax, voxels, channels, p, point2voxel[p],
                                                       i - p * channels, reduce);
  }
}

} // namespace

at::Tensor dynamic_voxelize_cuda(const at::Tensor& points_in, const VoxelGrid& grid) {
  const c10::cuda::CUDAGuard guard(points_in.device());
  const at::Tensor points = points_in.contiguous();
  const int64_t n = points.size(0);
  at::Tensor coors = at::empty({n, 3}, points.options().dtype(at::kInt));
  if (n == 0) {
    return coors;
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, points.scalar_type(), "mmops::dynamic_voxelize", [&] {
    voxelize_kernel<scalar_t><<<blocks_for(n), kThreads, 0, stream>>>(
        points.const_data_ptr<scalar_t>(), n, points.size(1), grid, 0, coors.mutable_data_ptr<int32_t>(), nullptr);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return coors;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> hard_voxelize_cuda(const at::Tensor& points_in,
                                                                  const HardVoxelizeParams& params) {
  const c10::cuda::CUDAGuard guard(points_in.device());
  const at::Tensor points = points_in.contiguous();
  const int64_t n = points.size(0);
  const int64_t ndim = points.size(1);
  const auto int_options = points.options().dtype(at::kInt);
  if (n == 0) {
    return {at::zeros({0, params.max_points, ndim}, points.options()), at::empty({0, 3}, int_options),
            at::empty({0}, int_options)};
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const VoxelGrid& grid = params.grid;
  // keys in [0, volume]; volume marks a point out of range (the product is checked to fit)
  const int64_t volume = int64_t(grid.cells[0]) * grid.cells[1] * grid.cells[2];
  at::Tensor key = at::empty({n}, points.options().dtype(at::kLong));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, points.scalar_type(), "mmops::hard_voxelize keys", [&] {
    voxelize_kernel<scalar_t><<<blocks_for(n), kThreads, 0, stream>>>(points.const_data_ptr<scalar_t>(), n, ndim, grid,
                                                                      volume, nullptr, key.mutable_data_ptr<int64_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  const auto [sorted_key, perm] = stable_sort_small_keys(key, key_bits(static_cast<uint64_t>(volume)));
  at::Tensor first = at::zeros({n}, int_options);
  at::Tensor is_head = at::empty({n}, int_options);
  run_heads_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      sorted_key.const_data_ptr<int64_t>(), perm.const_data_ptr<int64_t>(), n, volume,
      is_head.mutable_data_ptr<int32_t>(), first.mutable_data_ptr<int32_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const at::Tensor run_id = at::cumsum(is_head, 0, at::kLong);
  at::Tensor run_start = at::empty({n}, key.options());
  run_starts_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      is_head.const_data_ptr<int32_t>(), run_id.const_data_ptr<int64_t>(), n, run_start.mutable_data_ptr<int64_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const at::Tensor voxel_rank = at::cumsum(first, 0, at::kLong);
  const int64_t m = std::min(voxel_rank[n - 1].item<int64_t>(), params.max_voxels); // sync: the output size

  at::Tensor voxels = at::zeros({m, params.max_points, ndim}, points.options());
  at::Tensor coors = at::empty({m, 3}, int_options);
  at::Tensor count = at::empty({m}, int_options);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, points.scalar_type(), "mmops::hard_voxelize fill", [&] {
    fill_voxels_kernel<scalar_t><<<blocks_for(n), kThreads, 0, stream>>>(
        points.const_data_ptr<scalar_t>(), sorted_key.const_data_ptr<int64_t>(), perm.const_data_ptr<int64_t>(),
        run_id.const_data_ptr<int64_t>(), run_start.const_data_ptr<int64_t>(), voxel_rank.const_data_ptr<int64_t>(), n,
        ndim, grid, volume, params.max_points, m, voxels.mutable_data_ptr<scalar_t>(),
        coors.mutable_data_ptr<int32_t>(), count.mutable_data_ptr<int32_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {voxels, coors, count};
}

namespace {

// ----------------------------------------------------------------------------
// dynamic_scatter's grouping on the GPU

// The widths of the columns' largest values (0 for a column of zeros).
KeyWidths widths_of(const int32_t* maxima, int columns) {
  KeyWidths w{};
  for (int j = 0; j < columns; ++j) {
    w[j] = maxima[j] > 0 ? key_bits(static_cast<uint64_t>(maxima[j])) : 0;
  }
  return w;
}

int total_of(const KeyWidths& w) {
  int total = 0;
  for (int b : w) {
    total += b;
  }
  return total;
}

RowKeyLayout make_layout(int columns, const KeyWidths& widths) {
  RowKeyLayout layout{};
  layout.columns = columns;
  for (int j = columns - 1; j >= 0; --j) {
    layout.width[j] = widths[j];
    layout.shift[j] = layout.total;
    layout.total += widths[j];
  }
  return layout;
}

// The 8-bit digits of a layout's sort keys (about the radix sort's passes).
int key_digits(const KeyWidths& w) {
  return (total_of(w) + 1 + 7) / 8;
}

// The widths that the last calls needed, per (device, columns): the guess that
// spares a host sync for the column maxima. The key kernel checks every row
// against the guess and measures the maxima; when a row does not fit, the call
// redoes the grouping with the measured widths (one more sync). The cache
// keeps max(cached, needed) per column while that needs no more sort digits
// than `needed` alone (inputs that straddle a power of two do not redo every
// other call), else `needed` (one outlier does not widen every later sort).
// The layout changes only the intermediate keys, never the result.
class KeyWidthCache {
 public:
  std::optional<KeyWidths> get(int device, int columns) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = widths_.find({device, columns});
    return it == widths_.end() ? std::nullopt : std::optional<KeyWidths>(it->second);
  }

  // Records what a call needed (total_of(needed) <= kMaxLayoutBits); returns the new entry.
  KeyWidths update(int device, int columns, const KeyWidths& needed) {
    const std::lock_guard<std::mutex> lock(mutex_);
    KeyWidths& cached = widths_[{device, columns}];
    KeyWidths merged{};
    for (int j = 0; j < columns; ++j) {
      merged[j] = std::max(cached[j], needed[j]);
    }
    cached = key_digits(merged) <= key_digits(needed) ? merged : needed;
    return cached;
  }

 private:
  std::mutex mutex_;
  std::map<std::pair<int, int>, KeyWidths> widths_;
};

KeyWidthCache& key_width_cache() {
  static auto* cache = new KeyWidthCache(); // never destroyed: safe from other static destructors
  return *cache;
}

size_t aligned(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// What the grouping leaves for the reduction (in scratch): the points by voxel
// and the voxels' starts; point2voxel is written.
struct RowGroups {
  at::Tensor scratch;
  const int32_t* perm = nullptr;   // [n]: the kept points by voxel, then the dropped ones
  const int32_t* starts = nullptr; // [voxels + 1]
  int64_t voxels = 0;
  bool overflow = false;
  int32_t maxima[kMaxKeyColumns] = {};
};

// The key kernel (keys, positions, column maxima, overflow flag), the stable
// radix sort of (key, position) over total + 1 bits, the scan of the head
// flags writing point2voxel and the starts, then the one host sync: [voxel
// count, overflow, maxima] in one copy.
template <typename Key>
RowGroups group_rows(const at::Tensor& coors, const RowKeyLayout& layout, int32_t* point2voxel, cudaStream_t stream) {
  const int64_t n = coors.size(0);
  const int bits = layout.total + 1;
  const Key dropped = Key(1) << layout.total;
  const VoxelHeadFlag<Key> no_heads{nullptr, dropped};
  const RecordVoxel<Key> no_record{nullptr, nullptr, dropped, n, nullptr, nullptr, nullptr};
  size_t sort_bytes = 0;
  size_t scan_bytes = 0;
  Key* const no_keys[2] = {nullptr, nullptr};
  int32_t* const no_values[2] = {nullptr, nullptr};
  stable_sort_pairs_in_place(nullptr, sort_bytes, no_keys, no_values, n, bits, stream);
  C10_CUDA_CHECK(cub::DeviceScan::InclusiveSum(
      nullptr, scan_bytes, VoxelHeadIterator<Key>(thrust::counting_iterator<int32_t>(0), no_heads),
      thrust::make_tabulate_output_iterator(no_record), static_cast<int>(n), stream));
  // one allocation: keys x 2, positions x 2, starts (n + 1), status, cub's temp
  const size_t key_bytes = aligned(n * sizeof(Key));
  const size_t value_bytes = aligned(n * sizeof(int32_t));
  const size_t starts_bytes = aligned((n + 1) * sizeof(int32_t));
  const size_t status_bytes = aligned((2 + kMaxKeyColumns) * sizeof(int32_t));
  const size_t temp_bytes = aligned(std::max(sort_bytes, scan_bytes));
  RowGroups g;
  g.scratch =
      at::empty({static_cast<int64_t>(2 * key_bytes + 2 * value_bytes + starts_bytes + status_bytes + temp_bytes)},
                coors.options().dtype(at::kByte));
  char* base = static_cast<char*>(g.scratch.mutable_data_ptr());
  Key* const keys[2] = {reinterpret_cast<Key*>(base), reinterpret_cast<Key*>(base + key_bytes)};
  base += 2 * key_bytes;
  int32_t* const values[2] = {reinterpret_cast<int32_t*>(base), reinterpret_cast<int32_t*>(base + value_bytes)};
  base += 2 * value_bytes;
  int32_t* const starts = reinterpret_cast<int32_t*>(base);
  base += starts_bytes;
  int32_t* const status = reinterpret_cast<int32_t*>(base); // [voxels, overflow, maxima...]
  void* const temp = base + status_bytes;

  C10_CUDA_CHECK(cudaMemsetAsync(status, 0, (2 + layout.columns) * sizeof(int32_t), stream));
  scatter_keys_kernel<Key>
      <<<blocks_for(n), kThreads, 0, stream>>>(coors.const_data_ptr<int32_t>(), n, layout, keys[0], values[0], status);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const int r = stable_sort_pairs_in_place(temp, sort_bytes, keys, values, n, bits, stream);
  const VoxelHeadFlag<Key> heads{keys[r], dropped};
  const RecordVoxel<Key> record{keys[r], values[r], dropped, n, point2voxel, starts, status};
  C10_CUDA_CHECK(cub::DeviceScan::InclusiveSum(
      temp, scan_bytes, VoxelHeadIterator<Key>(thrust::counting_iterator<int32_t>(0), heads),
      thrust::make_tabulate_output_iterator(record), static_cast<int>(n), stream));
  int32_t host[2 + kMaxKeyColumns] = {};
  // the sync: the output size, and whether the layout held
  c10::cuda::memcpy_and_sync(host, status, (2 + layout.columns) * sizeof(int32_t), cudaMemcpyDeviceToHost, stream);
  g.perm = values[r];
  g.starts = starts;
  g.voxels = host[0];
  g.overflow = host[1] != 0;
  std::copy(host + 2, host + 2 + layout.columns, g.maxima);
  return g;
}

// The rows of coors [n >= 1, columns <= kMaxKeyColumns] int32 grouped on the
// GPU (point2voxel [n] written), or nullopt when they need more than
// kMaxLayoutBits + 1 key bits.
std::optional<RowGroups> group_rows_cuda(const at::Tensor& coors, int32_t* point2voxel, cudaStream_t stream) {
  const int device = static_cast<int>(coors.get_device());
  const int columns = static_cast<int>(coors.size(1));
  KeyWidths widths = key_width_cache().get(device, columns).value_or(KeyWidths{});
  for (int attempt = 0;; ++attempt) {
    const RowKeyLayout layout = make_layout(columns, widths);
    RowGroups g = layout.total + 1 <= 32 ? group_rows<uint32_t>(coors, layout, point2voxel, stream)
                                         : group_rows<uint64_t>(coors, layout, point2voxel, stream);
    const KeyWidths needed = widths_of(g.maxima, columns);
    if (total_of(needed) > kMaxLayoutBits) {
      return std::nullopt;
    }
    widths = key_width_cache().update(device, columns, needed);
    if (!g.overflow) {
      return g;
    }
    // the guess was too narrow; the measured widths fit every row
    TORCH_INTERNAL_ASSERT(attempt == 0, "mmops::dynamic_scatter: the measured key widths did not fit the rows");
  }
}

// The reduction of the voxels: order [kept points] by voxel, starts [m + 1];
// counts and voxel_coors filled too when `with_rows`.
template <typename index_t>
void launch_scatter_forward(const at::Tensor& feats, const at::Tensor& coors, const index_t* order,
                            const index_t* starts, ScatterReduce reduce, bool with_rows, ScatterResult& r,
                            cudaStream_t stream) {
  const int64_t m = r.voxel_feats.size(0);
  const int64_t channels = feats.size(1);
  const int64_t threads = m * std::max<int64_t>(channels, 1);
  if (threads == 0 || (!with_rows && channels == 0)) {
    return;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, feats.scalar_type(), "mmops::dynamic_scatter", [&] {
    scatter_forward_kernel<scalar_t, index_t><<<blocks_for(threads), kThreads, 0, stream>>>(
        feats.const_data_ptr<scalar_t>(), channels, order, starts, m, reduce, coors.const_data_ptr<int32_t>(),
        coors.size(1), r.voxel_feats.mutable_data_ptr<scalar_t>(),
        reduce == ScatterReduce::Max ? r.argmax.mutable_data_ptr<int32_t>() : nullptr,
        with_rows ? r.voxel_coors.mutable_data_ptr<int32_t>() : nullptr,
        with_rows ? r.voxel_points_count.mutable_data_ptr<int32_t>() : nullptr);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

// group_by_coordinates (ATen sorts) and the reduction: rows too wide for one key.
ScatterResult scatter_by_groups_cuda(const at::Tensor& feats, const at::Tensor& coors, ScatterReduce reduce,
                                     cudaStream_t stream) {
  const VoxelGroups groups = group_by_coordinates(coors);
  ScatterResult r = plan_scatter(feats, reduce, groups);
  launch_scatter_forward<int64_t>(feats, coors, groups.order.const_data_ptr<int64_t>(),
                                  groups.starts.const_data_ptr<int64_t>(), reduce, /*with_rows=*/false, r, stream);
  return r;
}

} // namespace

ScatterResult dynamic_scatter_forward_cuda(const at::Tensor& feats_in, const at::Tensor& coors_in,
                                           ScatterReduce reduce) {
  const c10::cuda::CUDAGuard guard(feats_in.device());
  const at::Tensor feats = feats_in.contiguous();
  const at::Tensor coors = coors_in.contiguous();
  const int64_t n = coors.size(0);
  const int64_t columns = coors.size(1);
  const int64_t channels = feats.size(1);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (n == 0 || columns > kMaxKeyColumns) {
    return scatter_by_groups_cuda(feats, coors, reduce, stream);
  }
  const auto int_options = coors.options();
  at::Tensor point2voxel = at::empty({n}, int_options);
  const std::optional<RowGroups> groups = group_rows_cuda(coors, point2voxel.mutable_data_ptr<int32_t>(), stream);
  if (!groups) {
    return scatter_by_groups_cuda(feats, coors, reduce, stream);
  }
  const int64_t m = groups->voxels;
  ScatterResult r{at::empty({m, channels}, feats.options()), at::empty({m, columns}, int_options), point2voxel,
                  at::empty({m}, int_options),
                  at::empty({reduce == ScatterReduce::Max ? m : 0, channels}, int_options)};
  launch_scatter_forward<int32_t>(feats, coors, groups->perm, groups->starts, reduce, /*with_rows=*/true, r, stream);
  return r;
}

at::Tensor dynamic_scatter_backward_cuda(const at::Tensor& grad_in, const at::Tensor& point2voxel_in,
                                         const at::Tensor& count_in, const at::Tensor& argmax_in,
                                         ScatterReduce reduce) {
  const c10::cuda::CUDAGuard guard(grad_in.device());
  const at::Tensor grad = grad_in.contiguous();
  const at::Tensor point2voxel = point2voxel_in.contiguous();
  const at::Tensor count = count_in.contiguous();
  const at::Tensor argmax = argmax_in.contiguous();
  const int64_t n = point2voxel.size(0);
  const int64_t channels = grad.size(1);
  at::Tensor grad_feats = at::empty({n, channels}, grad.options());
  if (n * channels == 0) {
    return grad_feats;
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad.scalar_type(), "mmops::dynamic_scatter backward", [&] {
    scatter_backward_kernel<scalar_t><<<blocks_for(n * channels), kThreads, 0, stream>>>(
        grad.const_data_ptr<scalar_t>(), point2voxel.const_data_ptr<int32_t>(), count.const_data_ptr<int32_t>(),
        argmax.const_data_ptr<int32_t>(), n, grad.size(0), channels, reduce, grad_feats.mutable_data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return grad_feats;
}

} // namespace kernels
} // namespace mmops

// CUDA kernels of nms, batched_nms and nms_match (soft_nms: soft_nms_cuda.cu).
//
// nms / batched_nms, everything on the device, one host synchronisation at the
// end (the kept count, inside masked_select):
//   1. order: a stable radix sort of an order-preserving int64 key of the score
//      (decreasing, NaN last, ties to the lower index); batched_nms then sorts
//      that order stably by category, so every category is one contiguous run
//      of positions, by decreasing score inside.
//   2. the boxes are gathered in that order (compute type: float, or double).
//   3. suppression mask in 64x64 tiles: the word mask[r][j] has bit c set when
//      position r suppresses position 64*j + c (IoU > threshold, c after r,
//      same category). Only the upper triangle is computed; batched_nms stops a
//      row of tiles at the first tile whose category is past the row tile's
//      last category, so cross-category tiles are never computed. The mask is
//      sparse (random boxes: 1.7 suppressing pairs per box at 20k, 8.8 at
//      100k), so only nonzero words are written, with, per tile, a 64-bit
//      "rows with a word" mask and, per row tile, a bitmap of its nonzero tiles
//      and the last one. Rows are processed in chunks (all columns at once) so
//      that the word buffer never exceeds kMaskBudgetBytes, for any N.
//   4. greedy reduction in ONE block: per row tile, one thread resolves the 64
//      rows from the running `removed` bits, visiting only rows that have a
//      diagonal word (prefetched during the previous tile); then each thread
//      takes one nonzero tile of the bitmap and ORs the words of the kept rows
//      into `removed`. No mask ever goes to the host.
//   5. the kept bits are expanded to a bool per position (batched: mapped back
//      to the input index), read in score order, and compacted.
// Memory: N * (16 or 32) bytes of sorted boxes, the word buffer (at most
// kMaskBudgetBytes = 256 MiB, allocated but only sparsely written; 20k boxes:
// 50 MB in one chunk; 100k boxes: five chunks of ~21k rows), 1/64 of that for
// the row masks, ceil(N/64)^2 / 8 bytes of bitmap (300 KB at 100k) and O(N).
//
// nms_match runs steps 1-4 with IoU >= threshold (compared in the compute
// type, as mmcv compares floats): the kept rows are the group leaders. After
// the greedy pass of each chunk, every position a kept row suppresses takes
// the lowest such row as its leader (atomicMin: the first leader in score
// order that reaches it, mmcv's rule). A stable sort of the positions by
// leader then gives the rows. The output has N rows whatever the data: no
// host synchronisation at all.

#include "nms/nms_cuda.cuh"
#include "nms/nms_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/masked_select.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>

namespace mmops {
namespace kernels {
namespace {

using u64 = unsigned long long;

constexpr int kTile = 64;
constexpr int64_t kMaskBudgetBytes = int64_t(256) << 20;

// ---------------------------------------------------------------- ordering

// Order-preserving integer key of a score: larger score, larger key; -0 == +0;
// NaN below everything (so a decreasing sort puts it last).
template <typename scalar_t>
__global__ void score_key_kernel(const scalar_t* __restrict__ scores, int64_t n, int64_t* __restrict__ key) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) {
    return;
  }
  const double s = static_cast<double>(scores[i]) + 0.0; // exact for every float dtype; -0 -> +0
  int64_t k;
  if (s != s) {
    k = INT64_MIN;
  } else {
    const int64_t bits = __double_as_longlong(s);
    k = bits < 0 ? (bits ^ INT64_MAX) : bits;
  }
  key[i] = k;
}

at::Tensor score_order_cuda(const at::Tensor& scores) {
  const int64_t n = scores.size(0);
  const at::Tensor s = scores.contiguous();
  at::Tensor key = at::empty({n}, s.options().dtype(at::kLong));
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, s.scalar_type(), "mmops::nms score key", [&] {
    score_key_kernel<scalar_t>
        <<<blocks_for(n), kThreads, 0, stream>>>(s.const_data_ptr<scalar_t>(), n, key.mutable_data_ptr<int64_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return std::get<1>(at::sort(key, /*stable=*/true, /*dim=*/0, /*descending=*/true));
}

// ---------------------------------------------------------------- mask

// Block = one row tile (64 threads, one row each) and every gridDim.y-th column
// tile from the diagonal on. Rows of the chunk start at row tile `tile_begin`.
// Writes, for tile (i, j): the nonzero row words only (mask), which rows have
// one (rowmask, written for the diagonal tile and every nonzero tile), the
// tile's bit in row tile i's bitmap, and the last nonzero tile of row tile i (last).
template <typename acc_t, bool kBatched>
__global__ void __launch_bounds__(kTile)
    nms_mask_kernel(const Box<acc_t>* __restrict__ boxes, const acc_t* __restrict__ area,
                    const int64_t* __restrict__ category, int64_t n, int64_t ntiles, int64_t tile_begin,
                    double threshold, bool inclusive, bool skip_disjoint, u64* __restrict__ mask,
                    u64* __restrict__ rowmask, u64* __restrict__ nonzero, u64* __restrict__ last,
                    int64_t bitmap_words) {
  __shared__ Box<acc_t> s_box[kTile];
  __shared__ acc_t s_area[kTile];
  __shared__ int64_t s_cat[kTile];
  __shared__ unsigned s_ballot[kTile / 32];

  const int64_t i = tile_begin + blockIdx.x;
  const int t = threadIdx.x;
  const int64_t row = i * kTile + t;
  const bool valid = row < n;
  Box<acc_t> mine{};
  acc_t my_area = acc_t(0);
  int64_t my_cat = 0;
  if (valid) {
    mine = boxes[row];
    my_area = area[row];
    if (kBatched) {
      my_cat = category[row];
    }
  }
  int64_t last_cat = 0;
  if (kBatched) {
    last_cat = category[box_iou::min_of<int64_t>(i * kTile + kTile - 1, n - 1)];
  }
  const int64_t local_tile = i - tile_begin;
  const int64_t local_row = local_tile * kTile + t;

  for (int64_t j = i + blockIdx.y; j < ntiles; j += gridDim.y) {
    const int64_t col0 = j * kTile;
    // Sorted by category: every later tile starts past this row tile's categories.
    if (kBatched && category[col0] > last_cat) {
      break;
    }
    const int cols = static_cast<int>(box_iou::min_of<int64_t>(kTile, n - col0));
    __syncthreads(); // the previous tile's boxes and ballots are no longer read
    if (t < cols) {
      s_box[t] = boxes[col0 + t];
      s_area[t] = area[col0 + t];
      if (kBatched) {
        s_cat[t] = category[col0 + t];
      }
    }
    __syncthreads();
    u64 bits = 0;
    if (valid) {
      const int start = (j == i) ? t + 1 : 0;
      for (int c = start; c < cols; ++c) {
        if (kBatched && s_cat[c] != my_cat) {
          continue;
        }
        // Most pairs do not intersect: their IoU is exactly 0, which exceeds
        // no threshold >= 0 (a NaN intersection means a non-finite box: 0 too).
        if (skip_disjoint && !(box_iou::intersection(mine, s_box[c], acc_t(0)) > acc_t(0))) {
          continue;
        }
        const double v = static_cast<double>(box_iou::iou(mine, s_box[c], my_area, s_area[c]));
        if (inclusive ? v >= threshold : v > threshold) {
          bits |= u64(1) << c;
        }
      }
    }
    const unsigned ballot = __ballot_sync(0xffffffffu, bits != 0);
    if ((t & 31) == 0) {
      s_ballot[t >> 5] = ballot;
    }
    __syncthreads();
    const u64 rows = static_cast<u64>(s_ballot[0]) | (static_cast<u64>(s_ballot[1]) << 32);
    if (bits != 0) {
      mask[local_row * ntiles + j] = bits;
    }
    if (t == 0 && (rows != 0 || j == i)) {
      rowmask[local_tile * ntiles + j] = rows;
      if (j != i) {
        atomicOr(&nonzero[i * bitmap_words + (j >> 6)], u64(1) << (j & 63));
        atomicMax(&last[i], static_cast<u64>(j));
      }
    }
  }
}

// ---------------------------------------------------------------- greedy

// One block. Resolves row tiles [tile_begin, tile_end) in order; `removed`
// (ntiles words, zero at the start of the first chunk) carries the suppression
// of earlier tiles, `kept` receives one word per row tile.
// Per row tile: warp 0 has the diagonal words of the rows that have one
// (prefetched during the previous tile); one thread resolves the tile, visiting
// only those rows (a row without a diagonal word suppresses nothing in the
// tile); then each thread takes one nonzero tile j of the bitmap (dealt
// round-robin by rank) and ORs the words of the kept rows that have one there.
__global__ void __launch_bounds__(kGreedyThreads)
    nms_greedy_kernel(const u64* __restrict__ mask, const u64* __restrict__ rowmask, const u64* __restrict__ nonzero,
                      const u64* __restrict__ last, int64_t bitmap_words, int64_t n, int64_t ntiles, int64_t tile_begin,
                      int64_t tile_end, u64* removed, u64* __restrict__ kept) {
  __shared__ u64 s_diag[kTile];
  __shared__ u64 s_kept;
  const int t = threadIdx.x;
  const int warp = t >> 5;
  const int lane = t & 31;

  // warp 0: rows with a diagonal word (rm) and those words (d0: row lane, d1: row lane + 32)
  u64 rm = 0, d0 = 0, d1 = 0;
  auto load_diagonal = [&](int64_t i) {
    const int64_t local = i - tile_begin;
    rm = rowmask[local * ntiles + i];
    d0 = ((rm >> lane) & 1) ? mask[(local * kTile + lane) * ntiles + i] : 0;
    d1 = ((rm >> (lane + 32)) & 1) ? mask[(local * kTile + lane + 32) * ntiles + i] : 0;
  };
  if (warp == 0) {
    load_diagonal(tile_begin);
  }

  for (int64_t i = tile_begin; i < tile_end; ++i) {
    const int64_t local = i - tile_begin;
    const int64_t rows = box_iou::min_of<int64_t>(kTile, n - i * kTile);
    const u64 valid = rows == kTile ? ~u64(0) : ((u64(1) << rows) - 1);
    if (warp == 0) {
      s_diag[lane] = d0;
      s_diag[lane + 32] = d1;
      __syncwarp();
      if (lane == 0) {
        u64 rem = removed[i];
        u64 active = rm & valid;
        while (active != 0) {
          const int r = __ffsll(static_cast<long long>(active)) - 1;
          active &= active - 1;
          if (!((rem >> r) & 1)) {
            rem |= s_diag[r]; // only later rows of the tile
          }
        }
        const u64 k = valid & ~rem;
        s_kept = k;
        kept[i] = k;
      }
    }
    __syncthreads();
    const u64 k = s_kept;
    if (warp == 0 && i + 1 < tile_end) {
      load_diagonal(i + 1); // consumed after the next barrier
    }
    const u64 top = last[i]; // 0: no nonzero tile after i
    if (k != 0 && top > static_cast<u64>(i)) {
      const u64* bitmap = nonzero + i * bitmap_words;
      int64_t rank = 0;
      const int64_t h_end = static_cast<int64_t>(top >> 5);
      for (int64_t h = (i + 1) >> 5; h <= h_end; ++h) {
        const u64 word = bitmap[h >> 1];
        unsigned half = static_cast<unsigned>((h & 1) ? (word >> 32) : (word & 0xffffffffu));
        const int count = __popc(half);
        const int pick = static_cast<int>((t - rank) & (kGreedyThreads - 1));
        rank += count;
        if (pick >= count) {
          continue;
        }
        for (int q = 0; q < pick; ++q) {
          half &= half - 1; // drop the lowest set bits before ours
        }
        const int64_t j = h * 32 + (__ffs(static_cast<int>(half)) - 1);
        u64 todo = rowmask[local * ntiles + j] & k;
        u64 acc = 0;
        while (todo != 0) {
          const int r = __ffsll(static_cast<long long>(todo)) - 1;
          todo &= todo - 1;
          acc |= mask[(local * kTile + r) * ntiles + j];
        }
        if (acc != 0) {
          removed[j] |= acc; // one thread per tile j: no race
        }
      }
    }
    __syncthreads();
  }
}

// nms_match, after the greedy pass of a chunk: every position that a kept row
// of row tile i = tile_begin + blockIdx.x suppresses (its diagonal word, its
// words in the nonzero tiles of the bitmap) gets the lowest such row in owner.
// The block's threads share the column tiles.
__global__ void match_owner_kernel(const u64* __restrict__ mask, const u64* __restrict__ rowmask,
                                   const u64* __restrict__ nonzero, const u64* __restrict__ last,
                                   const u64* __restrict__ kept, int64_t bitmap_words, int64_t ntiles,
                                   int64_t tile_begin, u64* __restrict__ owner) {
  const int64_t local = blockIdx.x;
  const int64_t i = tile_begin + local;
  const u64 k = kept[i];
  // last[i]: the last nonzero tile after i, 0 when there is none.
  const int64_t j_end = box_iou::max_of<int64_t>(i, static_cast<int64_t>(last[i]));
  for (int64_t j = i + threadIdx.x; k != 0 && j <= j_end; j += blockDim.x) {
    if (j != i && !((nonzero[i * bitmap_words + (j >> 6)] >> (j & 63)) & 1)) {
      continue; // rowmask holds no word for this tile
    }
    u64 todo = rowmask[local * ntiles + j] & k;
    while (todo != 0) {
      const int r = __ffsll(static_cast<long long>(todo)) - 1;
      todo &= todo - 1;
      u64 word = mask[(local * kTile + r) * ntiles + j];
      const u64 leader = static_cast<u64>(i * kTile + r);
      while (word != 0) {
        const int c = __ffsll(static_cast<long long>(word)) - 1;
        word &= word - 1;
        atomicMin(&owner[j * kTile + c], leader);
      }
    }
  }
}

// ---------------------------------------------------------------- outputs

// kept_out[s] for every position s: plain nms (positions are score order).
__global__ void expand_kept_kernel(const u64* __restrict__ kept, int64_t n, bool* __restrict__ out) {
  const int64_t s = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (s < n) {
    out[s] = (kept[s >> 6] >> (s & 63)) & 1;
  }
}

// batched: position s holds input index perm[s].
__global__ void scatter_kept_kernel(const u64* __restrict__ kept, const int64_t* __restrict__ perm, int64_t n,
                                    bool* __restrict__ by_index) {
  const int64_t s = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (s < n) {
    by_index[perm[s]] = (kept[s >> 6] >> (s & 63)) & 1;
  }
}

__global__ void gather_kept_kernel(const bool* __restrict__ by_index, const int64_t* __restrict__ order, int64_t n,
                                   bool* __restrict__ out) {
  const int64_t s = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (s < n) {
    out[s] = by_index[order[s]];
  }
}

// nms_match: a kept position leads its own group.
__global__ void own_leaders_kernel(const u64* __restrict__ kept, int64_t n, u64* __restrict__ owner) {
  const int64_t s = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (s < n && ((kept[s >> 6] >> (s & 63)) & 1)) {
    owner[s] = static_cast<u64>(s);
  }
}

// Steps 3 and 4 on the boxes gathered in position order: kept (one word per
// row tile) receives the kept rows. owner (nms_match; nullptr for nms): n
// words, all ones at the start; every suppressed position receives its leader.
template <typename acc_t>
void suppress_cuda(const Box<acc_t>* sorted_p, const acc_t* area_p, const int64_t* category_p, int64_t n,
                   double threshold, bool inclusive, bool skip_disjoint, u64* kept_p, u64* owner_p,
                   const at::TensorOptions& long_options, cudaStream_t stream) {
  const int64_t ntiles = (n + kTile - 1) / kTile;
  const int64_t bitmap_words = (ntiles + 63) / 64;
  // Rows per chunk: the mask chunk (rows x ntiles words) stays within budget.
  int64_t chunk_tiles = std::max<int64_t>(1, kMaskBudgetBytes / (ntiles * kTile * int64_t(sizeof(u64))));
  chunk_tiles = std::min(chunk_tiles, ntiles);
  at::Tensor mask = at::empty({chunk_tiles * kTile * ntiles}, long_options);
  at::Tensor rowmask = at::empty({chunk_tiles * ntiles}, long_options);
  // One zeroed allocation: bitmap (ntiles x bitmap_words), last (ntiles), removed (ntiles).
  at::Tensor zeroed = at::zeros({ntiles * bitmap_words + 2 * ntiles}, long_options);
  u64* mask_p = reinterpret_cast<u64*>(mask.mutable_data_ptr<int64_t>());
  u64* rowmask_p = reinterpret_cast<u64*>(rowmask.mutable_data_ptr<int64_t>());
  u64* nonzero_p = reinterpret_cast<u64*>(zeroed.mutable_data_ptr<int64_t>());
  u64* last_p = nonzero_p + ntiles * bitmap_words;
  u64* removed_p = last_p + ntiles;
  const bool batched = category_p != nullptr;

  for (int64_t tile_begin = 0; tile_begin < ntiles; tile_begin += chunk_tiles) {
    const int64_t tile_end = std::min(ntiles, tile_begin + chunk_tiles);
    const int64_t row_tiles = tile_end - tile_begin;
    // Enough blocks to fill the GPU; each loops over its share of column tiles.
    const int64_t col_groups =
        std::clamp<int64_t>((8192 + row_tiles - 1) / row_tiles, 1, std::min<int64_t>(ntiles, 65535));
    const dim3 grid(static_cast<unsigned>(row_tiles), static_cast<unsigned>(col_groups));
    if (batched) {
      nms_mask_kernel<acc_t, true><<<grid, kTile, 0, stream>>>(sorted_p, area_p, category_p, n, ntiles, tile_begin,
                                                               threshold, inclusive, skip_disjoint, mask_p, rowmask_p,
                                                               nonzero_p, last_p, bitmap_words);
    } else {
      nms_mask_kernel<acc_t, false><<<grid, kTile, 0, stream>>>(sorted_p, area_p, nullptr, n, ntiles, tile_begin,
                                                                threshold, inclusive, skip_disjoint, mask_p, rowmask_p,
                                                                nonzero_p, last_p, bitmap_words);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    nms_greedy_kernel<<<1, kGreedyThreads, 0, stream>>>(mask_p, rowmask_p, nonzero_p, last_p, bitmap_words, n, ntiles,
                                                        tile_begin, tile_end, removed_p, kept_p);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (owner_p != nullptr) {
      // Before the next chunk overwrites the words.
      match_owner_kernel<<<static_cast<unsigned>(row_tiles), kTile, 0, stream>>>(
          mask_p, rowmask_p, nonzero_p, last_p, kept_p, bitmap_words, ntiles, tile_begin, owner_p);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  }
}

} // namespace

at::Tensor nms_cuda(const at::Tensor& boxes_in, const at::Tensor& scores_in, const at::Tensor& idxs_in,
                    double iou_threshold) {
  const c10::cuda::CUDAGuard guard(boxes_in.device());
  const int64_t n = boxes_in.size(0);
  const auto long_options = boxes_in.options().dtype(at::kLong);
  if (n == 0) {
    return at::empty({0}, long_options);
  }
  const bool batched = idxs_in.defined();
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const at::Tensor boxes = boxes_in.contiguous();
  const at::Tensor order = score_order_cuda(scores_in);
  at::Tensor perm = order;
  at::Tensor idxs;
  if (batched) {
    idxs = idxs_in.to(at::kLong).contiguous();
    const at::Tensor by_category =
        std::get<1>(at::sort(idxs.index_select(0, order), /*stable=*/true, /*dim=*/0, /*descending=*/false));
    perm = order.index_select(0, by_category);
  }

  const int64_t ntiles = (n + kTile - 1) / kTile;
  at::Tensor kept = at::empty({ntiles}, long_options);
  at::Tensor category = at::empty({batched ? n : 0}, long_options);
  u64* kept_p = reinterpret_cast<u64*>(kept.mutable_data_ptr<int64_t>());

  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, boxes.scalar_type(), "mmops::nms (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    at::Tensor sorted = at::empty({n * int64_t(sizeof(Box<acc_t>))}, boxes.options().dtype(at::kByte));
    at::Tensor area = at::empty({n}, boxes.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
    Box<acc_t>* sorted_p = reinterpret_cast<Box<acc_t>*>(sorted.mutable_data_ptr<uint8_t>());
    acc_t* area_p = area.mutable_data_ptr<acc_t>();
    int64_t* category_p = batched ? category.mutable_data_ptr<int64_t>() : nullptr;
    gather_boxes_kernel<scalar_t, acc_t><<<blocks_for(n), kThreads, 0, stream>>>(
        boxes.const_data_ptr<scalar_t>(), perm.const_data_ptr<int64_t>(),
        batched ? idxs.const_data_ptr<int64_t>() : nullptr, n, sorted_p, area_p, category_p);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    suppress_cuda<acc_t>(sorted_p, area_p, category_p, n, iou_threshold, /*inclusive=*/false,
                         /*skip_disjoint=*/iou_threshold >= 0, kept_p, nullptr, long_options, stream);
  });

  at::Tensor kept_in_order = at::empty({n}, boxes.options().dtype(at::kBool));
  if (!batched) {
    expand_kept_kernel<<<blocks_for(n), kThreads, 0, stream>>>(kept_p, n, kept_in_order.mutable_data_ptr<bool>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  } else {
    at::Tensor by_index = at::empty({n}, boxes.options().dtype(at::kBool));
    scatter_kept_kernel<<<blocks_for(n), kThreads, 0, stream>>>(kept_p, perm.const_data_ptr<int64_t>(), n,
                                                                by_index.mutable_data_ptr<bool>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    gather_kept_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
        by_index.const_data_ptr<bool>(), order.const_data_ptr<int64_t>(), n, kept_in_order.mutable_data_ptr<bool>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  // The one synchronisation: the number of kept boxes.
  return at::masked_select(order, kept_in_order);
}

at::Tensor nms_match_cuda(const at::Tensor& dets_in, double iou_threshold) {
  const c10::cuda::CUDAGuard guard(dets_in.device());
  const int64_t n = dets_in.size(0);
  const auto long_options = dets_in.options().dtype(at::kLong);
  if (n == 0) {
    return at::empty({0, 2}, long_options);
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const at::Tensor boxes = dets_in.slice(1, 0, 4).contiguous();
  const at::Tensor order = score_order_cuda(dets_in.select(1, 4));
  const int64_t ntiles = (n + kTile - 1) / kTile;
  at::Tensor kept = at::empty({ntiles}, long_options);
  at::Tensor owner = at::full({n}, -1, long_options); // all ones: no leader yet
  u64* kept_p = reinterpret_cast<u64*>(kept.mutable_data_ptr<int64_t>());
  u64* owner_p = reinterpret_cast<u64*>(owner.mutable_data_ptr<int64_t>());

  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, boxes.scalar_type(), "mmops::nms_match (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    at::Tensor sorted = at::empty({n * int64_t(sizeof(Box<acc_t>))}, boxes.options().dtype(at::kByte));
    at::Tensor area = at::empty({n}, boxes.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
    Box<acc_t>* sorted_p = reinterpret_cast<Box<acc_t>*>(sorted.mutable_data_ptr<uint8_t>());
    acc_t* area_p = area.mutable_data_ptr<acc_t>();
    gather_boxes_kernel<scalar_t, acc_t><<<blocks_for(n), kThreads, 0, stream>>>(
        boxes.const_data_ptr<scalar_t>(), order.const_data_ptr<int64_t>(), nullptr, n, sorted_p, area_p, nullptr);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    // The threshold in the compute type (as the CPU kernel): the double
    // comparison in the mask kernel is then the compute type's.
    const double threshold = static_cast<double>(static_cast<acc_t>(iou_threshold));
    suppress_cuda<acc_t>(sorted_p, area_p, nullptr, n, threshold, /*inclusive=*/true,
                         /*skip_disjoint=*/threshold > 0, kept_p, owner_p, long_options, stream);
  });
  own_leaders_kernel<<<blocks_for(n), kThreads, 0, stream>>>(kept_p, n, owner_p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // Positions by (leader, position): each group's leader first, members in score order.
  const at::Tensor by_group = std::get<1>(at::sort(owner, /*stable=*/true, /*dim=*/0, /*descending=*/false));
  const at::Tensor leader = owner.index_select(0, by_group);
  return at::stack({order.index_select(0, leader), order.index_select(0, by_group)}, 1);
}

} // namespace kernels
} // namespace mmops

#pragma once
// A multi-source FIFO flood on an H x W grid (contour_expand, pixel_group),
// reproduced on the GPU layer by layer with the result of the sequential queue.
//
// The sequential flood: a queue of pixels, each with a label; a popped pixel p
// visits its 4 neighbours in a fixed order and claims (labels with its label,
// pushes) each unlabelled q that `qualifies(p, q)`. The queue is FIFO, so it
// pops whole layers: layer d + 1 is what layer d claims, in push order. q is
// claimed by the first pixel of layer d (in queue order) next to it that
// qualifies for it. Here, per layer:
//   claim:   every (p at rank i, direction d) whose q is unlabelled and
//            qualifies does atomicMin(claim[q], 4 i + d): the smallest key wins;
//   compact: each p keeps the directions whose key won; a block-wide prefix sum
//            of the counts places the new layer in (rank, direction) order,
//            which is the order the queue pushed them in. Winners take p's
//            label and reset claim[q] (all ones again for the next layer).
// A popped pixel that claims nothing is an "edge" (PSENet's progressive rounds
// seed the next round with them, in pop order); flood_round writes them out
// when asked.
//
// One block runs the whole flood (__syncthreads between the phases): no host
// synchronisation, no launch per layer. Work is O(pixels reached); the number
// of layers (the flood's depth) sets the latency.

#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/where.h>
#include <cub/block/block_scan.cuh>

#include <cstdint>

namespace mmops {
namespace kernels {
namespace grid_flood {

constexpr int kThreads = 1024;
constexpr unsigned long long kNoClaim = ~0ULL;

// The grid and the order in which a popped pixel visits its neighbours:
// (row + dy[d], col + dx[d]) for d = 0..3.
struct Grid {
  int32_t height;
  int32_t width;
  int32_t dy[4];
  int32_t dx[4];
};

// Device buffers of a flood, every one [height * width]. labels: 0 =
// unlabelled; claim: kNoClaim everywhere before the first round.
struct Buffers {
  int32_t* labels;
  unsigned long long* claim;
};

// The neighbour of pixel p in direction d, or -1 outside the grid.
__device__ inline int32_t neighbour(const Grid& g, int32_t p, int d) {
  const int32_t y = p / g.width + g.dy[d];
  const int32_t x = p % g.width + g.dx[d];
  return (y < 0 || y >= g.height || x < 0 || x >= g.width) ? -1 : y * g.width + x;
}

// One round of the flood from layer 0 = cur[0, count) (in queue order), until no
// pixel is claimed. cur and spare are scratch for the layers (both overwritten).
// With edges != nullptr, the round's edge pixels are written there in pop order
// and their number is returned (0 otherwise). qualifies(p, q) -> bool is the
// claim test; q is in the grid and unlabelled. Call from every thread of a
// block of kThreads threads; the result is the same in every thread.
template <typename Qualifies>
__device__ int32_t flood_round(const Grid& g, const Buffers& b, int32_t* cur, int32_t* spare, int32_t count,
                               int32_t* edges, Qualifies qualifies) {
  using Scan = cub::BlockScan<unsigned long long, kThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  int32_t n = count;
  int32_t edge_count = 0;
  while (n > 0) {
    // claim
    for (int32_t i = threadIdx.x; i < n; i += blockDim.x) {
      const int32_t p = cur[i];
      for (int d = 0; d < 4; ++d) {
        const int32_t q = neighbour(g, p, d);
        if (q >= 0 && b.labels[q] == 0 && qualifies(p, q)) {
          atomicMin(&b.claim[q], 4ULL * static_cast<unsigned long long>(i) + d);
        }
      }
    }
    __syncthreads();
    // compact, one chunk of kThreads pixels at a time
    int32_t placed = 0;
    for (int32_t chunk = 0; chunk < n; chunk += kThreads) {
      const int32_t i = chunk + static_cast<int32_t>(threadIdx.x);
      int32_t p = -1, label = 0;
      int32_t won[4] = {-1, -1, -1, -1};
      unsigned long long wins = 0;
      if (i < n) {
        p = cur[i];
        label = b.labels[p];
        for (int d = 0; d < 4; ++d) {
          const int32_t q = neighbour(g, p, d);
          if (q >= 0 && b.claim[q] == 4ULL * static_cast<unsigned long long>(i) + d) {
            won[d] = q;
            ++wins;
          }
        }
      }
      const bool is_edge = edges != nullptr && i < n && wins == 0;
      // low 32 bits: pixels claimed; high 32 bits: edges (each < 2^31 in total)
      const unsigned long long item = wins | (static_cast<unsigned long long>(is_edge) << 32);
      unsigned long long before = 0, total = 0;
      Scan(scan_storage).ExclusiveSum(item, before, total);
      int32_t slot = placed + static_cast<int32_t>(before & 0xffffffffULL);
      for (int d = 0; d < 4; ++d) {
        if (won[d] >= 0) {
          spare[slot++] = won[d];
          b.labels[won[d]] = label;
          b.claim[won[d]] = kNoClaim;
        }
      }
      if (is_edge) {
        edges[edge_count + static_cast<int32_t>(before >> 32)] = p;
      }
      placed += static_cast<int32_t>(total & 0xffffffffULL);
      edge_count += static_cast<int32_t>(total >> 32);
      __syncthreads(); // scan_storage is reused by the next chunk
    }
    // placed and edge_count come from the block-wide totals: the same in every thread
    n = placed;
    int32_t* const t = cur;
    cur = spare;
    spare = t;
  }
  return edge_count;
}

// The lists of a flood of `pixels` (< 2^31) pixels: lists[0] the seeds (the
// pixels where keep [pixels] bool is true, in raster order), lists[1] and
// lists[2] scratch, each pixels + 1 long (the last slot takes the rest); count
// (int32, on the device) the number of seeds; claim: kNoClaim everywhere. ATen
// ops, no synchronisation.
struct Lists {
  at::Tensor lists;  // [3, pixels + 1] int32
  at::Tensor prefix; // [pixels] int32 inclusive prefix sum of keep; its last value is the seed count
  at::Tensor claim;  // [pixels] int64, all bits set
  int32_t* list(int64_t i) { return lists.mutable_data_ptr<int32_t>() + i * lists.size(1); }
  const int32_t* count() const { return prefix.const_data_ptr<int32_t>() + (prefix.numel() - 1); }
  unsigned long long* claims() { return reinterpret_cast<unsigned long long*>(claim.mutable_data_ptr<int64_t>()); }
};

inline Lists make_lists(const at::Tensor& keep) {
  const int64_t pixels = keep.numel();
  const auto int_options = keep.options().dtype(at::kInt);
  Lists out;
  out.prefix = keep.cumsum(0, at::kInt);
  const at::Tensor slot = at::where(keep, out.prefix.sub(1), pixels).to(at::kLong);
  out.lists = at::empty({3, pixels + 1}, int_options);
  out.lists.select(0, 0).scatter_(0, slot, at::arange(pixels, int_options));
  out.claim = at::full({pixels}, -1, keep.options().dtype(at::kLong));
  return out;
}

} // namespace grid_flood
} // namespace kernels
} // namespace mmops

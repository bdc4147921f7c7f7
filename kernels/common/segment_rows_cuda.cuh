#pragma once
// Deterministic scatter-add over channel rows (CUDA), the backward of the
// gather-like ops (gather_points / group_points, three_interpolate):
//   out[b, c, p] = sum over the entries e of target (b, p)'s segment
//                  (IndexSegments: in increasing e) of
//                  source.term(rows[source.row(e), c], e)
// where rows is the scattered gradient transposed to [R, C] (contiguous), so
// that an entry's channels are one contiguous row. A block takes kTile
// targets x kSlab channels; kParts threads per target sum the channels
// part, part + kParts, ... (each load: a target's threads read consecutive
// channels of one row), and the tile leaves through shared memory as
// coalesced [C, N] rows. Each (target, channel) adds in segment order in its
// accumulator type, as the CPU kernels do, so CUDA and CPU agree bitwise.

#include "common/index_segments.h"

#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <limits>

namespace mmops {
namespace kernels {
namespace segment_rows {

constexpr int kThreads = 256;
constexpr int kTile = 32;
constexpr int kParts = kThreads / kTile;
constexpr int kSlab = 64;
constexpr int kChannelsPerPart = kSlab / kParts;

template <typename scalar_t, typename acc_t, typename Source>
__global__ void __launch_bounds__(kThreads)
    sum_kernel(const scalar_t* __restrict__ rows, const int64_t* __restrict__ order,
               const int64_t* __restrict__ offsets, int64_t channels, int64_t n, int64_t tiles, int64_t slabs,
               Source source, scalar_t* __restrict__ out) {
  __shared__ acc_t sums[kSlab][kTile + 1]; // +1: no bank conflicts on the column reads
  const int64_t block = blockIdx.x;
  const int64_t b = block / (tiles * slabs), first_target = (block / slabs) % tiles * kTile;
  const int64_t first_channel = block % slabs * kSlab;
  const int local = threadIdx.x / kParts, part = threadIdx.x % kParts;
  const int64_t p = first_target + local;
  acc_t acc[kChannelsPerPart];
#pragma unroll
  for (int q = 0; q < kChannelsPerPart; ++q) {
    acc[q] = acc_t(0);
  }
  if (p < n) {
    const int64_t begin = offsets[b * n + p], end = offsets[b * n + p + 1];
    for (int64_t j = begin; j < end; ++j) {
      const int64_t e = order[j];
      const scalar_t* row = rows + source.row(e) * channels + first_channel + part;
#pragma unroll
      for (int q = 0; q < kChannelsPerPart; ++q) {
        if (first_channel + part + q * kParts < channels) {
          acc[q] += source.template term<acc_t>(static_cast<acc_t>(row[q * kParts]), e);
        }
      }
    }
  }
#pragma unroll
  for (int q = 0; q < kChannelsPerPart; ++q) {
    sums[part + q * kParts][local] = acc[q];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kSlab * kTile; i += kThreads) {
    const int c = i / kTile, t = i % kTile;
    if (first_channel + c < channels && first_target + t < n) {
      out[(b * channels + first_channel + c) * n + first_target + t] = static_cast<scalar_t>(sums[c][t]);
    }
  }
}

// out: [batch, channels, n], written entirely (empty segments give 0).
template <typename scalar_t, typename acc_t, typename Source>
void launch_sums(const char* what, const scalar_t* rows, const IndexSegments& segments, int64_t batch, int64_t channels,
                 int64_t n, Source source, scalar_t* out, cudaStream_t stream) {
  const int64_t tiles = (n + kTile - 1) / kTile, slabs = (channels + kSlab - 1) / kSlab;
  const int64_t blocks = batch * tiles * slabs;
  TORCH_CHECK(blocks <= std::numeric_limits<int32_t>::max(), what, batch, " x ", n, " x ", channels,
              " values are more than one CUDA launch covers");
  sum_kernel<scalar_t, acc_t, Source><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      rows, segments.order.const_data_ptr<int64_t>(), segments.offsets.const_data_ptr<int64_t>(), channels, n, tiles,
      slabs, source, out);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

} // namespace segment_rows
} // namespace kernels
} // namespace mmops

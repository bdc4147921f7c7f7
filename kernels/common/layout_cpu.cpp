#include "common/layout.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstdint>

namespace mmops {
namespace kernels {
namespace {

constexpr int64_t kTile = 32; // a tile's rows and columns stay in L1
constexpr int64_t kMicro = 8; // moved through a local 8 x 8 block: 8-value runs on both sides

// dst[p][c][r] = src[p][r][c] for `planes` matrices of rows x cols values of
// type T (only its size matters: the values are moved, never read as numbers).
// Full 8 x 8 blocks read and write runs of 8, which avoids the cache-set
// conflicts of a column walk when a side is a power of two (C = 64, H*W = 4096).
template <typename T>
void transpose_planes(const T* src, T* dst, int64_t planes, int64_t rows, int64_t cols) {
  const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  const int64_t tiles = row_tiles * col_tiles;
  at::parallel_for(0, planes * tiles, 16, [&](int64_t begin, int64_t end) {
    T block[kMicro][kMicro];
    for (int64_t t = begin; t < end; ++t) {
      const int64_t p = t / tiles, r0 = (t % tiles) / col_tiles * kTile, c0 = t % col_tiles * kTile;
      const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
      const T* __restrict__ s = src + p * rows * cols;
      T* __restrict__ d = dst + p * rows * cols;
      const int64_t r8 = r0 + (r1 - r0) / kMicro * kMicro, c8 = c0 + (c1 - c0) / kMicro * kMicro;
      for (int64_t r = r0; r < r8; r += kMicro) {
        for (int64_t c = c0; c < c8; c += kMicro) {
          for (int64_t i = 0; i < kMicro; ++i) {
            for (int64_t j = 0; j < kMicro; ++j) {
              block[j][i] = s[(r + i) * cols + c + j];
            }
          }
          for (int64_t j = 0; j < kMicro; ++j) {
            for (int64_t i = 0; i < kMicro; ++i) {
              d[(c + j) * rows + r + i] = block[j][i];
            }
          }
        }
      }
      // the tile's ragged right and bottom edges, value by value
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = (r < r8 ? c8 : c0); c < c1; ++c) {
          d[c * rows + r] = s[r * cols + c];
        }
      }
    }
  });
}

} // namespace

at::Tensor contiguous_cpu(const at::Tensor& input, at::MemoryFormat format) {
  if (input.is_contiguous(format)) {
    return input;
  }
  const bool to_nhwc = format == at::MemoryFormat::ChannelsLast;
  const at::MemoryFormat other = to_nhwc ? at::MemoryFormat::Contiguous : at::MemoryFormat::ChannelsLast;
  if (input.dim() != 4 || !(to_nhwc || format == at::MemoryFormat::Contiguous) || !input.is_contiguous(other)) {
    return input.contiguous(format);
  }
  at::Tensor out = at::empty(input.sizes(), input.options(), format);
  const int64_t planes = input.size(0), channels = input.size(1), pixels = input.size(2) * input.size(3);
  if (out.numel() == 0) {
    return out;
  }
  // NCHW -> NHWC transposes each image's [C, HW]; NHWC -> NCHW its [HW, C].
  const int64_t rows = to_nhwc ? channels : pixels, cols = to_nhwc ? pixels : channels;
  const void* src = input.const_data_ptr();
  void* dst = out.mutable_data_ptr();
  const auto move = [&](auto word) { // the values as unsigned words of their size
    using T = decltype(word);
    transpose_planes(static_cast<const T*>(src), static_cast<T*>(dst), planes, rows, cols);
  };
  switch (input.element_size()) {
    case 1:
      move(uint8_t{});
      break;
    case 2:
      move(uint16_t{});
      break;
    case 4:
      move(uint32_t{});
      break;
    case 8:
      move(uint64_t{});
      break;
    default:
      return input.contiguous(format);
  }
  return out;
}

} // namespace kernels
} // namespace mmops

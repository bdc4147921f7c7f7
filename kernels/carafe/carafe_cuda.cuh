#pragma once
// Launch shapes of the carafe CUDA kernels (carafe_forward_cuda.cu,
// carafe_backward_cuda.cu).

#include <algorithm>
#include <cstdint>

namespace mmops {
namespace kernels {
namespace carafe_cuda {

// Grid-stride loops cover the rest: no launch exceeds this many blocks.
constexpr int64_t kMaxBlocks = int64_t(1) << 20;

inline unsigned grid_of(int64_t blocks) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, kMaxBlocks)));
}

} // namespace carafe_cuda
} // namespace kernels
} // namespace mmops

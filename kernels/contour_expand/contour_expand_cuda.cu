// contour_expand on CUDA: the seeds with ATen ops (areas by sort and binary
// search, no array of kernel_num entries; the raster-order seed list by a prefix
// sum), then one block floods layer by layer (common/grid_flood_cuda.cuh), all
// rounds in one launch. A label outside [0, kernel_num] is read as 0. The result
// equals the CPU's sequential flood.

#include "common/grid_flood_cuda.cuh"
#include "contour_expand/contour_expand_kernels.h"

#include <ATen/ops/searchsorted.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>

namespace mmops {
namespace kernels {
namespace {

using grid_flood::kThreads;

// rounds floods: plane K - 2 - r in round r when progressive (each round seeded
// by the edges of the one before), else plane 0 once. seeds, spare, edges:
// [pixels] each; *seed_count seeds in seeds.
__global__ void __launch_bounds__(kThreads)
    contour_expand_flood_kernel(grid_flood::Grid grid, grid_flood::Buffers buffers, const uint8_t* __restrict__ mask,
                                int64_t kernels, int64_t rounds, bool progressive, int32_t* seeds, int32_t* spare,
                                int32_t* edges, const int32_t* __restrict__ seed_count) {
  const int64_t pixels = static_cast<int64_t>(grid.height) * grid.width;
  int32_t count = *seed_count;
  for (int64_t r = 0; r < rounds; ++r) {
    const uint8_t* plane = mask + (progressive ? kernels - 2 - r : 0) * pixels;
    const auto inside = [plane](int32_t, int32_t q) { return plane[q] != 0; };
    count = grid_flood::flood_round(grid, buffers, seeds, spare, count, progressive ? edges : nullptr, inside);
    int32_t* const used = seeds; // the next round starts from this round's edges
    seeds = edges;
    edges = used;
  }
}

} // namespace

at::Tensor contour_expand_cuda(const at::Tensor& kernel_mask, const at::Tensor& internal_kernel_label,
                               const ContourExpandParams& params) {
  const c10::cuda::CUDAGuard guard(internal_kernel_label.device());
  const int64_t kernels = kernel_mask.size(0), height = kernel_mask.size(1), width = kernel_mask.size(2);
  const int64_t pixels = height * width; // < 2^31 (checked)
  const auto int_options = internal_kernel_label.options().dtype(at::kInt);
  if (pixels == 0) {
    return at::zeros({height, width}, int_options);
  }
  const at::Tensor mask = kernel_mask.contiguous().view(at::kByte);
  const at::Tensor in = internal_kernel_label.contiguous().view({pixels});
  const at::Tensor label = at::where(in.ge(0).logical_and_(in.le(params.kernel_num)), in, 0);
  // area of each pixel's label: the run of equal values in the sorted labels
  const at::Tensor sorted = std::get<0>(at::sort(label));
  const at::Tensor area = at::searchsorted(sorted, label, /*out_int32=*/true, /*right=*/true)
                              .sub_(at::searchsorted(sorted, label, /*out_int32=*/true, /*right=*/false));
  const at::Tensor keep = label.gt(0).logical_and_(area.ge(params.min_kernel_area));
  at::Tensor out = at::where(keep, label, 0).view({height, width}).contiguous();

  const int64_t rounds = params.progressive ? std::max<int64_t>(kernels - 1, 0) : (kernels >= 2 ? 1 : 0);
  if (rounds == 0) {
    return out;
  }
  grid_flood::Lists lists = grid_flood::make_lists(keep);
  const grid_flood::Grid grid{static_cast<int32_t>(height), static_cast<int32_t>(width), {-1, 1, 0, 0}, {0, 0, -1, 1}};
  const grid_flood::Buffers buffers{out.mutable_data_ptr<int32_t>(), lists.claims()};
  contour_expand_flood_kernel<<<1, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      grid, buffers, mask.const_data_ptr<uint8_t>(), kernels, rounds, params.progressive, lists.list(0), lists.list(1),
      lists.list(2), lists.count());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

} // namespace kernels
} // namespace mmops

// CUDA kernels of active_rotated_filter.
//
// One launch per direction. Every block first builds the tables of
// active_rotated_filter_math.h in shared memory from indices (R * E entries,
// e.g. 8 * 72: cheaper than another launch; an index outside [1, E] writes
// nowhere; the largest l wins a target, with a shared atomicMax: the same
// tables on every run). Then a grid-stride loop over the weight values w
// (i, column) with 32-bit indices and no division but two multiply-shifts:
// the forward writes the R output values that read w's block, the backward
// sums w's R gradient values (k ascending, as the CPU). Consecutive threads
// take consecutive columns, so every warp store is one coalesced row segment
// and the gathered loads of a warp stay within a few E-blocks (L1 hits: the R
// rotations of a weight block are read by the same thread back to back).
// Deterministic: every value has one writer. Tables too big for shared
// memory are built in global memory instead (at::full, then one small
// kernel per table).

#include "active_rotated_filter/active_rotated_filter_kernels.h"
#include "active_rotated_filter/active_rotated_filter_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <ATen/cuda/detail/IntegerDivider.cuh>

#include <algorithm>
#include <cstdint>
#include <limits>

namespace mmops {
namespace kernels {
namespace {

using namespace active_rotated_filter_math;
using at::cuda::detail::IntDivider;

constexpr int kThreads = 256;
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
// Largest R * E built in shared memory by every block (16 KB forward, 32 KB backward).
constexpr int64_t kMaxSharedTable = 4096;

// ---------------------------------------------------------------------------
// Tables (entry e = l * R + k of indices)
// ---------------------------------------------------------------------------

template <typename index_t>
__device__ inline void record_source(const index_t* indices, int32_t* source, int32_t e, int32_t entries,
                                     int32_t rotations) {
  const int32_t l = e / rotations, k = e - l * rotations;
  const int32_t m = target_of(indices[e], entries);
  if (m >= 0) {
    atomicMax(source + k * entries + m, l);
  }
}

// won[k * E + l]: the target entry l's gradient is read from for rotation k, or -1.
template <typename index_t>
__device__ inline void record_won(const index_t* indices, const int32_t* source, int32_t* won, int32_t e,
                                  int32_t entries, int32_t rotations) {
  const int32_t l = e / rotations, k = e - l * rotations;
  won[k * entries + l] = won_target(target_of(indices[e], entries), source + k * entries, l);
}

// Builds source (and won when given) in shared memory; the whole block calls it.
template <typename index_t>
__device__ void build_shared_tables(const index_t* indices, int32_t* source, int32_t* won, int32_t entries,
                                    int32_t rotations) {
  const int32_t n = entries * rotations;
  for (int32_t e = threadIdx.x; e < n; e += blockDim.x) {
    source[e] = -1;
  }
  __syncthreads();
  for (int32_t e = threadIdx.x; e < n; e += blockDim.x) {
    record_source(indices, source, e, entries, rotations);
  }
  __syncthreads();
  if (won != nullptr) {
    for (int32_t e = threadIdx.x; e < n; e += blockDim.x) {
      record_won(indices, source, won, e, entries, rotations);
    }
    __syncthreads();
  }
}

// The global-memory fallback (source must hold -1 first).
template <typename index_t>
__global__ void __launch_bounds__(kThreads)
    source_kernel(const index_t* __restrict__ indices, int32_t* __restrict__ source, int32_t entries,
                  int32_t rotations) {
  const int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (e < int64_t(entries) * rotations) {
    record_source(indices, source, static_cast<int32_t>(e), entries, rotations);
  }
}

template <typename index_t>
__global__ void __launch_bounds__(kThreads)
    won_kernel(const index_t* __restrict__ indices, const int32_t* __restrict__ source, int32_t* __restrict__ won,
               int32_t entries, int32_t rotations) {
  const int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (e < int64_t(entries) * rotations) {
    record_won(indices, source, won, static_cast<int32_t>(e), entries, rotations);
  }
}

// ---------------------------------------------------------------------------
// Gathers
// ---------------------------------------------------------------------------

// One launch: `rows` weight rows of C = in_planes * E values (rows * C < 2^31).
struct Geometry {
  IntDivider<uint32_t> columns; // C
  IntDivider<uint32_t> entries; // E (divides C, so w mod E is the entry)
  uint32_t items;               // rows * C
  int32_t rotations;
};

// kShared: build the tables per block from indices; else read them from `tables` (global).
template <typename scalar_t, typename index_t, bool kShared>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const scalar_t* __restrict__ input, const index_t* __restrict__ indices,
                   const int32_t* __restrict__ tables, scalar_t* __restrict__ output, Geometry g) {
  extern __shared__ int32_t shared_tables[];
  const int32_t entries = static_cast<int32_t>(g.entries.divisor);
  const int64_t columns = g.columns.divisor;
  const int32_t* source = tables;
  if constexpr (kShared) {
    build_shared_tables(indices, shared_tables, static_cast<int32_t*>(nullptr), entries, g.rotations);
    source = shared_tables;
  }
  const uint32_t stride = gridDim.x * blockDim.x;
  for (uint32_t w = blockIdx.x * blockDim.x + threadIdx.x; w < g.items; w += stride) {
    const uint32_t i = g.columns.div(w), m = g.entries.mod(w);
    const scalar_t* block = input + (w - m); // weight block (i, j)
    // output row i * R, column w - i * C
    scalar_t* out = output + w + int64_t(i) * (g.rotations - 1) * columns;
    const int32_t* source_m = source + m;
#pragma unroll 4
    for (int32_t k = 0; k < g.rotations; ++k, out += columns) {
      const int32_t l = source_m[k * entries];
      *out = l >= 0 ? block[l] : scalar_t(0);
    }
  }
}

template <typename scalar_t, typename index_t, bool kShared>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const scalar_t* __restrict__ grad_output, const index_t* __restrict__ indices,
                    const int32_t* __restrict__ tables, scalar_t* __restrict__ grad, Geometry g) {
  using acc_t = at::opmath_type<scalar_t>;
  extern __shared__ int32_t shared_tables[];
  const int32_t entries = static_cast<int32_t>(g.entries.divisor);
  const int64_t columns = g.columns.divisor;
  const int32_t* won = tables;
  if constexpr (kShared) {
    const int32_t n = entries * g.rotations;
    build_shared_tables(indices, shared_tables, shared_tables + n, entries, g.rotations);
    won = shared_tables + n;
  }
  const uint32_t stride = gridDim.x * blockDim.x;
  for (uint32_t w = blockIdx.x * blockDim.x + threadIdx.x; w < g.items; w += stride) {
    const uint32_t i = g.columns.div(w), l = g.entries.mod(w);
    // block (i * R, j) of grad_output: row i * R, column w - i * C - l
    const scalar_t* block = grad_output + (w - l) + int64_t(i) * (g.rotations - 1) * columns;
    const int32_t* won_l = won + l;
    acc_t sum = acc_t(0);
#pragma unroll 4
    for (int32_t k = 0; k < g.rotations; ++k, block += columns) {
      const int32_t m = won_l[k * entries];
      if (m >= 0) {
        sum += static_cast<acc_t>(block[m]);
      }
    }
    grad[w] = static_cast<scalar_t>(sum);
  }
}

// ---------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------

// The 32-bit limits of the kernels, named for the caller.
void check_sizes(const ActiveRotatedFilterParams& p) {
  TORCH_CHECK(p.in_planes * p.entries <= kInt32Max,
              "mmops::active_rotated_filter: the CUDA kernels need in_planes * orientations * kH * kW < 2^31, got ",
              p.in_planes * p.entries);
  TORCH_CHECK(p.rotations <= kInt32Max / p.entries,
              "mmops::active_rotated_filter: the CUDA kernels need rotations * orientations * kH * kW < 2^31, got ",
              p.rotations, " * ", p.entries);
}

bool shared_tables_fit(const ActiveRotatedFilterParams& p) {
  return p.rotations * p.entries <= kMaxSharedTable;
}

// Runs launch(rows_done, geometry) over chunks of weight rows of < 2^31 values each.
template <typename Launch>
void for_each_chunk(const ActiveRotatedFilterParams& p, const Launch& launch) {
  const int64_t columns = p.in_planes * p.entries;
  const int64_t chunk_rows = kInt32Max / columns;
  for (int64_t row = 0; row < p.out_planes; row += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, p.out_planes - row);
    const Geometry g{IntDivider<uint32_t>(static_cast<uint32_t>(columns)),
                     IntDivider<uint32_t>(static_cast<uint32_t>(p.entries)), static_cast<uint32_t>(rows * columns),
                     static_cast<int32_t>(p.rotations)};
    launch(row, g);
  }
}

// Blocks for a grid-stride kernel: one per kThreads items, at most what stays resident
// (every block then builds its tables once).
template <typename Kernel>
unsigned grid_of(Kernel kernel, size_t shared_bytes, uint32_t items) {
  int per_sm = 0, sms = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, shared_bytes));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, c10::cuda::current_device()));
  const int64_t resident = std::max<int64_t>(1, int64_t(per_sm) * sms);
  return static_cast<unsigned>(std::min<int64_t>(resident, (int64_t(items) + kThreads - 1) / kThreads));
}

// source (and won, when `with_won`) in global memory, on the current stream.
at::Tensor global_tables(const at::Tensor& idx, const ActiveRotatedFilterParams& p, bool with_won) {
  const int64_t n = p.rotations * p.entries;
  const auto options = idx.options().dtype(at::kInt);
  at::Tensor source = at::full({n}, -1, options);
  at::Tensor won = with_won ? at::empty({n}, options) : source;
  const unsigned blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  const int32_t entries = static_cast<int32_t>(p.entries), rotations = static_cast<int32_t>(p.rotations);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_INTEGRAL_TYPES(idx.scalar_type(), "active_rotated_filter_tables_cuda", [&] {
    source_kernel<scalar_t><<<blocks, kThreads, 0, stream>>>(idx.const_data_ptr<scalar_t>(),
                                                             source.mutable_data_ptr<int32_t>(), entries, rotations);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (with_won) {
      won_kernel<scalar_t><<<blocks, kThreads, 0, stream>>>(idx.const_data_ptr<scalar_t>(),
                                                            source.const_data_ptr<int32_t>(),
                                                            won.mutable_data_ptr<int32_t>(), entries, rotations);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
  return won;
}

// Launches kernel<scalar_t, index_t, kShared> over every chunk: `in` has C values per weight
// row, `out` R * C (forward) or the reverse (backward: in_row_scale = R).
template <typename scalar_t, typename index_t, bool kShared, typename Kernel>
void launch_gather(Kernel kernel, const at::Tensor& in, const index_t* indices, const int32_t* tables, at::Tensor& out,
                   const ActiveRotatedFilterParams& p, size_t shared_bytes, int64_t in_row_scale,
                   int64_t out_row_scale) {
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int64_t columns = p.in_planes * p.entries;
  const scalar_t* src = in.const_data_ptr<scalar_t>();
  scalar_t* dst = out.mutable_data_ptr<scalar_t>();
  for_each_chunk(p, [&](int64_t row, const Geometry& g) {
    kernel<<<grid_of(kernel, shared_bytes, g.items), kThreads, shared_bytes, stream>>>(
        src + row * in_row_scale * columns, indices, tables, dst + row * out_row_scale * columns, g);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

} // namespace

at::Tensor active_rotated_filter_forward_cuda(const at::Tensor& input, const at::Tensor& indices,
                                              const ActiveRotatedFilterParams& p) {
  const c10::cuda::CUDAGuard guard(input.device());
  const at::Tensor in = input.contiguous();
  at::Tensor out =
      at::empty({p.out_planes * p.rotations, p.in_planes * p.orientations, p.kernel_h, p.kernel_w}, in.options());
  if (out.numel() == 0) {
    return out;
  }
  check_sizes(p);
  const at::Tensor idx = indices.contiguous();
  const int64_t rotations = p.rotations;
  if (shared_tables_fit(p)) {
    const size_t bytes = sizeof(int32_t) * p.rotations * p.entries;
    AT_DISPATCH_INTEGRAL_TYPES(idx.scalar_type(), "active_rotated_filter_forward_cuda", [&] {
      using index_t = scalar_t;
      AT_DISPATCH_FLOATING_TYPES_AND2(
          at::kHalf, at::kBFloat16, in.scalar_type(), "active_rotated_filter_forward_cuda", [&] {
            launch_gather<scalar_t, index_t, true>(forward_kernel<scalar_t, index_t, true>, in,
                                                   idx.const_data_ptr<index_t>(), nullptr, out, p, bytes, 1, rotations);
          });
    });
  } else {
    const at::Tensor source = global_tables(idx, p, false);
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kHalf, at::kBFloat16, in.scalar_type(), "active_rotated_filter_forward_cuda", [&] {
          launch_gather<scalar_t, int32_t, false>(forward_kernel<scalar_t, int32_t, false>, in, nullptr,
                                                  source.const_data_ptr<int32_t>(), out, p, 0, 1, rotations);
        });
  }
  return out;
}

at::Tensor active_rotated_filter_backward_cuda(const at::Tensor& grad_output, const at::Tensor& indices,
                                               const ActiveRotatedFilterParams& p) {
  const c10::cuda::CUDAGuard guard(grad_output.device());
  const at::Tensor go = grad_output.contiguous();
  at::Tensor grad = at::empty({p.out_planes, p.in_planes, p.orientations, p.kernel_h, p.kernel_w}, go.options());
  if (grad.numel() == 0) {
    return grad;
  }
  check_sizes(p);
  const at::Tensor idx = indices.contiguous();
  const int64_t rotations = p.rotations;
  if (shared_tables_fit(p)) {
    const size_t bytes = 2 * sizeof(int32_t) * p.rotations * p.entries;
    AT_DISPATCH_INTEGRAL_TYPES(idx.scalar_type(), "active_rotated_filter_backward_cuda", [&] {
      using index_t = scalar_t;
      AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, go.scalar_type(), "active_rotated_filter_backward_cuda",
                                      [&] {
                                        launch_gather<scalar_t, index_t, true>(backward_kernel<scalar_t, index_t, true>,
                                                                               go, idx.const_data_ptr<index_t>(),
                                                                               nullptr, grad, p, bytes, rotations, 1);
                                      });
    });
  } else {
    const at::Tensor won = global_tables(idx, p, true);
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kHalf, at::kBFloat16, go.scalar_type(), "active_rotated_filter_backward_cuda", [&] {
          launch_gather<scalar_t, int32_t, false>(backward_kernel<scalar_t, int32_t, false>, go, nullptr,
                                                  won.const_data_ptr<int32_t>(), grad, p, 0, rotations, 1);
        });
  }
  return grad;
}

} // namespace kernels
} // namespace mmops

// CUDA kernels of furthest_point_sample(_with_dist): one block per batch
// element, a thread owns the points tid, tid + blockDim, ... and keeps their
// distances in registers (kSlots of them; up to 32 * 1024 points) or, for
// larger clouds, in a global workspace that only it touches. Each pick is a
// block argmax: warp shuffles, then one warp over the warps' winners (two
// __syncthreads). The picked point's coordinates (or distance-matrix row) are
// read by every thread from global memory (one cached line).
// half/bfloat16 compute in float; the rules are furthest_point_sample_math.h,
// so the picks equal the CPU kernel's bitwise.

#include "furthest_point_sample/furthest_point_sample_kernels.h"
#include "furthest_point_sample/furthest_point_sample_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>
#include <limits>

namespace mmops {
namespace kernels {
namespace {

constexpr int kMaxThreads = 1024;
constexpr int kWarp = 32;

template <typename acc_t>
struct Candidate {
  acc_t value;
  int32_t index;
};

template <typename acc_t>
__device__ inline Candidate<acc_t> no_candidate() {
  return {-std::numeric_limits<acc_t>::infinity(), std::numeric_limits<int32_t>::max()};
}

template <typename acc_t>
__device__ inline Candidate<acc_t> warp_argmax(Candidate<acc_t> c) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const acc_t v = __shfl_down_sync(0xffffffffu, c.value, offset);
    const int32_t i = __shfl_down_sync(0xffffffffu, c.index, offset);
    if (fps_math::beats(v, i, c.value, c.index)) {
      c = {v, i};
    }
  }
  return c;
}

// The block's winner (larger value, then lower index), returned to every thread.
template <typename acc_t>
__device__ inline int32_t block_argmax(Candidate<acc_t> c, Candidate<acc_t>* warp_best, int32_t* winner) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  c = warp_argmax(c);
  if (lane == 0) {
    warp_best[warp] = c;
  }
  __syncthreads();
  if (warp == 0) {
    c = lane < int(blockDim.x / kWarp) ? warp_best[lane] : no_candidate<acc_t>();
    c = warp_argmax(c);
    if (lane == 0) {
      *winner = c.index;
    }
  }
  __syncthreads();
  return *winner;
}

// Distances to the picked point from its coordinates (points [N, 3] of one batch element).
template <typename scalar_t, typename acc_t>
struct XyzDistance {
  const scalar_t* points;
  int64_t n;
  acc_t x, y, z;

  __device__ void at_batch(int64_t b) { points += b * n * 3; }
  __device__ void pick(int32_t p) {
    x = static_cast<acc_t>(points[3 * int64_t(p)]);
    y = static_cast<acc_t>(points[3 * int64_t(p) + 1]);
    z = static_cast<acc_t>(points[3 * int64_t(p) + 2]);
  }
  __device__ acc_t operator()(int64_t k) const {
    const scalar_t* q = points + 3 * k;
    return fps_math::square_distance(x, y, z, static_cast<acc_t>(q[0]), static_cast<acc_t>(q[1]),
                                     static_cast<acc_t>(q[2]));
  }
};

// Distances to the picked point from its row of the matrix (dist [N, N] of one batch element).
template <typename scalar_t, typename acc_t>
struct MatrixDistance {
  const scalar_t* dist;
  int64_t n;
  const scalar_t* row;

  __device__ void at_batch(int64_t b) { dist += b * n * n; }
  __device__ void pick(int32_t p) { row = dist + int64_t(p) * n; }
  __device__ acc_t operator()(int64_t k) const { return static_cast<acc_t>(row[k]); }
};

// One block per batch element. kSlots > 0: the kept distances in registers
// (n <= kSlots * blockDim); kSlots == 0: in workspace [B, N].
template <typename acc_t, int kSlots, typename Distance>
__global__ void __launch_bounds__(kMaxThreads)
    furthest_point_sample_kernel(Distance distance, int64_t n, int64_t m, acc_t* workspace, int32_t* out) {
  __shared__ Candidate<acc_t> warp_best[kMaxThreads / kWarp];
  __shared__ int32_t winner;
  const int64_t b = blockIdx.x;
  distance.at_batch(b);
  out += b * m;
  const acc_t initial = static_cast<acc_t>(fps_math::kInitialDistance);
  acc_t kept[kSlots > 0 ? kSlots : 1];
#pragma unroll
  for (int s = 0; s < (kSlots > 0 ? kSlots : 1); ++s) {
    kept[s] = initial;
  }
  workspace += kSlots > 0 ? 0 : b * n;
  if constexpr (kSlots == 0) {
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
      workspace[k] = initial; // only this thread reads it back: no barrier needed
    }
  }
  int32_t picked = 0;
  if (threadIdx.x == 0) {
    out[0] = picked;
  }
  for (int64_t j = 1; j < m; ++j) {
    distance.pick(picked);
    Candidate<acc_t> best = no_candidate<acc_t>();
    if constexpr (kSlots > 0) {
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        const int64_t k = threadIdx.x + int64_t(s) * blockDim.x;
        if (k < n) {
          kept[s] = fps_math::kept_distance(kept[s], distance(k));
          if (fps_math::beats(kept[s], int32_t(k), best.value, best.index)) {
            best = {kept[s], int32_t(k)};
          }
        }
      }
    } else {
      for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
        const acc_t v = fps_math::kept_distance(workspace[k], distance(k));
        workspace[k] = v;
        if (fps_math::beats(v, int32_t(k), best.value, best.index)) {
          best = {v, int32_t(k)};
        }
      }
    }
    picked = block_argmax(best, warp_best, &winner);
    if (threadIdx.x == 0) {
      out[j] = picked;
    }
  }
}

template <typename acc_t, int kSlots, typename Distance>
void launch_with(const Distance& distance, int64_t batch, int64_t n, int64_t m, at::Tensor& out) {
  const int64_t per_thread = kSlots > 0 ? kSlots : (n + kMaxThreads - 1) / kMaxThreads;
  const int64_t needed = (n + per_thread - 1) / per_thread;
  const int threads = static_cast<int>(std::min<int64_t>(kMaxThreads, (needed + kWarp - 1) / kWarp * kWarp));
  at::Tensor workspace =
      at::empty({kSlots > 0 ? 0 : batch * n}, out.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
  furthest_point_sample_kernel<acc_t, kSlots, Distance>
      <<<static_cast<unsigned>(batch), threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
          distance, n, m, workspace.mutable_data_ptr<acc_t>(), out.mutable_data_ptr<int32_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Registers for up to 32 distances a thread (32 * 1024 points), else the workspace.
template <typename acc_t, typename Distance>
void launch(const Distance& distance, int64_t batch, int64_t n, int64_t m, at::Tensor& out) {
  if (n <= 4 * kMaxThreads) {
    launch_with<acc_t, 4>(distance, batch, n, m, out);
  } else if (n <= 16 * kMaxThreads) {
    launch_with<acc_t, 16>(distance, batch, n, m, out);
  } else if (n <= 32 * kMaxThreads) {
    launch_with<acc_t, 32>(distance, batch, n, m, out);
  } else {
    launch_with<acc_t, 0>(distance, batch, n, m, out);
  }
}

template <template <typename, typename> class Distance>
at::Tensor sample(const at::Tensor& input, int64_t num_points, const char* name) {
  const c10::cuda::CUDAGuard guard(input.device());
  const at::Tensor data = input.contiguous();
  const int64_t batch = data.size(0), n = data.size(1);
  at::Tensor out = at::empty({batch, num_points}, data.options().dtype(at::kInt));
  if (out.numel() == 0) {
    return out;
  }
  TORCH_CHECK(batch <= std::numeric_limits<int32_t>::max(), name, "a batch of ", batch,
              " is more than one CUDA launch covers");
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, data.scalar_type(), "mmops::furthest_point_sample (CUDA)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        launch<acc_t>(Distance<scalar_t, acc_t>{data.const_data_ptr<scalar_t>(), n, {}}, batch, n, num_points, out);
      });
  return out;
}

} // namespace

at::Tensor furthest_point_sample_cuda(const at::Tensor& points_xyz, int64_t num_points) {
  return sample<XyzDistance>(points_xyz, num_points, "mmops::furthest_point_sample: ");
}

at::Tensor furthest_point_sample_with_dist_cuda(const at::Tensor& points_dist, int64_t num_points) {
  return sample<MatrixDistance>(points_dist, num_points, "mmops::furthest_point_sample_with_dist: ");
}

} // namespace kernels
} // namespace mmops

// CUDA kernels of soft_nms: one block walks the selection sequentially (block
// argmax, then rescoring of the remaining boxes); one synchronisation for the
// count. Fine for thousands of boxes.

#include "nms/nms_cuda.cuh"
#include "nms/nms_kernels.h"
#include "nms/nms_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>

namespace mmops {
namespace kernels {
namespace {

constexpr int kGreedyWarps = kGreedyThreads / 32;

template <typename acc_t>
struct Best {
  acc_t score;
  int64_t index; // -1: none
};

template <typename acc_t>
__device__ inline bool better(const Best<acc_t>& a, const Best<acc_t>& b) {
  if (a.index < 0) {
    return false;
  }
  if (b.index < 0) {
    return true;
  }
  return a.score > b.score || (a.score == b.score && a.index < b.index);
}

// One block of kGreedyThreads. score: working scores (NaN scores arrive dead).
template <typename acc_t>
__global__ void __launch_bounds__(kGreedyThreads)
    soft_nms_kernel(const Box<acc_t>* __restrict__ boxes, const acc_t* __restrict__ area, acc_t* score, bool* alive,
                    int64_t n, acc_t iou_threshold, double sigma, acc_t min_score, int method,
                    int64_t* __restrict__ out_index, acc_t* __restrict__ out_score, int64_t* __restrict__ out_count) {
  __shared__ Best<acc_t> s_best[kGreedyWarps];
  __shared__ Best<acc_t> s_pick;
  const int t = threadIdx.x;
  const int warp = t >> 5;
  const int lane = t & 31;
  int64_t count = 0;
  for (; count < n; ++count) {
    Best<acc_t> best{acc_t(0), -1};
    for (int64_t j = t; j < n; j += kGreedyThreads) {
      if (alive[j]) {
        const Best<acc_t> c{score[j], j};
        if (better(c, best)) {
          best = c;
        }
      }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
      Best<acc_t> other;
      other.score = __shfl_down_sync(0xffffffffu, best.score, offset);
      other.index = __shfl_down_sync(0xffffffffu, best.index, offset);
      if (better(other, best)) {
        best = other;
      }
    }
    if (lane == 0) {
      s_best[warp] = best;
    }
    __syncthreads();
    if (t == 0) {
      Best<acc_t> b = s_best[0];
      for (int w = 1; w < kGreedyWarps; ++w) {
        if (better(s_best[w], b)) {
          b = s_best[w];
        }
      }
      s_pick = b;
      if (b.index >= 0) {
        out_index[count] = b.index;
        out_score[count] = b.score;
        alive[b.index] = false;
      }
    }
    __syncthreads();
    const Best<acc_t> pick = s_pick;
    if (pick.index < 0) {
      break;
    }
    const Box<acc_t> pb = boxes[pick.index];
    const acc_t pa = area[pick.index];
    for (int64_t j = t; j < n; j += kGreedyThreads) {
      if (!alive[j]) {
        continue;
      }
      const acc_t ovr = box_iou::iou(pb, boxes[j], pa, area[j]);
      const acc_t weight = nms_math::soft_nms_weight(static_cast<SoftNmsMethod>(method), ovr, iou_threshold, sigma);
      const acc_t s = score[j] * weight;
      score[j] = s;
      if (!(s >= min_score)) {
        alive[j] = false; // NaN (inf * 0) is dropped too
      }
    }
    __syncthreads();
  }
  if (t == 0) {
    *out_count = count;
  }
}

template <typename acc_t>
__global__ void soft_nms_init_kernel(const acc_t* __restrict__ score_in, int64_t n, acc_t* __restrict__ score,
                                     bool* __restrict__ alive) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) {
    const acc_t s = score_in[i];
    score[i] = s;
    alive[i] = (s == s); // a NaN score is dropped
  }
}

} // namespace

std::tuple<at::Tensor, at::Tensor> soft_nms_cuda(const at::Tensor& boxes_in, const at::Tensor& scores_in,
                                                 const SoftNmsParams& params) {
  const c10::cuda::CUDAGuard guard(boxes_in.device());
  const int64_t n = boxes_in.size(0);
  const auto long_options = boxes_in.options().dtype(at::kLong);
  if (n == 0) {
    return {at::empty({0, 5}, boxes_in.options()), at::empty({0}, long_options)};
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const at::Tensor boxes = boxes_in.contiguous();
  at::Tensor dets;
  at::Tensor keep;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, boxes.scalar_type(), "mmops::soft_nms (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const auto acc_options = boxes.options().dtype(c10::CppTypeToScalarType<acc_t>::value);
    const at::Tensor identity = at::arange(n, long_options);
    at::Tensor sorted = at::empty({n * int64_t(sizeof(Box<acc_t>))}, boxes.options().dtype(at::kByte));
    at::Tensor area = at::empty({n}, acc_options);
    Box<acc_t>* sorted_p = reinterpret_cast<Box<acc_t>*>(sorted.mutable_data_ptr<uint8_t>());
    gather_boxes_kernel<scalar_t, acc_t>
        <<<blocks_for(n), kThreads, 0, stream>>>(boxes.const_data_ptr<scalar_t>(), identity.const_data_ptr<int64_t>(),
                                                 nullptr, n, sorted_p, area.mutable_data_ptr<acc_t>(), nullptr);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    const at::Tensor score_in = scores_in.to(acc_options.dtype()).contiguous();
    at::Tensor score = at::empty({n}, acc_options);
    at::Tensor alive = at::empty({n}, boxes.options().dtype(at::kBool));
    soft_nms_init_kernel<acc_t><<<blocks_for(n), kThreads, 0, stream>>>(
        score_in.const_data_ptr<acc_t>(), n, score.mutable_data_ptr<acc_t>(), alive.mutable_data_ptr<bool>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    at::Tensor out_index = at::empty({n}, long_options);
    at::Tensor out_score = at::empty({n}, acc_options);
    at::Tensor out_count = at::empty({1}, long_options);
    soft_nms_kernel<acc_t><<<1, kGreedyThreads, 0, stream>>>(
        sorted_p, area.const_data_ptr<acc_t>(), score.mutable_data_ptr<acc_t>(), alive.mutable_data_ptr<bool>(), n,
        static_cast<acc_t>(params.iou_threshold), params.sigma, static_cast<acc_t>(params.min_score),
        static_cast<int>(params.method), out_index.mutable_data_ptr<int64_t>(), out_score.mutable_data_ptr<acc_t>(),
        out_count.mutable_data_ptr<int64_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    // The one synchronisation: the number of selected boxes.
    const int64_t count = out_count.item<int64_t>();
    keep = out_index.slice(0, 0, count);
    dets = at::cat({boxes.index_select(0, keep), out_score.slice(0, 0, count).unsqueeze(1).to(boxes.scalar_type())}, 1);
  });
  return {dets, keep};
}

} // namespace kernels
} // namespace mmops

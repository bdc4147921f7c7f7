#include "common/index_policy.h"

#include <mmops/config.h>

#include <ATen/ops/aminmax.h>

#ifdef MMOPS_WITH_CUDA
#include <c10/cuda/CUDAGraphsC10Utils.h>
#endif

namespace mmops {
namespace detail {

bool stream_is_capturing() {
#ifdef MMOPS_WITH_CUDA
  return c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
#else
  return false;
#endif
}

bool should_validate_indices(const at::Tensor& data) {
  if (data.is_cpu()) {
    return true;
  }
  return data.is_cuda() && strict_index_check() && !stream_is_capturing();
}

std::pair<int64_t, int64_t> index_value_range(const at::Tensor& data) {
  const auto [lo, hi] = at::aminmax(data);
  return {lo.item<int64_t>(), hi.item<int64_t>()};
}

} // namespace detail
} // namespace mmops

#pragma once
// The library's one policy for indices that live in tensor data (the batch
// index of a roi, a class id, a level table): reading them to validate costs a
// device-to-host copy for CUDA tensors. CPU ops always validate them (an error
// instead of an out-of-range access). CUDA kernels guard every such index
// themselves (defined result, no sync); they are also validated synchronously,
// with a clear error, when the strict switch is on (mmops::set_strict_index_check)
// -- but never while the current stream captures a CUDA graph.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>

namespace mmops {
namespace detail {

// True when the data of `data` (a tensor holding indices) must be read and
// validated now, following the policy above.
bool should_validate_indices(const at::Tensor& data);

// True while the current CUDA stream captures a graph (no sync allowed);
// false without CUDA.
bool stream_is_capturing();

// The smallest and largest value of a non-empty integer tensor, for the range
// checks of validated indices (one device-to-host copy for a CUDA tensor).
std::pair<int64_t, int64_t> index_value_range(const at::Tensor& data);

} // namespace detail
} // namespace mmops

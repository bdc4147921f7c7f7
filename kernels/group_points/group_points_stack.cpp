// stack_group_points on CPU and CUDA, in terms of the flat gather kernels:
// every (row, sample) index becomes a global feature index (the first feature
// of its row's batch + the index; -1 where the row lies past the batches or
// the index outside its batch), computed with tensor ops on the data's device
// (no host sync). Features [N, C] are gathered as [1, C, N].

#include "group_points/group_points_kernels.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/where.h>

namespace mmops {
namespace kernels {
namespace {

// int32 [1, M * S]: the global feature index of every entry of indices [M, S].
at::Tensor global_indices(const at::Tensor& features_batch_cnt, const at::Tensor& indices,
                          const at::Tensor& indices_batch_cnt, int64_t n) {
  const int64_t batch = indices_batch_cnt.size(0);
  const int64_t rows = indices.size(0);
  const at::Tensor row_ends = at::cumsum(indices_batch_cnt, 0, at::kLong);
  // the batch of row r: the first b with r < row_ends[b] (batch when none)
  at::Tensor row_batch = at::searchsorted(row_ends, at::arange(rows, row_ends.options()), /*out_int32=*/false,
                                          /*right=*/true);
  const at::Tensor in_batch = row_batch < batch;
  row_batch = row_batch.clamp_max(batch - 1).unsqueeze(1);
  const at::Tensor counts = features_batch_cnt.to(at::kLong);
  const at::Tensor starts = at::cumsum(counts, 0) - counts;
  const at::Tensor local = indices.to(at::kLong);
  const at::Tensor valid =
      in_batch.unsqueeze(1) & (local >= 0) & (local < counts.index_select(0, row_batch.view(-1)).unsqueeze(1));
  const at::Tensor global = starts.index_select(0, row_batch.view(-1)).unsqueeze(1) + local;
  return at::where(valid & (global < n), global, -1).to(at::kInt).view({1, -1});
}

template <auto Gather>
at::Tensor stack_forward(const at::Tensor& features, const at::Tensor& features_batch_cnt, const at::Tensor& indices,
                         const at::Tensor& indices_batch_cnt) {
  const int64_t rows = indices.size(0), samples = indices.size(1), channels = features.size(1);
  if (rows == 0 || samples == 0 || channels == 0 || indices_batch_cnt.size(0) == 0) {
    return features.new_zeros({rows, channels, samples});
  }
  const at::Tensor global = global_indices(features_batch_cnt, indices, indices_batch_cnt, features.size(0));
  const at::Tensor out = Gather(features.t().unsqueeze(0), global); // [1, C, M * S]
  return out.view({channels, rows, samples}).permute({1, 0, 2}).contiguous();
}

template <auto GatherBackward>
at::Tensor stack_backward(const at::Tensor& grad_output, const at::Tensor& features_batch_cnt,
                          const at::Tensor& indices, const at::Tensor& indices_batch_cnt, int64_t n) {
  const int64_t rows = indices.size(0), samples = indices.size(1), channels = grad_output.size(1);
  if (rows == 0 || samples == 0 || channels == 0 || n == 0 || indices_batch_cnt.size(0) == 0) {
    return grad_output.new_zeros({n, channels});
  }
  const at::Tensor global = global_indices(features_batch_cnt, indices, indices_batch_cnt, n);
  const at::Tensor flat = grad_output.permute({1, 0, 2}).reshape({1, channels, rows * samples});
  return GatherBackward(flat, global, n).squeeze(0).t().contiguous(); // [n, C]
}

} // namespace

at::Tensor stack_group_points_forward_cpu(const at::Tensor& features, const at::Tensor& features_batch_cnt,
                                          const at::Tensor& indices, const at::Tensor& indices_batch_cnt) {
  return stack_forward<gather_points_forward_cpu>(features, features_batch_cnt, indices, indices_batch_cnt);
}

at::Tensor stack_group_points_backward_cpu(const at::Tensor& grad_output, const at::Tensor& features_batch_cnt,
                                           const at::Tensor& indices, const at::Tensor& indices_batch_cnt, int64_t n) {
  return stack_backward<gather_points_backward_cpu>(grad_output, features_batch_cnt, indices, indices_batch_cnt, n);
}

#ifdef MMOPS_WITH_CUDA
at::Tensor stack_group_points_forward_cuda(const at::Tensor& features, const at::Tensor& features_batch_cnt,
                                           const at::Tensor& indices, const at::Tensor& indices_batch_cnt) {
  return stack_forward<gather_points_forward_cuda>(features, features_batch_cnt, indices, indices_batch_cnt);
}

at::Tensor stack_group_points_backward_cuda(const at::Tensor& grad_output, const at::Tensor& features_batch_cnt,
                                            const at::Tensor& indices, const at::Tensor& indices_batch_cnt, int64_t n) {
  return stack_backward<gather_points_backward_cuda>(grad_output, features_batch_cnt, indices, indices_batch_cnt, n);
}
#endif

} // namespace kernels
} // namespace mmops

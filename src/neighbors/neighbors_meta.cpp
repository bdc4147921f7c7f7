// Meta (shape and dtype only) kernels of the neighbour queries, for fake
// tensors, torch.compile and torch.export. Sizes stay symbolic.

#include "neighbors/neighbors_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor ball_query_meta(double min_radius, double max_radius, c10::SymInt sample_num, const at::Tensor& xyz,
                           const at::Tensor& center_xyz) {
  detail::check_ball_query(min_radius, max_radius, sample_num, xyz, center_xyz);
  return at::empty_symint({center_xyz.sym_size(0), center_xyz.sym_size(1), sample_num}, xyz.options().dtype(at::kInt));
}

at::Tensor stack_ball_query_meta(double max_radius, c10::SymInt sample_num, const at::Tensor& xyz,
                                 const at::Tensor& center_xyz, const at::Tensor& xyz_batch_cnt,
                                 const at::Tensor& center_xyz_batch_cnt) {
  detail::check_stack_ball_query(max_radius, sample_num, xyz, center_xyz, xyz_batch_cnt, center_xyz_batch_cnt);
  return at::empty_symint({center_xyz.sym_size(0), sample_num}, xyz.options().dtype(at::kInt));
}

at::Tensor knn_meta(c10::SymInt k, const at::Tensor& xyz, const std::optional<at::Tensor>& center_xyz,
                    bool transposed) {
  detail::check_knn(k, xyz, center_xyz, transposed);
  const at::Tensor& c = center_xyz.has_value() ? *center_xyz : xyz;
  return at::empty_symint({c.sym_size(0), k, c.sym_size(transposed ? 2 : 1)}, xyz.options().dtype(at::kInt));
}

std::tuple<at::Tensor, at::Tensor> three_nn_meta(const at::Tensor& target, const at::Tensor& source) {
  detail::check_three_nn(target, source);
  return {at::empty_symint({target.sym_size(0), target.sym_size(1), 3}, target.options()),
          at::empty_symint({target.sym_size(0), target.sym_size(1), 3}, target.options().dtype(at::kInt))};
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("ball_query", &mmops::ball_query_meta);
  m.impl("stack_ball_query", &mmops::stack_ball_query_meta);
  m.impl("knn", &mmops::knn_meta);
  m.impl("three_nn", &mmops::three_nn_meta);
}

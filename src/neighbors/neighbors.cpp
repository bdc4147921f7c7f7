// mmops neighbour queries (ball_query, stack_ball_query, knn, three_nn):
// schemas, device entries (CPU/CUDA registration) and the public C++ API.
// Validation in neighbors_checks.cpp, kernels in kernels/neighbors, meta in
// neighbors_meta.cpp, autograd (none) in neighbors_autograd.cpp.

#include "neighbors/neighbors_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/neighbors.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m,
            "ball_query(float min_radius, float max_radius, SymInt sample_num, Tensor xyz, Tensor center_xyz) "
            "-> Tensor");
  define_op(m,
            "stack_ball_query(float max_radius, SymInt sample_num, Tensor xyz, Tensor center_xyz, "
            "Tensor xyz_batch_cnt, Tensor center_xyz_batch_cnt) -> Tensor");
  define_op(m, "knn(SymInt k, Tensor xyz, Tensor? center_xyz=None, bool transposed=False) -> Tensor");
  define_op(m, "three_nn(Tensor target, Tensor source) -> (Tensor dist, Tensor idx)");
}

namespace mmops {
namespace {

template <auto Kernel>
at::Tensor ball_query_entry(double min_radius, double max_radius, c10::SymInt sample_num, const at::Tensor& xyz,
                            const at::Tensor& center_xyz) {
  const BallQueryParams p = detail::check_ball_query(min_radius, max_radius, sample_num, xyz, center_xyz);
  return Kernel(xyz, center_xyz, p);
}

template <auto Kernel>
at::Tensor stack_ball_query_entry(double max_radius, c10::SymInt sample_num, const at::Tensor& xyz,
                                  const at::Tensor& center_xyz, const at::Tensor& xyz_batch_cnt,
                                  const at::Tensor& center_xyz_batch_cnt) {
  const BallQueryParams p =
      detail::check_stack_ball_query(max_radius, sample_num, xyz, center_xyz, xyz_batch_cnt, center_xyz_batch_cnt);
  detail::check_stack_counts(xyz, center_xyz, xyz_batch_cnt, center_xyz_batch_cnt);
  return Kernel(xyz, center_xyz, xyz_batch_cnt, center_xyz_batch_cnt, p);
}

template <auto Kernel>
at::Tensor knn_entry(c10::SymInt k, const at::Tensor& xyz, const std::optional<at::Tensor>& center_xyz,
                     bool transposed) {
  detail::check_knn(k, xyz, center_xyz, transposed);
  // the kernels take [B, N, 3] views (any strides)
  const at::Tensor pts = transposed ? xyz.transpose(1, 2) : xyz;
  const at::Tensor& c = center_xyz.has_value() ? *center_xyz : xyz;
  return Kernel(pts, transposed ? c.transpose(1, 2) : c, k.guard_int(__FILE__, __LINE__));
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor> three_nn_entry(const at::Tensor& target, const at::Tensor& source) {
  detail::check_three_nn(target, source);
  return Kernel(target, source);
}

} // namespace

at::Tensor ball_query(double min_radius, double max_radius, int64_t sample_num, const at::Tensor& xyz,
                      const at::Tensor& center_xyz) {
  static const auto op = detail::op_handle<BallQueryFn>("mmops::ball_query");
  return op.call(min_radius, max_radius, c10::SymInt(sample_num), xyz, center_xyz);
}

at::Tensor stack_ball_query(double max_radius, int64_t sample_num, const at::Tensor& xyz, const at::Tensor& center_xyz,
                            const at::Tensor& xyz_batch_cnt, const at::Tensor& center_xyz_batch_cnt) {
  static const auto op = detail::op_handle<StackBallQueryFn>("mmops::stack_ball_query");
  return op.call(max_radius, c10::SymInt(sample_num), xyz, center_xyz, xyz_batch_cnt, center_xyz_batch_cnt);
}

at::Tensor knn(int64_t k, const at::Tensor& xyz, const std::optional<at::Tensor>& center_xyz, bool transposed) {
  static const auto op = detail::op_handle<KnnFn>("mmops::knn");
  return op.call(c10::SymInt(k), xyz, center_xyz, transposed);
}

std::tuple<at::Tensor, at::Tensor> three_nn(const at::Tensor& target, const at::Tensor& source) {
  static const auto op = detail::op_handle<ThreeNNFn>("mmops::three_nn");
  return op.call(target, source);
}

} // namespace mmops

#define MMOPS_NEIGHBORS_ENTRIES(m, device)                                                 \
  m.impl("ball_query", &ball_query_entry<kernels::ball_query_##device>);                   \
  m.impl("stack_ball_query", &stack_ball_query_entry<kernels::stack_ball_query_##device>); \
  m.impl("knn", &knn_entry<kernels::knn_##device>);                                        \
  m.impl("three_nn", &three_nn_entry<kernels::three_nn_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_NEIGHBORS_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "ball_query", "stack_ball_query", "knn", "three_nn")

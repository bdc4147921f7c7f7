#pragma once
// Internal to the neighbour queries: the validation (neighbors_checks.cpp),
// shared by the device entries (neighbors.cpp) and the meta kernels
// (neighbors_meta.cpp), and the dispatcher signature of each schema.

#include "neighbors/neighbors_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>

#include <optional>
#include <tuple>

namespace mmops {

constexpr const char* kBallQueryOp = "mmops::ball_query: ";
constexpr const char* kStackBallQueryOp = "mmops::stack_ball_query: ";
constexpr const char* kKnnOp = "mmops::knn: ";
constexpr const char* kThreeNNOp = "mmops::three_nn: ";

// The largest sample_num (it bounds the work and the output per centre).
constexpr int64_t kMaxSampleNum = int64_t(1) << 16;

namespace detail {

// Every check below works on real and fake tensors (no data access).

// radii finite, 0 <= min_radius < max_radius; 0 <= sample_num <= kMaxSampleNum;
// xyz [B, N, 3], center_xyz [B, npoint, 3], one floating dtype and device.
BallQueryParams check_ball_query(double min_radius, double max_radius, const c10::SymInt& sample_num,
                                 const at::Tensor& xyz, const at::Tensor& center_xyz);

// max_radius finite and >= 0; xyz [N, 3], center_xyz [M, 3]; the counts 1-D
// int32 or int64 of one length B, on the points' device.
BallQueryParams check_stack_ball_query(double max_radius, const c10::SymInt& sample_num, const at::Tensor& xyz,
                                       const at::Tensor& center_xyz, const at::Tensor& xyz_batch_cnt,
                                       const at::Tensor& center_xyz_batch_cnt);

// The counts' data: >= 0, summing to the stacked sizes (CPU always, CUDA in
// strict mode; see common/index_policy.h).
void check_stack_counts(const at::Tensor& xyz, const at::Tensor& center_xyz, const at::Tensor& xyz_batch_cnt,
                        const at::Tensor& center_xyz_batch_cnt);

// 1 <= k <= 100; xyz and center_xyz [B, N, 3] ([B, 3, N] when transposed).
void check_knn(const c10::SymInt& k, const at::Tensor& xyz, const std::optional<at::Tensor>& center_xyz,
               bool transposed);

// target [B, N, 3], source [B, M, 3], one floating dtype and device.
void check_three_nn(const at::Tensor& target, const at::Tensor& source);

} // namespace detail

// ball_query(float min_radius, float max_radius, SymInt sample_num, Tensor xyz, Tensor center_xyz) -> Tensor
using BallQueryFn = at::Tensor(double, double, c10::SymInt, const at::Tensor&, const at::Tensor&);

// stack_ball_query(float max_radius, SymInt sample_num, Tensor xyz, Tensor center_xyz,
//     Tensor xyz_batch_cnt, Tensor center_xyz_batch_cnt) -> Tensor
using StackBallQueryFn = at::Tensor(double, c10::SymInt, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                    const at::Tensor&);

// knn(SymInt k, Tensor xyz, Tensor? center_xyz=None, bool transposed=False) -> Tensor
using KnnFn = at::Tensor(c10::SymInt, const at::Tensor&, const std::optional<at::Tensor>&, bool);

// three_nn(Tensor target, Tensor source) -> (Tensor dist, Tensor idx)
using ThreeNNFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&);

} // namespace mmops

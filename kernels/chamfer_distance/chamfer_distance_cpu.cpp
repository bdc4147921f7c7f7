// CPU kernels of chamfer_distance: a brute-force scan per query point
// (parallel over batch * points), and a backward in which every point sums
// its own pair and the pairs that chose it (common/index_segments.h), in a
// fixed order: one writer per value, no atomics.

#include "chamfer_distance/chamfer_distance_kernels.h"
#include "chamfer_distance/chamfer_distance_math.h"
#include "common/index_segments.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

namespace mmops {
namespace kernels {
namespace {

using namespace chamfer_distance_math;

constexpr int64_t kGrain = 64;

// dist[b, i], idx[b, i]: the nearest of the nb points b_pts[b] to a_pts[b, i].
template <typename scalar_t>
void nearest_cpu(const scalar_t* a_pts, const scalar_t* b_pts, int64_t batch, int64_t na, int64_t nb, scalar_t* dist,
                 int32_t* idx) {
  using acc_t = at::opmath_type<scalar_t>;
  at::parallel_for(0, batch * na, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t q = begin; q < end; ++q) {
      const scalar_t* others = b_pts + (q / na) * nb * 2;
      const acc_t x = a_pts[2 * q], y = a_pts[2 * q + 1];
      Nearest<acc_t> best{acc_t(0), -1};
      for (int64_t j = 0; j < nb; ++j) {
        best.offer(squared_distance<acc_t>(x, y, others[2 * j], others[2 * j + 1]), static_cast<int32_t>(j));
      }
      dist[q] = static_cast<scalar_t>(best.dist);
      idx[q] = best.index;
    }
  });
}

// The gradient of every point of set a (point_grad), parallel over batch * na.
template <typename scalar_t>
void side_grad_cpu(const scalar_t* a_pts, const scalar_t* b_pts, const int32_t* idx_a, const scalar_t* g_a,
                   const scalar_t* g_b, const IndexSegments& chose_a, int64_t batch, int64_t na, int64_t nb,
                   scalar_t* grad_a) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t* order = chose_a.order.const_data_ptr<int64_t>();
  const int64_t* offsets = chose_a.offsets.const_data_ptr<int64_t>();
  at::parallel_for(0, batch * na, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t q = begin; q < end; ++q) {
      point_grad<acc_t>(q, a_pts, b_pts, idx_a, g_a, g_b, order, offsets, na, nb, grad_a);
    }
  });
}

} // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> chamfer_distance_forward_cpu(
    const at::Tensor& xyz1, const at::Tensor& xyz2, const ChamferDistanceParams& p) {
  const at::Tensor a = xyz1.contiguous(), b = xyz2.contiguous();
  at::Tensor dist1 = at::empty({p.batch, p.n}, a.options()), dist2 = at::empty({p.batch, p.m}, a.options());
  at::Tensor idx1 = at::empty({p.batch, p.n}, a.options().dtype(at::kInt));
  at::Tensor idx2 = at::empty({p.batch, p.m}, a.options().dtype(at::kInt));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "chamfer_distance_forward_cpu", [&] {
    const scalar_t* pa = a.const_data_ptr<scalar_t>();
    const scalar_t* pb = b.const_data_ptr<scalar_t>();
    nearest_cpu(pa, pb, p.batch, p.n, p.m, dist1.mutable_data_ptr<scalar_t>(), idx1.mutable_data_ptr<int32_t>());
    nearest_cpu(pb, pa, p.batch, p.m, p.n, dist2.mutable_data_ptr<scalar_t>(), idx2.mutable_data_ptr<int32_t>());
  });
  return {dist1, dist2, idx1, idx2};
}

std::tuple<at::Tensor, at::Tensor> chamfer_distance_backward_cpu(const at::Tensor& xyz1, const at::Tensor& xyz2,
                                                                 const at::Tensor& idx1, const at::Tensor& idx2,
                                                                 const at::Tensor& grad_dist1,
                                                                 const at::Tensor& grad_dist2,
                                                                 const ChamferDistanceParams& p) {
  const at::Tensor a = xyz1.contiguous(), b = xyz2.contiguous();
  const at::Tensor i1 = idx1.contiguous(), i2 = idx2.contiguous();
  const at::Tensor g1 = grad_dist1.contiguous(), g2 = grad_dist2.contiguous();
  at::Tensor grad1 = at::empty_like(a), grad2 = at::empty_like(b);
  const IndexSegments chose1 = group_by_index(i2, p.n), chose2 = group_by_index(i1, p.m);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "chamfer_distance_backward_cpu", [&] {
    const scalar_t* pa = a.const_data_ptr<scalar_t>();
    const scalar_t* pb = b.const_data_ptr<scalar_t>();
    const scalar_t* pg1 = g1.const_data_ptr<scalar_t>();
    const scalar_t* pg2 = g2.const_data_ptr<scalar_t>();
    side_grad_cpu(pa, pb, i1.const_data_ptr<int32_t>(), pg1, pg2, chose1, p.batch, p.n, p.m,
                  grad1.mutable_data_ptr<scalar_t>());
    side_grad_cpu(pb, pa, i2.const_data_ptr<int32_t>(), pg2, pg1, chose2, p.batch, p.m, p.n,
                  grad2.mutable_data_ptr<scalar_t>());
  });
  return {grad1, grad2};
}

} // namespace kernels
} // namespace mmops

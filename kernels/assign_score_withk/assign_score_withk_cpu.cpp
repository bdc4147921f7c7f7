// CPU kernels of assign_score_withk (assign_score_withk_math.h), parallel over
// pairs (forward, score gradient) or feature rows (feature gradients, summed
// per row over the pairs that chose it: common/index_segments.h). One writer
// per value, a fixed order: deterministic.

#include "assign_score_withk/assign_score_withk_backward.h"
#include "assign_score_withk/assign_score_withk_kernels.h"
#include "assign_score_withk/assign_score_withk_math.h"
#include "common/index_segments.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

namespace mmops {
namespace kernels {
namespace {

using namespace assign_score_withk_math;

// The feature gradients: every value of a [B * N, M, O] row from `grad`.
template <typename acc_t, typename scalar_t, typename index_t, bool kCenter>
void feature_grad_cpu(const scalar_t* grad_t, const scalar_t* scores, const index_t* knn, const IndexSegments& seg,
                      const AssignScoreWithKParams& p, scalar_t* out) {
  const Sizes s = sizes_of(p);
  const int64_t* order = seg.order.const_data_ptr<int64_t>();
  const int64_t* offsets = seg.offsets.const_data_ptr<int64_t>();
  at::parallel_for(0, p.batch * p.points, 1, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      scalar_t* dst = out + row * s.m * s.o;
      for (int64_t m = 0; m < s.m; ++m) {
        for (int64_t o = 0; o < s.o; ++o) {
          const acc_t v = kCenter ? center_grad<acc_t>(grad_t, scores, knn, order, offsets, row, m, o, s)
                                  : point_grad<acc_t>(grad_t, scores, order, offsets, row, m, o, s);
          dst[m * s.o + o] = static_cast<scalar_t>(v);
        }
      }
    }
  });
}

} // namespace

at::Tensor assign_score_withk_forward_cpu(const at::Tensor& scores, const at::Tensor& point_features,
                                          const at::Tensor& center_features, const at::Tensor& knn_idx,
                                          const AssignScoreWithKParams& p) {
  const at::Tensor sc = scores.contiguous(), pts = point_features.contiguous(), ctr = center_features.contiguous();
  const at::Tensor knn = knn_idx.contiguous();
  at::Tensor out = at::empty({p.batch, p.out_dim, p.centers, p.k}, sc.options());
  if (out.numel() == 0) {
    return out;
  }
  const Sizes s = sizes_of(p);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, sc.scalar_type(), "assign_score_withk_forward_cpu", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    AT_DISPATCH_INDEX_TYPES(knn.scalar_type(), "assign_score_withk_forward_cpu", [&] {
      const scalar_t* psc = sc.const_data_ptr<scalar_t>();
      const scalar_t* ppt = pts.const_data_ptr<scalar_t>();
      const scalar_t* pct = ctr.const_data_ptr<scalar_t>();
      const index_t* pk = knn.const_data_ptr<index_t>();
      scalar_t* dst = out.mutable_data_ptr<scalar_t>();
      at::parallel_for(0, p.batch * s.q, 16, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const Pair pair = pair_of(r, s);
          scalar_t* out_q = dst + pair.b * s.o * s.q + (r - pair.b * s.q); // output[b, :, q]
          for (int64_t o = 0; o < s.o; ++o) {
            out_q[o * s.q] = static_cast<scalar_t>(pair_output<acc_t>(psc, ppt, pct, pk, pair, o, s));
          }
        }
      });
    });
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> assign_score_withk_backward_cpu(
    const at::Tensor& grad_output, const at::Tensor& scores, const at::Tensor& point_features,
    const at::Tensor& center_features, const at::Tensor& knn_idx, const AssignScoreWithKParams& p) {
  const AssignScoreWithKBackward b = prepare_backward(grad_output, scores, point_features, center_features, knn_idx, p);
  const Sizes s = sizes_of(p);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, b.scores.scalar_type(), "assign_score_withk_backward_cpu", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        AT_DISPATCH_INDEX_TYPES(b.knn.scalar_type(), "assign_score_withk_backward_cpu", [&] {
          const scalar_t* pg = b.grad_t.const_data_ptr<scalar_t>();
          const scalar_t* psc = b.scores.const_data_ptr<scalar_t>();
          const scalar_t* ppt = b.points.const_data_ptr<scalar_t>();
          const scalar_t* pct = b.centers.const_data_ptr<scalar_t>();
          const index_t* pk = b.knn.const_data_ptr<index_t>();
          scalar_t* gs = b.grad_scores.mutable_data_ptr<scalar_t>();
          at::parallel_for(0, p.batch * s.q, 16, [&](int64_t begin, int64_t end) {
            for (int64_t r = begin; r < end; ++r) {
              const Pair pair = pair_of(r, s);
              for (int64_t m = 0; m < s.m; ++m) {
                gs[r * s.m + m] = static_cast<scalar_t>(score_grad<acc_t>(pg, ppt, pct, pk, pair, m, s));
              }
            }
          });
          feature_grad_cpu<acc_t, scalar_t, index_t, false>(pg, psc, pk, b.by_point, p,
                                                            b.grad_points.mutable_data_ptr<scalar_t>());
          feature_grad_cpu<acc_t, scalar_t, index_t, true>(pg, psc, pk, b.by_center, p,
                                                           b.grad_centers.mutable_data_ptr<scalar_t>());
        });
      });
  return {b.grad_scores, b.grad_points, b.grad_centers};
}

} // namespace kernels
} // namespace mmops

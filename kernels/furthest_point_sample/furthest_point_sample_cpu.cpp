// CPU kernels of furthest_point_sample(_with_dist): at::parallel_for over the
// batch; each sample keeps its points' distances in one buffer and scans it
// once per pick.

#include "furthest_point_sample/furthest_point_sample_kernels.h"
#include "furthest_point_sample/furthest_point_sample_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <vector>

namespace mmops {
namespace kernels {
namespace {

// Picks m indices of n points into out; distance(picked, k) -> acc_t.
template <typename acc_t, typename Distance>
void sample_one(int64_t n, int64_t m, const Distance& distance, std::vector<acc_t>& kept, int32_t* out) {
  kept.assign(n, static_cast<acc_t>(fps_math::kInitialDistance));
  int32_t picked = 0;
  out[0] = picked;
  for (int64_t j = 1; j < m; ++j) {
    acc_t best = kept[0];
    int32_t best_index = -1;
    for (int64_t k = 0; k < n; ++k) {
      kept[k] = fps_math::kept_distance(kept[k], distance(picked, k));
      if (best_index < 0 || kept[k] > best) { // strict: the lowest index wins ties
        best = kept[k];
        best_index = static_cast<int32_t>(k);
      }
    }
    picked = best_index;
    out[j] = picked;
  }
}

// Runs sample_one on every batch element; make_distance(b) gives its distance.
template <typename acc_t, typename MakeDistance>
at::Tensor sample_batches(const at::Tensor& data, int64_t n, int64_t num_points, const MakeDistance& make_distance) {
  const int64_t batch = data.size(0);
  at::Tensor out = at::empty({batch, num_points}, data.options().dtype(at::kInt));
  if (out.numel() == 0) {
    return out;
  }
  int32_t* o = out.mutable_data_ptr<int32_t>();
  at::parallel_for(0, batch, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> kept;
    for (int64_t b = begin; b < end; ++b) {
      sample_one<acc_t>(n, num_points, make_distance(b), kept, o + b * num_points);
    }
  });
  return out;
}

} // namespace

at::Tensor furthest_point_sample_cpu(const at::Tensor& points_xyz, int64_t num_points) {
  const at::Tensor pts = points_xyz.contiguous();
  const int64_t n = pts.size(1);
  at::Tensor out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, pts.scalar_type(), "mmops::furthest_point_sample (CPU)",
                                  [&] {
                                    using acc_t = at::opmath_type<scalar_t>;
                                    const scalar_t* p = pts.const_data_ptr<scalar_t>();
                                    out = sample_batches<acc_t>(pts, n, num_points, [&](int64_t b) {
                                      const scalar_t* q = p + b * n * 3;
                                      return [q](int32_t i, int64_t k) {
                                        const auto c = [q](int64_t at) { return static_cast<acc_t>(q[at]); };
                                        return fps_math::square_distance(c(3 * i), c(3 * i + 1), c(3 * i + 2), c(3 * k),
                                                                         c(3 * k + 1), c(3 * k + 2));
                                      };
                                    });
                                  });
  return out;
}

at::Tensor furthest_point_sample_with_dist_cpu(const at::Tensor& points_dist, int64_t num_points) {
  const at::Tensor dist = points_dist.contiguous();
  const int64_t n = dist.size(1);
  at::Tensor out;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, dist.scalar_type(), "mmops::furthest_point_sample_with_dist (CPU)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* d = dist.const_data_ptr<scalar_t>();
        out = sample_batches<acc_t>(dist, n, num_points, [&](int64_t b) {
          const scalar_t* rows = d + b * n * n;
          return [rows, n](int32_t i, int64_t k) { return static_cast<acc_t>(rows[i * n + k]); };
        });
      });
  return out;
}

} // namespace kernels
} // namespace mmops

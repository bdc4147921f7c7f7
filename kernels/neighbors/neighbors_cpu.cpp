// CPU kernels of the neighbour queries: at::parallel_for over the centres
// (every batch's centres in one range), the points converted to the compute
// type on the fly.

#include "neighbors/neighbors_kernels.h"
#include "neighbors/neighbors_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using neighbors_math::squared_distance;

// Grain of the parallel loops: about 64k distance evaluations per task.
int64_t grain_for(int64_t points) {
  return std::max<int64_t>(1, 65536 / std::max<int64_t>(points, 1));
}

// Writes the ball of centre c (points pts[0, n)) into out[0, S), mmcv's fill:
// found indices in order, the rest repeat the first; `empty` marks none.
template <typename acc_t, typename scalar_t, typename InBall>
int64_t fill_ball(const scalar_t* pts, int64_t n, const scalar_t* c, int64_t samples, int32_t* out, InBall in_ball) {
  const acc_t cx = c[0], cy = c[1], cz = c[2];
  int64_t cnt = 0;
  for (int64_t k = 0; k < n && cnt < samples; ++k) {
    const acc_t d2 = squared_distance<acc_t>(cx, cy, cz, pts[3 * k], pts[3 * k + 1], pts[3 * k + 2]);
    if (in_ball(d2)) {
      out[cnt++] = static_cast<int32_t>(k);
    }
  }
  std::fill(out + std::min(cnt, samples), out + samples, cnt > 0 ? out[0] : 0);
  return cnt;
}

} // namespace

at::Tensor ball_query_cpu(const at::Tensor& xyz, const at::Tensor& center_xyz, const BallQueryParams& p) {
  const at::Tensor pts = xyz.contiguous();
  const at::Tensor ctr = center_xyz.contiguous();
  const int64_t b = pts.size(0), n = pts.size(1), m = ctr.size(1), s = p.sample_num;
  at::Tensor out = at::empty({b, m, s}, pts.options().dtype(at::kInt));
  if (out.numel() == 0) {
    return out;
  }
  int32_t* o = out.mutable_data_ptr<int32_t>();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, pts.scalar_type(), "mmops::ball_query (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const acc_t rmin = static_cast<acc_t>(p.min_radius), rmax = static_cast<acc_t>(p.max_radius);
    const acc_t min2 = rmin * rmin, max2 = rmax * rmax;
    const scalar_t* x = pts.const_data_ptr<scalar_t>();
    const scalar_t* c = ctr.const_data_ptr<scalar_t>();
    at::parallel_for(0, b * m, grain_for(n), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        fill_ball<acc_t>(x + (i / m) * n * 3, n, c + 3 * i, s, o + i * s,
                         [&](acc_t d2) { return neighbors_math::in_ball(d2, min2, max2); });
      }
    });
  });
  return out;
}

at::Tensor stack_ball_query_cpu(const at::Tensor& xyz, const at::Tensor& center_xyz, const at::Tensor& xyz_batch_cnt,
                                const at::Tensor& center_xyz_batch_cnt, const BallQueryParams& p) {
  const at::Tensor pts = xyz.contiguous();
  const at::Tensor ctr = center_xyz.contiguous();
  const int64_t m = ctr.size(0), s = p.sample_num, batches = xyz_batch_cnt.size(0), total = pts.size(0);
  at::Tensor out = at::empty({m, s}, pts.options().dtype(at::kInt));
  if (out.numel() == 0) {
    return out;
  }
  // Inclusive prefix sums of the (validated) counts.
  const at::Tensor pcnt = xyz_batch_cnt.to(at::kLong).contiguous().cumsum(0);
  const at::Tensor ccnt = center_xyz_batch_cnt.to(at::kLong).contiguous().cumsum(0);
  const int64_t* xyz_ends = pcnt.const_data_ptr<int64_t>();
  const int64_t* center_ends = ccnt.const_data_ptr<int64_t>();
  int32_t* o = out.mutable_data_ptr<int32_t>();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, pts.scalar_type(), "mmops::stack_ball_query (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const acc_t rmax = static_cast<acc_t>(p.max_radius);
    const acc_t max2 = rmax * rmax;
    const scalar_t* x = pts.const_data_ptr<scalar_t>();
    const scalar_t* c = ctr.const_data_ptr<scalar_t>();
    at::parallel_for(0, m, grain_for(total / std::max<int64_t>(batches, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t bi = neighbors_math::batch_of(i, center_ends, batches);
        const auto seg = neighbors_math::segment_of(bi, xyz_ends, batches, total);
        if (fill_ball<acc_t>(x + 3 * seg.start, seg.count, c + 3 * i, s, o + i * s,
                             [&](acc_t d2) { return d2 < max2; }) == 0) {
          o[i * s] = -1;
        }
      }
    });
  });
  return out;
}

namespace {

// The nearest of every centre into idx (slot j of centre i at idx_of(i, j))
// and, when given, sqrt of the distance into dist (same offsets).
template <typename scalar_t, typename Offset>
void nearest_cpu(const at::Tensor& pts, const at::Tensor& ctr, int64_t k, int32_t* idx, scalar_t* dist, Offset offset) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t b = pts.size(0), n = pts.size(1), m = ctr.size(1);
  const scalar_t* x = pts.const_data_ptr<scalar_t>();
  const scalar_t* c = ctr.const_data_ptr<scalar_t>();
  neighbors_math::with_capacity(k, [&](auto capacity) {
    constexpr int KMAX = decltype(capacity)::value;
    at::parallel_for(0, b * m, grain_for(n), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const scalar_t* px = x + (i / m) * n * 3;
        const acc_t cx = c[3 * i], cy = c[3 * i + 1], cz = c[3 * i + 2];
        neighbors_math::NearestList<KMAX, acc_t> list(static_cast<int>(k));
        for (int64_t j = 0; j < n; ++j) {
          list.offer(squared_distance<acc_t>(cx, cy, cz, px[3 * j], px[3 * j + 1], px[3 * j + 2]), static_cast<int>(j));
        }
        for (int64_t j = 0; j < k; ++j) {
          const bool found = j < list.count;
          idx[offset(i, j)] = found ? list.idx[j] : 0;
          if (dist != nullptr) {
            dist[offset(i, j)] = static_cast<scalar_t>(found ? host_device_math::sqrt_of(list.dist[j])
                                                             : std::numeric_limits<acc_t>::infinity());
          }
        }
      }
    });
  });
}

} // namespace

at::Tensor knn_cpu(const at::Tensor& xyz, const at::Tensor& center_xyz, int64_t k) {
  const at::Tensor pts = xyz.contiguous();
  const at::Tensor ctr = center_xyz.contiguous();
  const int64_t b = ctr.size(0), m = ctr.size(1);
  at::Tensor out = at::empty({b, k, m}, pts.options().dtype(at::kInt));
  if (out.numel() == 0) {
    return out;
  }
  int32_t* o = out.mutable_data_ptr<int32_t>();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, pts.scalar_type(), "mmops::knn (CPU)", [&] {
    nearest_cpu<scalar_t>(pts, ctr, k, o, static_cast<scalar_t*>(nullptr),
                          [&](int64_t i, int64_t j) { return ((i / m) * k + j) * m + i % m; });
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor> three_nn_cpu(const at::Tensor& target, const at::Tensor& source) {
  const at::Tensor tgt = target.contiguous();
  const at::Tensor src = source.contiguous();
  const int64_t b = tgt.size(0), n = tgt.size(1);
  at::Tensor dist = at::empty({b, n, 3}, tgt.options());
  at::Tensor idx = at::empty({b, n, 3}, tgt.options().dtype(at::kInt));
  if (idx.numel() == 0) {
    return {dist, idx};
  }
  int32_t* o = idx.mutable_data_ptr<int32_t>();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, tgt.scalar_type(), "mmops::three_nn (CPU)", [&] {
    nearest_cpu<scalar_t>(src, tgt, 3, o, dist.mutable_data_ptr<scalar_t>(),
                          [](int64_t i, int64_t j) { return i * 3 + j; });
  });
  return {dist, idx};
}

} // namespace kernels
} // namespace mmops

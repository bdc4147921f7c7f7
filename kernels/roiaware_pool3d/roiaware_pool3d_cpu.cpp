// CPU kernels of roiaware_pool3d. Forward: at::parallel_for over the rois;
// each assigns its points to voxels in index order (keeping at most max_kept a
// voxel), lists them per voxel (counting sort, order kept) and pools.
// Backward: at::parallel_for over the points, a gather over the rois.

#include "roiaware_pool3d/roiaware_pool3d_kernels.h"
#include "roiaware_pool3d/roiaware_pool3d_math.h"

#include "common/box3d.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <tuple>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

// Assigns the points to the voxels of one roi: voxel_of_point[p] (-1: not
// kept), counts[v]; returns the kept points grouped by voxel (point order
// within a voxel) and the start of each voxel's group in `starts`.
template <typename scalar_t, typename acc_t>
std::vector<int32_t> assign_points(const box3d::Box3d<acc_t>& box, const scalar_t* pts, int64_t num_points,
                                   const RoIAwarePool3dParams& p, int32_t* voxel_of_point, int32_t* counts,
                                   std::vector<int64_t>& starts) {
  const int64_t voxels = p.out_x * p.out_y * p.out_z;
  for (int64_t i = 0; i < num_points; ++i) {
    const acc_t px = static_cast<acc_t>(pts[3 * i]), py = static_cast<acc_t>(pts[3 * i + 1]);
    const acc_t pz = static_cast<acc_t>(pts[3 * i + 2]);
    acc_t lx = 0, ly = 0;
    voxel_of_point[i] = -1;
    if (box.contains(px, py, pz, lx, ly)) {
      const int64_t v = roiaware_pool3d_math::voxel_of(box, lx, ly, pz, p);
      if (counts[v] < p.max_kept) {
        ++counts[v];
        voxel_of_point[i] = static_cast<int32_t>(v);
      }
    }
  }
  starts.assign(static_cast<size_t>(voxels) + 1, 0);
  for (int64_t v = 0; v < voxels; ++v) {
    starts[v + 1] = starts[v] + counts[v];
  }
  std::vector<int32_t> grouped(static_cast<size_t>(starts[voxels]));
  std::vector<int64_t> next(starts.begin(), starts.end() - 1);
  for (int64_t i = 0; i < num_points; ++i) {
    if (voxel_of_point[i] >= 0) {
      grouped[next[voxel_of_point[i]]++] = static_cast<int32_t>(i);
    }
  }
  return grouped;
}

} // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> roiaware_pool3d_outputs(int64_t num_rois,
                                                                                   const at::Tensor& pts_feature,
                                                                                   const RoIAwarePool3dParams& p,
                                                                                   bool zero_counts) {
  const int64_t c = pts_feature.size(1);
  const auto ints = pts_feature.options().dtype(at::kInt);
  const bool is_max = p.mode == RoIAwarePoolMode::kMax;
  return {at::empty({num_rois, p.out_x, p.out_y, p.out_z, c}, pts_feature.options()),
          is_max ? at::empty({num_rois, p.out_x, p.out_y, p.out_z, c}, ints) : at::empty({0}, ints),
          at::empty({num_rois, pts_feature.size(0)}, ints),
          zero_counts ? at::zeros({num_rois, p.out_x * p.out_y * p.out_z}, ints)
                      : at::empty({num_rois, p.out_x * p.out_y * p.out_z}, ints)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> roiaware_pool3d_forward_cpu(const at::Tensor& rois,
                                                                                       const at::Tensor& pts,
                                                                                       const at::Tensor& pts_feature,
                                                                                       const RoIAwarePool3dParams& p) {
  const at::Tensor boxes = rois.contiguous();
  const at::Tensor points = pts.contiguous();
  const at::Tensor feats = pts_feature.contiguous();
  const int64_t n = boxes.size(0), num_points = points.size(0), c = feats.size(1);
  const int64_t voxels = p.out_x * p.out_y * p.out_z;
  const bool is_max = p.mode == RoIAwarePoolMode::kMax;
  at::Tensor pooled, argmax, point_voxels, counts; // captured by the dispatch lambda below
  std::tie(pooled, argmax, point_voxels, counts) = roiaware_pool3d_outputs(n, feats, p);
  if (n == 0) {
    return {pooled, argmax, point_voxels, counts};
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, feats.scalar_type(), "mmops::roiaware_pool3d (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* pt = points.const_data_ptr<scalar_t>();
    const scalar_t* f = feats.const_data_ptr<scalar_t>();
    const scalar_t* bx = boxes.const_data_ptr<scalar_t>();
    scalar_t* out = pooled.mutable_data_ptr<scalar_t>();
    int32_t* am = is_max ? argmax.mutable_data_ptr<int32_t>() : nullptr;
    int32_t* pv = point_voxels.mutable_data_ptr<int32_t>();
    int32_t* cnt = counts.mutable_data_ptr<int32_t>();
    at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> starts;
      for (int64_t r = begin; r < end; ++r) {
        const auto box = box3d::Box3d<acc_t>::load(bx + 7 * r);
        const std::vector<int32_t> grouped =
            assign_points(box, pt, num_points, p, pv + r * num_points, cnt + r * voxels, starts);
        for (int64_t v = 0; v < voxels; ++v) {
          for (int64_t ch = 0; ch < c; ++ch) {
            roiaware_pool3d_math::pool_voxel<scalar_t, acc_t>(f, grouped.data(), starts[v], starts[v + 1], ch, c,
                                                              is_max, (r * voxels + v) * c + ch, out, am);
          }
        }
      }
    });
  });
  return {pooled, argmax, point_voxels, counts};
}

at::Tensor roiaware_pool3d_backward_cpu(const at::Tensor& grad_out, const at::Tensor& argmax,
                                        const at::Tensor& point_voxels, const at::Tensor& voxel_counts,
                                        const RoIAwarePool3dParams& p) {
  const at::Tensor grad = grad_out.contiguous();
  const at::Tensor am = argmax.contiguous();
  const at::Tensor pv = point_voxels.contiguous();
  const at::Tensor counts = voxel_counts.contiguous();
  const int64_t n = pv.size(0), num_points = pv.size(1), c = grad.size(4);
  const int64_t voxels = p.out_x * p.out_y * p.out_z;
  at::Tensor grad_in = at::empty({num_points, c}, grad.options());
  if (grad_in.numel() == 0) {
    return grad_in;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad.scalar_type(), "mmops::roiaware_pool3d backward (CPU)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* g = grad.const_data_ptr<scalar_t>();
        const int32_t* a = p.mode == RoIAwarePoolMode::kMax ? am.const_data_ptr<int32_t>() : nullptr;
        const int32_t* v = pv.const_data_ptr<int32_t>();
        const int32_t* k = counts.const_data_ptr<int32_t>();
        scalar_t* gi = grad_in.mutable_data_ptr<scalar_t>();
        const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(n * c, 1));
        at::parallel_for(0, num_points, grain, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            for (int64_t ch = 0; ch < c; ++ch) {
              gi[i * c + ch] = static_cast<scalar_t>(roiaware_pool3d_math::point_gradient<scalar_t, acc_t>(
                  i, ch, n, num_points, voxels, c, g, a, v, k, p.mode));
            }
          }
        });
      });
  return grad_in;
}

} // namespace kernels
} // namespace mmops

// CPU kernel of points_in_polygons: at::parallel_for over the points, the
// polygons converted to the compute type once.

#include "points_in_polygons/points_in_polygons_kernels.h"
#include "points_in_polygons/points_in_polygons_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <vector>

namespace mmops {
namespace kernels {

at::Tensor points_in_polygons_cpu(const at::Tensor& points, const at::Tensor& polygons) {
  const at::Tensor pts = points.contiguous();
  const at::Tensor polys = polygons.contiguous();
  const int64_t n = pts.size(0);
  const int64_t m = polys.size(0);
  at::Tensor out = at::empty({n, m}, pts.options());
  if (out.numel() == 0) {
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, pts.scalar_type(), "mmops::points_in_polygons (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* p = pts.const_data_ptr<scalar_t>();
    const scalar_t* q = polys.const_data_ptr<scalar_t>();
    std::vector<acc_t> quads(static_cast<size_t>(m) * 8);
    for (int64_t k = 0; k < m * 8; ++k) {
      quads[k] = static_cast<acc_t>(q[k]);
    }
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    const int64_t grain = std::max<int64_t>(1, 16384 / m);
    at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const acc_t px = static_cast<acc_t>(p[2 * i]);
        const acc_t py = static_cast<acc_t>(p[2 * i + 1]);
        for (int64_t j = 0; j < m; ++j) {
          o[i * m + j] = static_cast<scalar_t>(points_in_polygons_math::point_in_quad(px, py, &quads[j * 8]));
        }
      }
    });
  });
  return out;
}

} // namespace kernels
} // namespace mmops

// CPU kernel of min_area_polygons: at::parallel_for over the point sets.

#include "min_area_polygons/min_area_polygons_kernels.h"
#include "min_area_polygons/min_area_polygons_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

namespace mmops {
namespace kernels {

at::Tensor min_area_polygons_cpu(const at::Tensor& pointsets) {
  const at::Tensor p = pointsets.contiguous();
  const int64_t n = p.size(0);
  at::Tensor out = at::empty({n, 8}, p.options());
  if (n == 0) {
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.scalar_type(), "mmops::min_area_polygons (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* in = p.const_data_ptr<scalar_t>();
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, n, 512, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        polygon::Point<acc_t> pts[min_area_polygons_math::kPoints];
        for (int k = 0; k < min_area_polygons_math::kPoints; ++k) {
          pts[k] = {static_cast<acc_t>(in[i * 18 + 2 * k]), static_cast<acc_t>(in[i * 18 + 2 * k + 1])};
        }
        acc_t corners[8];
        min_area_polygons_math::min_area_rect(pts, corners);
        for (int k = 0; k < 8; ++k) {
          o[i * 8 + k] = static_cast<scalar_t>(corners[k]);
        }
      }
    });
  });
  return out;
}

} // namespace kernels
} // namespace mmops

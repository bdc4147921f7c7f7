// CPU kernels of carafe: every pass is a gather (each value written once, no
// atomics, deterministic), parallel over the channel planes it writes.

#include "carafe/carafe_kernels.h"
#include "carafe/carafe_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

namespace mmops {
namespace kernels {
namespace {

using carafe_math::Geometry;

Geometry geometry_of(const at::Tensor& features, const CarafeParams& p) {
  return carafe_math::make_geometry(features.size(2), features.size(3), p.kernel_size, p.scale_factor);
}

template <typename scalar_t>
void forward_kernel(const at::Tensor& features, const at::Tensor& masks, at::Tensor& output, const CarafeParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const Geometry g = geometry_of(features, p);
  const int64_t channels = features.size(1), mask_channels = masks.size(1);
  const int64_t per_group = channels / p.group_size, in_plane = g.height * g.width, plane = g.out_plane();
  const scalar_t* feat = features.const_data_ptr<scalar_t>();
  const scalar_t* mask = masks.const_data_ptr<scalar_t>();
  scalar_t* out = output.mutable_data_ptr<scalar_t>();
  at::parallel_for(0, features.size(0) * channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nc = begin; nc < end; ++nc) {
      const int64_t n = nc / channels, group = nc % channels / per_group;
      const scalar_t* f = feat + nc * in_plane;
      const scalar_t* m = mask + (n * mask_channels + group * g.taps()) * plane;
      scalar_t* o = out + nc * plane;
      for (int64_t ho = 0; ho < g.out_height; ++ho) {
        for (int64_t wo = 0; wo < g.out_width; ++wo) {
          const int64_t q = ho * g.out_width + wo;
          o[q] = static_cast<scalar_t>(carafe_math::output_at<acc_t>(f, m + q, plane, g, ho, wo));
        }
      }
    }
  });
}

template <typename scalar_t>
void backward_kernel(const at::Tensor& grad_output, const at::Tensor& features, const at::Tensor& masks,
                     at::Tensor& grad_features, at::Tensor& grad_masks, const CarafeParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const Geometry g = geometry_of(features, p);
  const int64_t batch = features.size(0), channels = features.size(1), mask_channels = masks.size(1);
  const int64_t per_group = channels / p.group_size, in_plane = g.height * g.width, plane = g.out_plane();
  const scalar_t* go = grad_output.const_data_ptr<scalar_t>();
  const scalar_t* feat = features.const_data_ptr<scalar_t>();
  const scalar_t* mask = masks.const_data_ptr<scalar_t>();
  scalar_t* gf = grad_features.mutable_data_ptr<scalar_t>();
  scalar_t* gm = grad_masks.mutable_data_ptr<scalar_t>();
  at::parallel_for(0, batch * channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nc = begin; nc < end; ++nc) {
      const int64_t n = nc / channels, group = nc % channels / per_group;
      const scalar_t* m = mask + (n * mask_channels + group * g.taps()) * plane;
      for (int64_t h = 0; h < g.height; ++h) {
        for (int64_t w = 0; w < g.width; ++w) {
          gf[nc * in_plane + h * g.width + w] =
              static_cast<scalar_t>(carafe_math::grad_feature_at<acc_t>(go + nc * plane, m, g, h, w));
        }
      }
    }
  });
  at::parallel_for(0, batch * mask_channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nm = begin; nm < end; ++nm) {
      const int64_t n = nm / mask_channels, group = nm % mask_channels / g.taps(), tap = nm % g.taps();
      const int64_t c0 = n * channels + group * per_group;
      for (int64_t ho = 0; ho < g.out_height; ++ho) {
        for (int64_t wo = 0; wo < g.out_width; ++wo) {
          gm[nm * plane + ho * g.out_width + wo] = static_cast<scalar_t>(
              carafe_math::grad_mask_at<acc_t>(go + c0 * plane, feat + c0 * in_plane, per_group, g, tap, ho, wo));
        }
      }
    }
  });
}

} // namespace

at::Tensor carafe_forward_cpu(const at::Tensor& features_, const at::Tensor& masks_, const CarafeParams& params) {
  const at::Tensor features = features_.contiguous();
  const at::Tensor masks = masks_.contiguous();
  at::Tensor output = at::empty({features.size(0), features.size(1), masks.size(2), masks.size(3)}, features.options());
  if (output.numel() == 0) {
    return output;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, features.scalar_type(), "mmops::carafe (CPU)",
                                  [&] { forward_kernel<scalar_t>(features, masks, output, params); });
  return output;
}

std::tuple<at::Tensor, at::Tensor> carafe_backward_cpu(const at::Tensor& grad_output_, const at::Tensor& features_,
                                                       const at::Tensor& masks_, const CarafeParams& params) {
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::Tensor features = features_.contiguous();
  const at::Tensor masks = masks_.contiguous();
  at::Tensor grad_features = at::empty(features.sizes(), features.options());
  at::Tensor grad_masks = at::empty(masks.sizes(), masks.options());
  if (grad_features.numel() == 0 || grad_masks.numel() == 0) {
    // no channels (or no pixels): nothing reads or is read
    return {grad_features.zero_(), grad_masks.zero_()};
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, features.scalar_type(), "mmops::carafe backward (CPU)",
      [&] { backward_kernel<scalar_t>(grad_output, features, masks, grad_features, grad_masks, params); });
  return {grad_features, grad_masks};
}

} // namespace kernels
} // namespace mmops

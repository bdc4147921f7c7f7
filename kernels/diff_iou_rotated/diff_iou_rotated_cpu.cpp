// CPU kernels of diff_iou_rotated_2d / _3d: at::parallel_for over the pairs.

#include "diff_iou_rotated/diff_iou_rotated_kernels.h"
#include "diff_iou_rotated/diff_iou_rotated_math.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

namespace mmops {
namespace kernels {
namespace {

constexpr int64_t kGrain = 1024; // pairs per task (a pair is ~1 us of geometry)

template <int D, typename scalar_t>
void forward_pairs(const scalar_t* b1, const scalar_t* b2, int64_t pairs, scalar_t* out) {
  using acc_t = at::opmath_type<scalar_t>;
  at::parallel_for(0, pairs, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      out[i] = static_cast<scalar_t>(
          diff_iou_rotated_math::pair_iou<D, scalar_t, acc_t>(b1 + i * D, b2 + i * D, acc_t(0), nullptr, nullptr));
    }
  });
}

template <int D, typename scalar_t>
void backward_pairs(const scalar_t* grad, const scalar_t* b1, const scalar_t* b2, int64_t pairs, scalar_t* g1,
                    scalar_t* g2) {
  using acc_t = at::opmath_type<scalar_t>;
  at::parallel_for(0, pairs, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      acc_t ga[D], gb[D];
      diff_iou_rotated_math::pair_iou<D, scalar_t, acc_t>(b1 + i * D, b2 + i * D, static_cast<acc_t>(grad[i]), ga, gb);
      for (int k = 0; k < D; ++k) {
        g1[i * D + k] = static_cast<scalar_t>(ga[k]);
        g2[i * D + k] = static_cast<scalar_t>(gb[k]);
      }
    }
  });
}

} // namespace

at::Tensor diff_iou_rotated_forward_cpu(const at::Tensor& box1, const at::Tensor& box2, const DiffIouRotatedParams& p) {
  const at::Tensor a = box1.contiguous();
  const at::Tensor b = box2.contiguous();
  at::Tensor out = at::empty({box1.size(0), box1.size(1)}, box1.options());
  const int64_t pairs = out.numel();
  if (pairs == 0) {
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "mmops::diff_iou_rotated (CPU)", [&] {
    const scalar_t* pa = a.const_data_ptr<scalar_t>();
    const scalar_t* pb = b.const_data_ptr<scalar_t>();
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    if (p.columns == 7) {
      forward_pairs<7>(pa, pb, pairs, o);
    } else {
      forward_pairs<5>(pa, pb, pairs, o);
    }
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor> diff_iou_rotated_backward_cpu(const at::Tensor& grad_output, const at::Tensor& box1,
                                                                 const at::Tensor& box2,
                                                                 const DiffIouRotatedParams& p) {
  const at::Tensor g = grad_output.contiguous();
  const at::Tensor a = box1.contiguous();
  const at::Tensor b = box2.contiguous();
  at::Tensor g1 = at::empty(box1.sizes(), box1.options());
  at::Tensor g2 = at::empty(box2.sizes(), box2.options());
  const int64_t pairs = g.numel();
  if (pairs == 0) {
    return {g1, g2};
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "mmops::diff_iou_rotated backward (CPU)",
                                  [&] {
                                    const scalar_t* pg = g.const_data_ptr<scalar_t>();
                                    const scalar_t* pa = a.const_data_ptr<scalar_t>();
                                    const scalar_t* pb = b.const_data_ptr<scalar_t>();
                                    scalar_t* o1 = g1.mutable_data_ptr<scalar_t>();
                                    scalar_t* o2 = g2.mutable_data_ptr<scalar_t>();
                                    if (p.columns == 7) {
                                      backward_pairs<7>(pg, pa, pb, pairs, o1, o2);
                                    } else {
                                      backward_pairs<5>(pg, pa, pb, pairs, o1, o2);
                                    }
                                  });
  return {g1, g2};
}

} // namespace kernels
} // namespace mmops

// CPU kernels of border_align (border_align_math.h).
//
// Forward: parallel over (image, chunk of boxes). A chunk's sample taps (the
// neighbours and weights of every point of its boxes' four borders) are
// computed once into a table and applied to every channel, plane by plane, so
// the per-point arithmetic is shared by the C channels and a plane's reads stay
// in the small region the chunk's boxes cover. Backward: parallel over (image,
// channel): a task owns the four gradient planes of its channel (one per
// border) and adds its outputs' gradients in box order: no atomics,
// deterministic, the same result for any thread count.

#include "border_align/border_align_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using namespace border_align_math;

// Boxes per forward task: up to 16, fewer when pool_size makes the tap table large.
int64_t chunk_boxes(int64_t pool_size) {
  const int64_t per_box = kBorders * (pool_size + 1);
  return std::clamp<int64_t>(4096 / per_box, 1, 16);
}

template <typename scalar_t>
void forward_impl(const at::Tensor& input, const at::Tensor& boxes, at::Tensor& output, int32_t* argmax,
                  const BorderAlignParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* in = input.const_data_ptr<scalar_t>();
  const scalar_t* bx = boxes.const_data_ptr<scalar_t>();
  scalar_t* out = output.mutable_data_ptr<scalar_t>();
  const int64_t plane = p.height * p.width;
  const int64_t points = p.pool_size + 1;
  const int64_t chunk = chunk_boxes(p.pool_size);
  const int64_t chunks = (p.boxes + chunk - 1) / chunk;
  at::parallel_for(0, p.batch * chunks, 1, [&](int64_t begin, int64_t end) {
    std::vector<Taps<acc_t>> table(static_cast<size_t>(chunk * kBorders * points));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / chunks;
      const int64_t k0 = (item % chunks) * chunk;
      const int64_t nk = std::min(chunk, p.boxes - k0);
      // taps of point i of border g of box k0 + kl at table[(kl * 4 + g) * points + i]
      for (int64_t kl = 0; kl < nk; ++kl) {
        const scalar_t* box = bx + (n * p.boxes + k0 + kl) * 4;
        const acc_t x1 = box[0], y1 = box[1], x2 = box[2], y2 = box[3];
        for (int g = 0; g < kBorders; ++g) {
          Walk<acc_t> w = border_walk(x1, y1, x2, y2, g, p.pool_size);
          Taps<acc_t>* row = table.data() + (kl * kBorders + g) * points;
          for (int64_t i = 0; i < points; ++i) {
            if (i > 0) {
              advance(w);
            }
            row[i] = taps_at(w.y, w.x, p.height, p.width);
          }
        }
      }
      for (int64_t c = 0; c < p.channels; ++c) {
        const int64_t o0 = ((n * p.channels + c) * p.boxes + k0) * kBorders;
        for (int g = 0; g < kBorders; ++g) {
          const scalar_t* src = in + ((n * kBorders + g) * p.channels + c) * plane;
          for (int64_t kl = 0; kl < nk; ++kl) {
            const Taps<acc_t>* row = table.data() + (kl * kBorders + g) * points;
            MaxTracker<acc_t> best;
            for (int64_t i = 0; i < points; ++i) {
              best.update(blend(row[i], src), static_cast<int>(i));
            }
            const int64_t o = o0 + kl * kBorders + g;
            out[o] = static_cast<scalar_t>(best.result());
            if (argmax != nullptr) {
              argmax[o] = best.index;
            }
          }
        }
      }
    }
  });
}

template <typename scalar_t>
void backward_impl(const at::Tensor& grad_output, const at::Tensor& boxes, const at::Tensor& argmax, at::Tensor& grad,
                   const BorderAlignParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* go = grad_output.const_data_ptr<scalar_t>();
  const scalar_t* bx = boxes.const_data_ptr<scalar_t>();
  const int32_t* am = argmax.const_data_ptr<int32_t>();
  acc_t* dst = grad.mutable_data_ptr<acc_t>();
  const int64_t plane = p.height * p.width;
  at::parallel_for(0, p.batch * p.channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nc = begin; nc < end; ++nc) {
      const int64_t n = nc / p.channels, c = nc % p.channels;
      for (int g = 0; g < kBorders; ++g) {
        acc_t* target = dst + ((n * kBorders + g) * p.channels + c) * plane;
        for (int64_t k = 0; k < p.boxes; ++k) {
          const int64_t o = (nc * p.boxes + k) * kBorders + g;
          const int32_t i = am[o];
          if (i < 0 || i > p.pool_size) {
            continue;
          }
          const scalar_t* box = bx + (n * p.boxes + k) * 4;
          const Walk<acc_t> w = walk_to(border_walk<acc_t>(box[0], box[1], box[2], box[3], g, p.pool_size), i);
          const Taps<acc_t> t = taps_at(w.y, w.x, p.height, p.width);
          if (!t.valid) {
            continue;
          }
          const acc_t value = static_cast<acc_t>(go[o]);
          for (int j = 0; j < 4; ++j) {
            target[t.c.offset[j]] += value * t.c.weight[j];
          }
        }
      }
    }
  });
}

} // namespace

std::tuple<at::Tensor, at::Tensor> border_align_forward_cpu(const at::Tensor& input_, const at::Tensor& boxes_,
                                                            const BorderAlignParams& p, bool with_argmax) {
  const at::Tensor input = input_.contiguous();
  const at::Tensor boxes = boxes_.contiguous();
  at::Tensor output = at::empty({p.batch, p.channels, p.boxes, kBorders}, input.options());
  at::Tensor argmax = at::empty(with_argmax ? output.sizes() : at::IntArrayRef{0}, input.options().dtype(at::kInt));
  if (output.numel() == 0) {
    return {output, argmax};
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "mmops::border_align (CPU)", [&] {
    forward_impl<scalar_t>(input, boxes, output, with_argmax ? argmax.mutable_data_ptr<int32_t>() : nullptr, p);
  });
  return {output, argmax};
}

at::Tensor border_align_backward_cpu(const at::Tensor& grad_output_, const at::Tensor& boxes_,
                                     const at::Tensor& argmax_, const BorderAlignParams& p) {
  const at::Tensor grad_output = grad_output_.contiguous();
  const at::ScalarType dtype = grad_output.scalar_type();
  const bool reduced = dtype == at::kHalf || dtype == at::kBFloat16;
  // half / bfloat16 sum in float, converted once at the end
  at::Tensor grad = at::zeros({p.batch, kBorders * p.channels, p.height, p.width},
                              grad_output.options().dtype(reduced ? at::kFloat : dtype));
  if (grad_output.numel() == 0 || grad.numel() == 0) {
    return reduced ? grad.to(dtype) : grad;
  }
  const at::Tensor boxes = boxes_.contiguous();
  const at::Tensor argmax = argmax_.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mmops::border_align backward (CPU)",
                                  [&] { backward_impl<scalar_t>(grad_output, boxes, argmax, grad, p); });
  return reduced ? grad.to(dtype) : grad;
}

} // namespace kernels
} // namespace mmops

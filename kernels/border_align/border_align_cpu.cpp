// CPU kernels of border_align (border_align_math.h).
//
// Forward: over a channels-last copy of the input ([N, H, W, 4C]; none when the
// input already is channels-last), parallel over (image, chunk of boxes). For
// each box and border the walk and the taps of a point are computed once and
// applied to all C channels in one contiguous loop: the four taps are contiguous
// channel vectors, and the running maximum with its argmax is a branch-free
// select per channel, so the compiler vectorises the loop. Results go to a
// per-task buffer [box][border][C], written out channel by channel as runs of
// the [N, C, H * W, 4] output. The arithmetic per value is the CUDA kernels'
// (products rounded once, added in order): bitwise the same results.
// Backward: parallel over (image, chunk of up to 16 channels): a task owns the
// gradient planes of its channels (four each, one per border); per chunk of
// boxes it computes the taps of the points its winners need once (walking as
// the forward) and adds each output's gradient at its winning point's taps,
// boxes in order: no atomics, deterministic, the same result for any thread
// count.

#include "border_align/border_align_kernels.h"
#include "common/layout.h"

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

constexpr int64_t kChunkBoxes = 16; // boxes per forward task

// The value of every channel at the taps of one point (w0 * p0[c] + ... + w3 *
// p3[c], products rounded once, added in order; 0 outside the map) into
// value[0, C). Vectorised over channels.
template <typename scalar_t, typename acc_t>
void point_values(const Taps<acc_t>& t, const scalar_t* __restrict__ pixels, int64_t pixel_stride, int64_t channels,
                  acc_t* __restrict__ value) {
  if (!t.valid) {
    std::fill(value, value + channels, acc_t(0));
    return;
  }
  const scalar_t* __restrict__ p0 = pixels + t.c.offset[0] * pixel_stride;
  const scalar_t* __restrict__ p1 = pixels + t.c.offset[1] * pixel_stride;
  const scalar_t* __restrict__ p2 = pixels + t.c.offset[2] * pixel_stride;
  const scalar_t* __restrict__ p3 = pixels + t.c.offset[3] * pixel_stride;
  const acc_t w0 = t.c.weight[0], w1 = t.c.weight[1], w2 = t.c.weight[2], w3 = t.c.weight[3];
  for (int64_t c = 0; c < channels; ++c) {
    acc_t v = mul_rn(w0, static_cast<acc_t>(p0[c]));
    v += mul_rn(w1, static_cast<acc_t>(p1[c]));
    v += mul_rn(w2, static_cast<acc_t>(p2[c]));
    v += mul_rn(w3, static_cast<acc_t>(p3[c]));
    value[c] = v;
  }
}

// Point i's values into every channel's running maximum: MaxTracker's rule (a
// larger value, or a NaN over a number), branch-free, vectorised over channels.
template <typename acc_t>
void max_step(const acc_t* __restrict__ value, acc_t* __restrict__ best, int32_t* __restrict__ index, int32_t i,
              int64_t channels) {
  for (int64_t c = 0; c < channels; ++c) {
    const acc_t v = value[c];
    const acc_t b = best[c];
    const bool take = (v > b) | ((v != v) & (b == b));
    best[c] = take ? v : b;
    index[c] = take ? i : index[c];
  }
}

template <typename scalar_t>
void forward_impl(const at::Tensor& input, const at::Tensor& boxes, at::Tensor& output, int32_t* argmax,
                  const BorderAlignParams& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* in = input.const_data_ptr<scalar_t>(); // channels-last
  const scalar_t* bx = boxes.const_data_ptr<scalar_t>();
  scalar_t* out = output.mutable_data_ptr<scalar_t>();
  const int64_t plane = p.height * p.width;
  const int64_t pixel_stride = kBorders * p.channels;
  const int64_t chunks = (p.boxes + kChunkBoxes - 1) / kChunkBoxes;
  at::parallel_for(0, p.batch * chunks, 1, [&](int64_t begin, int64_t end) {
    // [box][border][channel] of a chunk
    std::vector<acc_t> best(static_cast<size_t>(kChunkBoxes * kBorders * p.channels));
    std::vector<int32_t> index(best.size());
    std::vector<acc_t> value(static_cast<size_t>(p.channels));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / chunks;
      const int64_t k0 = (item % chunks) * kChunkBoxes;
      const int64_t nk = std::min(kChunkBoxes, p.boxes - k0);
      for (int64_t kl = 0; kl < nk; ++kl) {
        const scalar_t* box = bx + (n * p.boxes + k0 + kl) * 4;
        const acc_t x1 = box[0], y1 = box[1], x2 = box[2], y2 = box[3];
        for (int g = 0; g < kBorders; ++g) {
          const scalar_t* pixels = in + n * plane * pixel_stride + g * p.channels;
          acc_t* b = best.data() + (kl * kBorders + g) * p.channels;
          int32_t* idx = index.data() + (kl * kBorders + g) * p.channels;
          Walk<acc_t> w = border_walk(x1, y1, x2, y2, g, p.pool_size);
          // the start point initialises the maxima, the others update them
          point_values(taps_at(w.y, w.x, p.height, p.width), pixels, pixel_stride, p.channels, b);
          std::fill(idx, idx + p.channels, 0);
          for (int64_t i = 1; i <= p.pool_size; ++i) {
            advance(w);
            point_values(taps_at(w.y, w.x, p.height, p.width), pixels, pixel_stride, p.channels, value.data());
            max_step(value.data(), b, idx, static_cast<int32_t>(i), p.channels);
          }
        }
      }
      // output[n, c, k0 + kl, g] = best[kl][g][c]: a run of nk * 4 values per channel
      for (int64_t c = 0; c < p.channels; ++c) {
        const int64_t o0 = ((n * p.channels + c) * p.boxes + k0) * kBorders;
        for (int64_t e = 0; e < nk * kBorders; ++e) {
          out[o0 + e] = static_cast<scalar_t>(best[e * p.channels + c]);
          if (argmax != nullptr) {
            argmax[o0 + e] = index[e * p.channels + c];
          }
        }
      }
    }
  });
}

// Boxes per backward chunk: up to 16, fewer when pool_size makes the tap table large.
int64_t backward_chunk_boxes(int64_t pool_size) {
  return std::clamp<int64_t>(4096 / (kBorders * (pool_size + 1)), 1, 16);
}

// Channels per backward task: up to 16 (they share the taps of their boxes), fewer
// when that would leave threads idle (the result does not depend on it: every
// plane is still summed by one task, in box order).
int64_t backward_task_channels(const BorderAlignParams& p) {
  const int64_t wanted_tasks = 4 * static_cast<int64_t>(at::get_num_threads());
  const int64_t per_task = (p.batch * p.channels + wanted_tasks - 1) / wanted_tasks;
  return std::clamp<int64_t>(per_task, 1, 16);
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
  const int64_t points = p.pool_size + 1;
  const int64_t chunk = backward_chunk_boxes(p.pool_size);
  const int64_t task_channels = backward_task_channels(p);
  const int64_t channel_chunks = (p.channels + task_channels - 1) / task_channels;
  // A task: image n, channels [c_lo, c_hi), i.e. the gradient planes (n, g * C + c) it alone writes.
  at::parallel_for(0, p.batch * channel_chunks, 1, [&](int64_t begin, int64_t end) {
    // taps of point i of border g of box k0 + kl at table[(kl * 4 + g) * points + i], computed on
    // demand along the forward's walk (walks[kl * 4 + g] is at point computed[...] - 1)
    std::vector<Taps<acc_t>> table(static_cast<size_t>(chunk * kBorders * points));
    std::vector<Walk<acc_t>> walks(static_cast<size_t>(chunk * kBorders));
    std::vector<int64_t> computed(walks.size());
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / channel_chunks;
      const int64_t c_lo = (item % channel_chunks) * task_channels;
      const int64_t c_hi = std::min(p.channels, c_lo + task_channels);
      for (int64_t k0 = 0; k0 < p.boxes; k0 += chunk) {
        const int64_t nk = std::min(chunk, p.boxes - k0);
        for (int64_t kl = 0; kl < nk; ++kl) {
          const scalar_t* box = bx + (n * p.boxes + k0 + kl) * 4;
          for (int g = 0; g < kBorders; ++g) {
            walks[kl * kBorders + g] = border_walk<acc_t>(box[0], box[1], box[2], box[3], g, p.pool_size);
            computed[kl * kBorders + g] = 0;
          }
        }
        for (int64_t c = c_lo; c < c_hi; ++c) {
          const int64_t o0 = ((n * p.channels + c) * p.boxes + k0) * kBorders;
          for (int g = 0; g < kBorders; ++g) {
            acc_t* target = dst + ((n * kBorders + g) * p.channels + c) * plane;
            for (int64_t kl = 0; kl < nk; ++kl) { // boxes in order: a fixed order of the adds
              const int64_t o = o0 + kl * kBorders + g;
              const int32_t i = am[o];
              if (i < 0 || i > p.pool_size) {
                continue;
              }
              const int64_t r = kl * kBorders + g;
              Taps<acc_t>* row = table.data() + r * points;
              for (; computed[r] <= i; ++computed[r]) { // the forward's walk: the same points
                if (computed[r] > 0) {
                  advance(walks[r]);
                }
                row[computed[r]] = taps_at(walks[r].y, walks[r].x, p.height, p.width);
              }
              const Taps<acc_t>& t = row[i];
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
      }
    }
  });
}

} // namespace

std::tuple<at::Tensor, at::Tensor> border_align_forward_cpu(const at::Tensor& input_, const at::Tensor& boxes_,
                                                            const BorderAlignParams& p, bool with_argmax) {
  const at::Tensor input = contiguous_cpu(input_, at::MemoryFormat::ChannelsLast);
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

// CPU kernels of nms_rotated and nms_quadri, and the label keys shared with
// CUDA (plain ATen ops: any device); the score order: common/score_order.h.
//
// Boxes are visited in score order; every box not yet suppressed is kept and
// suppresses the later boxes (of its label) whose IoU with it exceeds the
// threshold. The IoU is rotated_iou::overlap(kept box, later box), the same
// call, in the same argument order, as the CUDA mask kernel makes.

#include "common/rotated_iou.h"
#include "common/score_order.h"
#include "nms_rotated/nms_rotated_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/add.h>
#include <ATen/ops/empty.h>

#include <cstdint>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using rotated_iou::Shape;

// Suppression scans shorter than this run on one thread.
constexpr int64_t kGrain = 2048;

template <typename scalar_t, int D>
void greedy_cpu(const at::Tensor& boxes, const int64_t* order, const int64_t* label, int64_t n,
                const NmsRotatedParams& p, std::vector<uint8_t>& kept) {
  using T = at::opmath_type<scalar_t>;
  const scalar_t* b = boxes.const_data_ptr<scalar_t>();
  std::vector<Shape<T, D>> sorted(static_cast<size_t>(n));
  std::vector<int64_t> sorted_label(label != nullptr ? n : 0);
  at::parallel_for(0, n, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      sorted[s] = rotated_iou::load_shape<scalar_t, T, D>(b + order[s] * D, p.clockwise);
      if (label != nullptr) {
        sorted_label[s] = label[order[s]];
      }
    }
  });
  std::vector<uint8_t> removed(static_cast<size_t>(n), 0);
  for (int64_t s = 0; s < n; ++s) {
    if (removed[s]) {
      continue;
    }
    kept[s] = 1;
    const Shape<T, D> mine = sorted[s];
    auto suppress = [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) {
        if (removed[j] || (label != nullptr && sorted_label[j] != sorted_label[s])) {
          continue;
        }
        if (static_cast<double>(rotated_iou::overlap(mine, sorted[j], false)) > p.iou_threshold) {
          removed[j] = 1;
        }
      }
    };
    if (n - s - 1 > kGrain) {
      at::parallel_for(s + 1, n, kGrain, suppress);
    } else {
      suppress(s + 1, n);
    }
  }
}

} // namespace

at::Tensor label_keys(const at::Tensor& labels) {
  if (!labels.defined()) {
    return labels;
  }
  if (at::isFloatingType(labels.scalar_type())) {
    return at::add(labels.to(at::kDouble), 0.0).view(at::kLong).contiguous();
  }
  return labels.to(at::kLong).contiguous();
}

at::Tensor nms_rotated_cpu(const at::Tensor& boxes_in, const at::Tensor& scores, const at::Tensor& labels,
                           const NmsRotatedParams& p) {
  const int64_t n = boxes_in.size(0);
  const auto long_options = boxes_in.options().dtype(at::kLong);
  if (n == 0) {
    return at::empty({0}, long_options);
  }
  const at::Tensor order = descending_score_order(scores);
  const at::Tensor keys = label_keys(labels);
  const at::Tensor boxes = boxes_in.contiguous();
  const int64_t* order_p = order.const_data_ptr<int64_t>();
  const int64_t* label_p = keys.defined() ? keys.const_data_ptr<int64_t>() : nullptr;
  std::vector<uint8_t> kept(static_cast<size_t>(n), 0); // by position
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, boxes.scalar_type(), "mmops::nms_rotated (CPU)", [&] {
    if (p.quadri) {
      greedy_cpu<scalar_t, 8>(boxes, order_p, label_p, n, p, kept);
    } else {
      greedy_cpu<scalar_t, 5>(boxes, order_p, label_p, n, p, kept);
    }
  });
  std::vector<int64_t> out;
  for (int64_t s = 0; s < n; ++s) {
    if (kept[s]) {
      out.push_back(order_p[s]);
    }
  }
  at::Tensor result = at::empty({static_cast<int64_t>(out.size())}, long_options);
  std::copy(out.begin(), out.end(), result.mutable_data_ptr<int64_t>());
  return result;
}

} // namespace kernels
} // namespace mmops

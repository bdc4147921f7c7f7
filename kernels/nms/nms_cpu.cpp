// CPU kernels of nms, batched_nms and soft_nms, and the score order shared
// with CUDA (score_order works on any device; the CUDA kernels use their own
// key kernel to save launches).
//
// nms: boxes are visited in score order (batched_nms: grouped by category,
// score order inside); every box not yet suppressed is kept and suppresses the
// later boxes (of its category) whose IoU with it exceeds the threshold. The
// suppression scan runs in parallel (at::parallel_for) when it is long.

#include "common/box_iou.h"
#include "nms/nms_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/add.h>
#include <ATen/ops/bitwise_xor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/masked_select.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/where.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using box_iou::Box;

// Suppression scans shorter than this run on one thread.
constexpr int64_t kGrain = 8192;

} // namespace

at::Tensor score_order(const at::Tensor& scores) {
  // float, half and bfloat16 convert to double exactly; + 0.0 turns -0 into +0.
  const at::Tensor s = at::add(scores.to(at::kDouble), 0.0);
  const at::Tensor bits = s.view(at::kLong);
  at::Tensor key = at::where(at::lt(bits, 0), at::bitwise_xor(bits, std::numeric_limits<int64_t>::max()), bits);
  key = key.masked_fill(at::isnan(s), std::numeric_limits<int64_t>::min());
  return std::get<1>(at::sort(key, /*stable=*/true, /*dim=*/0, /*descending=*/true));
}

std::tuple<at::Tensor, at::Tensor> category_score_order(const at::Tensor& scores, const at::Tensor& idxs) {
  const at::Tensor order = score_order(scores);
  const at::Tensor by_category = std::get<1>(
      at::sort(idxs.to(at::kLong).index_select(0, order), /*stable=*/true, /*dim=*/0, /*descending=*/false));
  return {order.index_select(0, by_category), order};
}

at::Tensor nms_cpu(const at::Tensor& boxes_in, const at::Tensor& scores, const at::Tensor& idxs, double iou_threshold) {
  const int64_t n = boxes_in.size(0);
  const auto long_options = boxes_in.options().dtype(at::kLong);
  if (n == 0) {
    return at::empty({0}, long_options);
  }
  const bool batched = idxs.defined();
  at::Tensor perm;
  at::Tensor order;
  if (batched) {
    std::tie(perm, order) = category_score_order(scores, idxs);
  } else {
    order = score_order(scores);
    perm = order;
  }
  const at::Tensor boxes = boxes_in.contiguous();
  const int64_t* perm_p = perm.const_data_ptr<int64_t>();
  std::vector<int64_t> category;
  if (batched) {
    const at::Tensor cats = idxs.to(at::kLong).contiguous();
    const int64_t* c = cats.const_data_ptr<int64_t>();
    category.resize(n);
    for (int64_t s = 0; s < n; ++s) {
      category[s] = c[perm_p[s]];
    }
  }
  // End (exclusive) of the run of equal categories that position s belongs to.
  std::vector<int64_t> run_end(n, n);
  if (batched) {
    for (int64_t s = n - 1; s >= 0; --s) {
      run_end[s] = (s + 1 < n && category[s + 1] == category[s]) ? run_end[s + 1] : s + 1;
    }
  }

  std::vector<uint8_t> removed(n, 0);
  std::vector<uint8_t> kept(n, 0); // by input index
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, boxes.scalar_type(), "mmops::nms (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* b = boxes.const_data_ptr<scalar_t>();
    std::vector<Box<acc_t>> sorted(n);
    std::vector<acc_t> area(n);
    at::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
      for (int64_t s = begin; s < end; ++s) {
        sorted[s] = box_iou::load_box<scalar_t, acc_t>(b, perm_p[s]);
        area[s] = box_iou::box_area(sorted[s], acc_t(0));
      }
    });
    const bool skip_disjoint = iou_threshold >= 0;
    for (int64_t s = 0; s < n; ++s) {
      if (removed[s]) {
        continue;
      }
      kept[perm_p[s]] = 1;
      const Box<acc_t> mine = sorted[s];
      const acc_t my_area = area[s];
      auto suppress = [&](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j) {
          if (removed[j]) {
            continue;
          }
          // Disjoint boxes (most pairs) have IoU exactly 0: skip the division.
          if (skip_disjoint && !(box_iou::intersection(mine, sorted[j], acc_t(0)) > acc_t(0))) {
            continue;
          }
          if (static_cast<double>(box_iou::iou(mine, sorted[j], my_area, area[j])) > iou_threshold) {
            removed[j] = 1;
          }
        }
      };
      const int64_t end = run_end[s];
      if (end - s - 1 > kGrain) {
        at::parallel_for(s + 1, end, kGrain, suppress);
      } else {
        suppress(s + 1, end);
      }
    }
  });
  // Kept indices in score order.
  const int64_t* order_p = order.const_data_ptr<int64_t>();
  std::vector<int64_t> out;
  for (int64_t s = 0; s < n; ++s) {
    if (kept[order_p[s]]) {
      out.push_back(order_p[s]);
    }
  }
  at::Tensor result = at::empty({static_cast<int64_t>(out.size())}, long_options);
  std::copy(out.begin(), out.end(), result.mutable_data_ptr<int64_t>());
  return result;
}

std::tuple<at::Tensor, at::Tensor> soft_nms_cpu(const at::Tensor& boxes_in, const at::Tensor& scores_in,
                                                const SoftNmsParams& params) {
  const int64_t n = boxes_in.size(0);
  const auto long_options = boxes_in.options().dtype(at::kLong);
  if (n == 0) {
    return {at::empty({0, 5}, boxes_in.options()), at::empty({0}, long_options)};
  }
  const at::Tensor boxes = boxes_in.contiguous();
  at::Tensor dets;
  at::Tensor keep;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, boxes.scalar_type(), "mmops::soft_nms (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* b = boxes.const_data_ptr<scalar_t>();
    const at::Tensor scores = scores_in.to(c10::CppTypeToScalarType<acc_t>::value).contiguous();
    const acc_t* sc_in = scores.const_data_ptr<acc_t>();
    std::vector<Box<acc_t>> box(n);
    std::vector<acc_t> area(n);
    std::vector<acc_t> score(n);
    std::vector<int64_t> live; // indices still in play, ascending
    for (int64_t i = 0; i < n; ++i) {
      box[i] = box_iou::load_box<scalar_t, acc_t>(b, i);
      area[i] = box_iou::box_area(box[i], acc_t(0));
      score[i] = sc_in[i];
      if (!std::isnan(static_cast<double>(sc_in[i]))) {
        live.push_back(i); // a NaN score is dropped
      }
    }
    const acc_t threshold = static_cast<acc_t>(params.iou_threshold);
    const acc_t min_score = static_cast<acc_t>(params.min_score);
    std::vector<int64_t> out_index;
    std::vector<acc_t> out_score;
    std::vector<uint8_t> drop(n, 0);
    while (!live.empty()) {
      // Highest score, ties to the lower index (live is ascending).
      size_t best = 0;
      for (size_t q = 1; q < live.size(); ++q) {
        if (score[live[q]] > score[live[best]]) {
          best = q;
        }
      }
      const int64_t pick = live[best];
      out_index.push_back(pick);
      out_score.push_back(score[pick]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(best));
      const Box<acc_t> pb = box[pick];
      const acc_t pa = area[pick];
      auto rescore = [&](int64_t begin, int64_t end) {
        for (int64_t q = begin; q < end; ++q) {
          const int64_t j = live[q];
          const acc_t ovr = box_iou::iou(pb, box[j], pa, area[j]);
          score[j] *= nms_math::soft_nms_weight(params.method, ovr, threshold, params.sigma);
          drop[j] = !(score[j] >= min_score); // NaN (inf * 0) is dropped too
        }
      };
      const int64_t count = static_cast<int64_t>(live.size());
      if (count > kGrain) {
        at::parallel_for(0, count, kGrain, rescore);
      } else {
        rescore(0, count);
      }
      size_t w = 0;
      for (size_t q = 0; q < live.size(); ++q) {
        if (!drop[live[q]]) {
          live[w++] = live[q];
        }
      }
      live.resize(w);
    }
    const int64_t k = static_cast<int64_t>(out_index.size());
    keep = at::empty({k}, long_options);
    std::copy(out_index.begin(), out_index.end(), keep.mutable_data_ptr<int64_t>());
    dets = at::empty({k, 5}, boxes.options());
    scalar_t* d = dets.mutable_data_ptr<scalar_t>();
    for (int64_t q = 0; q < k; ++q) {
      const scalar_t* p = b + out_index[q] * 4;
      for (int c = 0; c < 4; ++c) {
        d[q * 5 + c] = p[c];
      }
      d[q * 5 + 4] = static_cast<scalar_t>(out_score[q]);
    }
  });
  return {dets, keep};
}

} // namespace kernels
} // namespace mmops

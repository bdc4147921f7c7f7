// CPU kernels of nms, batched_nms and soft_nms, and the score order shared
// with CUDA (score_order works on any device; the CUDA kernels use their own
// key kernel to save launches).
//
// nms: boxes are visited in score order (batched_nms: grouped by category,
// score order inside); every box not yet suppressed is kept and suppresses the
// later boxes (of its category) whose IoU with it exceeds the threshold. The
// suppression scan is branch-free over the boxes' columns (vectorised) and
// runs in parallel (at::parallel_for) when it is long.

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

// The largest T <= threshold: for any T value v, v > it exactly when
// double(v) > threshold (NaN: never), so the scan compares in T.
template <typename T>
T threshold_in(double threshold) {
  T t = static_cast<T>(threshold);
  if (static_cast<double>(t) > threshold) {
    t = std::nextafter(t, -std::numeric_limits<T>::infinity());
  }
  return t;
}

// The sorted boxes as columns (x1, y1, x2, y2, area), so that the scan of one
// kept box against the later ones is a branch-free loop the compiler
// vectorises (box_iou::iou's early outs become selects: -fno-trapping-math).
template <typename T>
struct BoxColumns {
  std::vector<T> x1, y1, x2, y2, area;
  explicit BoxColumns(int64_t n) : x1(n), y1(n), x2(n), y2(n), area(n) {}
  Box<T> box(int64_t i) const { return {x1[i], y1[i], x2[i], y2[i]}; }
};

// removed[j] |= IoU(kept, j) > threshold for j in [begin, end); already removed
// boxes are compared too (cheaper than a branch per box).
template <typename T>
void suppress_range(const BoxColumns<T>& c, const Box<T>& kept_box, T kept_area, T threshold, int64_t begin,
                    int64_t end, uint8_t* __restrict__ removed) {
  const Box<T> kept = kept_box; // a local copy: removed's stores cannot change it
  const T* __restrict__ x1 = c.x1.data();
  const T* __restrict__ y1 = c.y1.data();
  const T* __restrict__ x2 = c.x2.data();
  const T* __restrict__ y2 = c.y2.data();
  const T* __restrict__ area = c.area.data();
  for (int64_t j = begin; j < end; ++j) {
    const Box<T> other{x1[j], y1[j], x2[j], y2[j]};
    removed[j] |= static_cast<uint8_t>(box_iou::iou(kept, other, kept_area, area[j]) > threshold);
  }
}

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
    BoxColumns<acc_t> sorted(n);
    at::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
      for (int64_t s = begin; s < end; ++s) {
        const Box<acc_t> box = box_iou::load_box<scalar_t, acc_t>(b, perm_p[s]);
        sorted.x1[s] = box.x1;
        sorted.y1[s] = box.y1;
        sorted.x2[s] = box.x2;
        sorted.y2[s] = box.y2;
        sorted.area[s] = box_iou::box_area(box, acc_t(0));
      }
    });
    const acc_t threshold = threshold_in<acc_t>(iou_threshold);
    for (int64_t s = 0; s < n; ++s) {
      if (removed[s]) {
        continue;
      }
      kept[perm_p[s]] = 1;
      const Box<acc_t> mine = sorted.box(s);
      const acc_t my_area = sorted.area[s];
      auto suppress = [&](int64_t begin, int64_t end) {
        suppress_range(sorted, mine, my_area, threshold, begin, end, removed.data());
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

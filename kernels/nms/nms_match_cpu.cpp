// CPU kernel of nms_match (mmcv's nms_match_cpu, grouping instead of dropping).
//
// Boxes are visited in score order (score_order: decreasing, NaN last, ties to
// the lower index). Every box not yet in a group leads a new one and takes
// into it every later box not yet in a group whose IoU with it is >= the
// threshold. owner[s] is the position of the leader of position s; the output
// rows are the positions ordered by (owner, position), a counting sort: a
// leader comes before its members (they are later positions), and the members
// of a group stay in score order.

#include "common/box_iou.h"
#include "nms/nms_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <cstdint>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

using box_iou::Box;

// Scans shorter than this run on one thread.
constexpr int64_t kMatchGrain = 8192;

// Output rows (leader index, member index) from the owner of every position.
void write_rows(const std::vector<int64_t>& owner, const int64_t* order, int64_t* rows) {
  const int64_t n = static_cast<int64_t>(owner.size());
  std::vector<int64_t> start(n, 0); // first row of the group led by position s
  for (int64_t s = 0; s < n; ++s) {
    ++start[owner[s]];
  }
  int64_t next = 0;
  for (int64_t s = 0; s < n; ++s) {
    const int64_t count = start[s];
    start[s] = next;
    next += count;
  }
  for (int64_t s = 0; s < n; ++s) {
    const int64_t r = start[owner[s]]++;
    rows[2 * r] = order[owner[s]];
    rows[2 * r + 1] = order[s];
  }
}

} // namespace

at::Tensor nms_match_cpu(const at::Tensor& dets_in, double iou_threshold) {
  const int64_t n = dets_in.size(0);
  const auto long_options = dets_in.options().dtype(at::kLong);
  if (n == 0) {
    return at::empty({0, 2}, long_options);
  }
  const at::Tensor dets = dets_in.contiguous();
  const at::Tensor order = score_order(dets.select(1, 4));
  const int64_t* order_p = order.const_data_ptr<int64_t>();
  std::vector<int64_t> owner(n, -1);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dets.scalar_type(), "mmops::nms_match (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* d = dets.const_data_ptr<scalar_t>();
    std::vector<Box<acc_t>> sorted(n);
    std::vector<acc_t> area(n);
    at::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
      for (int64_t s = begin; s < end; ++s) {
        sorted[s] = box_iou::load_box<scalar_t, acc_t>(d + order_p[s] * 5, 0);
        area[s] = box_iou::box_area(sorted[s], acc_t(0));
      }
    });
    // mmcv compares the float IoU with the threshold as a float.
    const acc_t threshold = static_cast<acc_t>(iou_threshold);
    // Disjoint boxes have IoU 0, which reaches no positive threshold.
    const bool skip_disjoint = threshold > acc_t(0);
    for (int64_t s = 0; s < n; ++s) {
      if (owner[s] >= 0) {
        continue;
      }
      owner[s] = s;
      const Box<acc_t> mine = sorted[s];
      const acc_t my_area = area[s];
      auto take = [&](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j) {
          if (owner[j] >= 0) {
            continue;
          }
          if (skip_disjoint && !(box_iou::intersection(mine, sorted[j], acc_t(0)) > acc_t(0))) {
            continue;
          }
          if (box_iou::iou(mine, sorted[j], my_area, area[j]) >= threshold) {
            owner[j] = s;
          }
        }
      };
      if (n - s - 1 > kMatchGrain) {
        at::parallel_for(s + 1, n, kMatchGrain, take);
      } else {
        take(s + 1, n);
      }
    }
  });
  at::Tensor rows = at::empty({n, 2}, long_options);
  write_rows(owner, order_p, rows.mutable_data_ptr<int64_t>());
  return rows;
}

} // namespace kernels
} // namespace mmops

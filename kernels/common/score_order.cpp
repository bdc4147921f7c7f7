// descending_score_order: two stable sorts, on whatever device scores live.

#include "common/score_order.h"

#include <ATen/ops/add.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/sort.h>

#include <limits>

namespace mmops {
namespace kernels {

at::Tensor descending_score_order(const at::Tensor& scores) {
  // Every float dtype converts to double exactly; + 0.0 folds -0 into +0.
  const at::Tensor s = at::add(scores.to(at::kDouble), 0.0);
  const at::Tensor nan = at::isnan(s);
  const at::Tensor by_score = std::get<1>(at::sort(s.masked_fill(nan, -std::numeric_limits<double>::infinity()),
                                                   /*stable=*/true, /*dim=*/0, /*descending=*/true));
  // NaN after everything (-inf included), stable again.
  const at::Tensor nan_last =
      std::get<1>(at::sort(nan.index_select(0, by_score).to(at::kByte), /*stable=*/true, /*dim=*/0, false));
  return by_score.index_select(0, nan_last);
}

} // namespace kernels
} // namespace mmops

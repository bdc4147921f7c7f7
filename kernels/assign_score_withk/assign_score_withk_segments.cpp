// Keys of the feature-gradient segments of assign_score_withk (ATen views,
// both devices).

#include "assign_score_withk/assign_score_withk_kernels.h"

namespace mmops {
namespace kernels {

at::Tensor neighbour_keys(const at::Tensor& knn_idx, const AssignScoreWithKParams& p) {
  return knn_idx.reshape({p.batch, p.centers * p.k});
}

at::Tensor center_keys(const at::Tensor& knn_idx, const AssignScoreWithKParams& p) {
  return knn_idx.narrow(2, 0, p.k > 0 ? 1 : 0).reshape({p.batch, p.k > 0 ? p.centers : 0});
}

} // namespace kernels
} // namespace mmops

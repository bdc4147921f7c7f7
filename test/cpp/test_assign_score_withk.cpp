// C++ face of mmops::assign_score_withk: the public API against a gather
// reference, autograd from C++, finite differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

namespace {

// [B, O, npoint, K] by explicit loops.
at::Tensor reference(const at::Tensor& s, const at::Tensor& p, const at::Tensor& c, const at::Tensor& knn) {
  const int64_t B = s.size(0), npoint = s.size(1), K = s.size(2), M = s.size(3), O = p.size(3);
  at::Tensor out = at::zeros({B, O, npoint, K}, at::kDouble);
  auto sa = s.accessor<double, 4>();
  auto pa = p.accessor<double, 4>();
  auto ca = c.accessor<double, 4>();
  auto ka = knn.accessor<int64_t, 3>();
  auto oa = out.accessor<double, 4>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < npoint; ++n)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t o = 0; o < O; ++o)
          for (int64_t m = 0; m < M; ++m)
            oa[b][o][n][k] += sa[b][n][k][m] * (pa[b][ka[b][n][k]][m][o] - ca[b][ka[b][n][0]][m][o]);
  return out;
}

struct Inputs {
  at::Tensor scores, points, centers, knn;
};

Inputs random_inputs(int64_t B, int64_t npoint, int64_t K, int64_t M, int64_t N, int64_t O) {
  return {at::rand({B, npoint, K, M}, at::kDouble), at::randn({B, N, M, O}, at::kDouble),
          at::randn({B, N, M, O}, at::kDouble), at::randint(0, N, {B, npoint, K}, at::kLong)};
}

TEST(AssignScoreWithK, MatchesLoopReference) {
  at::manual_seed(0);
  const Inputs in = random_inputs(2, 5, 4, 3, 7, 6);
  const at::Tensor out = mmops::assign_score_withk(in.scores, in.points, in.centers, in.knn);
  EXPECT_EQ(out.sizes(), at::IntArrayRef({2, 6, 5, 4}));
  EXPECT_TRUE(at::allclose(out, reference(in.scores, in.points, in.centers, in.knn), 1e-12, 1e-12));
  const at::Tensor avg = mmops::assign_score_withk(in.scores, in.points, in.centers, in.knn.to(at::kInt), "avg");
  EXPECT_TRUE(at::equal(avg, out)); // aggregate has no effect, as in mmcv
}

TEST(AssignScoreWithK, FiniteDifferences) {
  at::manual_seed(1);
  const Inputs in = random_inputs(2, 3, 3, 2, 4, 2);
  const at::Tensor weights = at::randn({2, 2, 3, 3}, at::kDouble);
  std::vector<at::Tensor> base{in.scores, in.points, in.centers};
  auto loss = [&](const std::vector<at::Tensor>& t) {
    return (mmops::assign_score_withk(t[0], t[1], t[2], in.knn) * weights).sum();
  };
  std::vector<at::Tensor> leaves;
  for (const at::Tensor& t : base) {
    leaves.push_back(t.clone().requires_grad_(true));
  }
  loss(leaves).backward();
  const double eps = 1e-6;
  torch::NoGradGuard no_grad;
  for (size_t which = 0; which < base.size(); ++which) {
    for (int64_t i = 0; i < base[which].numel(); ++i) {
      std::vector<at::Tensor> plus = base, minus = base;
      plus[which] = base[which].clone();
      minus[which] = base[which].clone();
      plus[which].view(-1)[i] += eps;
      minus[which].view(-1)[i] -= eps;
      const double numeric = (loss(plus).item<double>() - loss(minus).item<double>()) / (2 * eps);
      EXPECT_NEAR(leaves[which].grad().view(-1)[i].item<double>(), numeric, 1e-6)
          << "argument " << which << " element " << i;
    }
  }
}

TEST(AssignScoreWithK, EmptyInputs) {
  const Inputs in = random_inputs(2, 3, 0, 2, 4, 3);
  const at::Tensor points = in.points.clone().requires_grad_(true);
  const at::Tensor out = mmops::assign_score_withk(in.scores, points, in.centers, in.knn);
  EXPECT_EQ(out.sizes(), at::IntArrayRef({2, 3, 3, 0}));
  out.sum().backward();
  EXPECT_TRUE(at::equal(points.grad(), at::zeros_like(points)));
}

TEST(AssignScoreWithK, ErrorsNameTheArgument) {
  const Inputs in = random_inputs(2, 3, 4, 2, 5, 3);
  EXPECT_ERROR_MENTIONS(mmops::assign_score_withk(in.scores[0], in.points, in.centers, in.knn),
                        "expected scores to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::assign_score_withk(in.scores, in.points.narrow(2, 0, 1), in.centers, in.knn),
                        "expected point_features of shape");
  EXPECT_ERROR_MENTIONS(mmops::assign_score_withk(in.scores, in.points, in.centers.narrow(1, 0, 2), in.knn),
                        "expected center_features of the shape of point_features");
  EXPECT_ERROR_MENTIONS(mmops::assign_score_withk(in.scores, in.points, in.centers, in.knn.to(at::kFloat)),
                        "expected knn_idx to have dtype int64 or int32");
  EXPECT_ERROR_MENTIONS(mmops::assign_score_withk(in.scores, in.points, in.centers, in.knn, "mean"),
                        "aggregate must be \"sum\", \"avg\" or \"max\"");
  at::Tensor bad = in.knn.clone();
  bad.view(-1)[3] = 5;
  EXPECT_ERROR_MENTIONS(mmops::assign_score_withk(in.scores, in.points, in.centers, bad),
                        "every value of knn_idx in [0, 5)");
}

TEST(AssignScoreWithK, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(2);
  const Inputs in = random_inputs(2, 70, 16, 8, 100, 40);
  for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    std::vector<at::Tensor> host, device;
    for (const at::Tensor& t : {in.scores, in.points, in.centers}) {
      host.push_back(t.to(dtype).detach().requires_grad_(true)); // detach: to() may alias t
      device.push_back(t.to(dtype).cuda().detach().requires_grad_(true));
    }
    const at::Tensor oh = mmops::assign_score_withk(host[0], host[1], host[2], in.knn);
    const at::Tensor oc = mmops::assign_score_withk(device[0], device[1], device[2], in.knn.cuda());
    const double tol = dtype == at::kFloat || dtype == at::kDouble ? 1e-5 : 5e-2;
    EXPECT_TRUE(at::allclose(oc.cpu().to(at::kDouble), oh.to(at::kDouble), tol, tol)) << dtype;
    const at::Tensor go = at::randn(oh.sizes()).to(dtype);
    oh.backward(go);
    oc.backward(go.cuda());
    for (size_t i = 0; i < host.size(); ++i) {
      EXPECT_TRUE(at::allclose(device[i].grad().cpu().to(at::kDouble), host[i].grad().to(at::kDouble), tol, tol))
          << dtype << " argument " << i;
    }
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry assign_score_withk_api{
    "mmops::assign_score_withk", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::assign_score_withk(a[0].toTensor(), a[1].toTensor(), a[2].toTensor(),
                                                              a[3].toTensor(), a[4].toStringRef())};
    }};

} // namespace

// C++ face of mmops::prroi_pool: the public API, autograd from C++ (input and
// rois), finite differences, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

#include <vector>

namespace {

at::Tensor roi(std::initializer_list<double> values) {
  return at::tensor(std::vector<double>(values), at::kDouble).reshape({-1, 5});
}

TEST(PrRoIPool, OnePixelKnownVector) {
  // a single 1 at (2, 2); the bin [1.5, 2.5]^2 holds (integral_-0.5^0.5 (1 - |u|) du)^2 = 0.5625
  at::Tensor input = at::zeros({1, 1, 5, 5}, at::kDouble);
  input[0][0][2][2] = 1.0;
  input.requires_grad_(true);
  const at::Tensor out = mmops::prroi_pool(input, roi({0, 1.5, 1.5, 2.5, 2.5}), {1, 1});
  EXPECT_NEAR(out.item<double>(), 0.5625, 1e-15);
  out.sum().backward();
  // d out / d D[i][j] = wy(i) wx(j): 0.75 at the centre, 0.125 one pixel off
  EXPECT_NEAR(input.grad()[0][0][2][2].item<double>(), 0.5625, 1e-15);
  EXPECT_NEAR(input.grad()[0][0][1][2].item<double>(), 0.125 * 0.75, 1e-15);
  EXPECT_NEAR(input.grad()[0][0][1][1].item<double>(), 0.125 * 0.125, 1e-15);
  EXPECT_NEAR(input.grad().sum().item<double>(), 1.0, 1e-15); // the bin's weights sum to its area
}

TEST(PrRoIPool, FiniteDifferencesOfInputAndRois) {
  at::manual_seed(0);
  const at::Tensor input = at::randn({2, 2, 7, 8}, at::kDouble);
  const at::Tensor rois = roi({0, 0.6, 1.2, 6.4, 5.3, 1, 2.2, 0.1, 7.9, 6.6, 1, -2.3, -1.7, 3.1, 3.4});
  const at::Tensor weights = at::randn({3, 2, 3, 2}, at::kDouble);
  auto loss = [&](const at::Tensor& x, const at::Tensor& r) {
    return (mmops::prroi_pool(x, r, {3, 2}) * weights).sum();
  };
  const at::Tensor x = input.clone().requires_grad_(true), r = rois.clone().requires_grad_(true);
  loss(x, r).backward();
  const double eps = 1e-6;
  torch::NoGradGuard no_grad;
  for (int64_t i = 0; i < input.numel(); i += 5) {
    at::Tensor plus = input.clone(), minus = input.clone();
    plus.view(-1)[i] += eps;
    minus.view(-1)[i] -= eps;
    const double numeric = (loss(plus, rois).item<double>() - loss(minus, rois).item<double>()) / (2 * eps);
    EXPECT_NEAR(x.grad().view(-1)[i].item<double>(), numeric, 1e-6) << "input element " << i;
  }
  for (int64_t k = 0; k < 3; ++k) {
    EXPECT_EQ(r.grad()[k][0].item<double>(), 0.0);
    for (int64_t c = 1; c < 5; ++c) {
      at::Tensor plus = rois.clone(), minus = rois.clone();
      plus[k][c] += eps;
      minus[k][c] -= eps;
      const double numeric = (loss(input, plus).item<double>() - loss(input, minus).item<double>()) / (2 * eps);
      EXPECT_NEAR(r.grad()[k][c].item<double>(), numeric, 1e-6) << "roi " << k << " coordinate " << c;
    }
  }
}

TEST(PrRoIPool, ErrorsNameTheArgument) {
  const at::Tensor input = at::randn({2, 3, 6, 6});
  const at::Tensor rois = at::zeros({4, 5});
  EXPECT_ERROR_MENTIONS(mmops::prroi_pool(input[0], rois, {2, 2}), "expected input to be a 4-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::prroi_pool(input, rois.slice(1, 0, 4), {2, 2}), "rois");
  EXPECT_ERROR_MENTIONS(mmops::prroi_pool(input, rois.to(at::kDouble), {2, 2}), "dtype of input");
  EXPECT_ERROR_MENTIONS(mmops::prroi_pool(input, rois, {0, 2}), "output_size");
  EXPECT_ERROR_MENTIONS(mmops::prroi_pool(input, rois, {2, 2}, 0.0), "spatial_scale");
  at::Tensor bad = rois.clone();
  bad[1][0] = 2;
  EXPECT_ERROR_MENTIONS(mmops::prroi_pool(input, bad, {2, 2}), "batch index");
}

TEST(PrRoIPool, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "SKIPPED: no CUDA device";
  }
  at::manual_seed(1);
  const at::Tensor input = at::randn({2, 40, 13, 17});
  const at::Tensor rois = at::cat({at::randint(0, 2, {9, 1}), at::rand({9, 2}) * 12, at::rand({9, 2}) * 12 + 6}, 1);
  for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    const double tol = (dtype == at::kFloat || dtype == at::kDouble) ? 1e-4 : 5e-2;
    const at::Tensor x = input.to(dtype), r = rois.to(dtype);
    const at::Tensor xc = x.cuda().requires_grad_(true), rc = r.cuda().requires_grad_(true);
    const at::Tensor xh = x.clone().requires_grad_(true), rh = r.clone().requires_grad_(true);
    const at::Tensor oc = mmops::prroi_pool(xc, rc, {3, 4}, 0.5);
    const at::Tensor oh = mmops::prroi_pool(xh, rh, {3, 4}, 0.5);
    EXPECT_TRUE(at::allclose(oc.cpu().to(at::kDouble), oh.to(at::kDouble), tol, tol)) << dtype;
    oc.sum().backward();
    oh.sum().backward();
    EXPECT_TRUE(at::allclose(xc.grad().cpu().to(at::kDouble), xh.grad().to(at::kDouble), tol, tol)) << dtype;
    EXPECT_TRUE(at::allclose(rc.grad().cpu().to(at::kDouble), rh.grad().to(at::kDouble), 10 * tol, 10 * tol)) << dtype;
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry prroi_pool_api{
    "mmops::prroi_pool", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{
          mmops::prroi_pool(a[0].toTensor(), a[1].toTensor(), a[2].toIntVector(), a[3].toDouble())};
    }};

} // namespace

// C++ face of mmops::min_area_polygons: the public API on mmcv's known
// vectors, errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

namespace {

at::Tensor mmcv_pointsets() {
  return at::tensor({1.0, 1.0, 2.0, 2.0, 1.0, 2.0, 2.0, 1.0, 1.0, 3.0, 3.0, 1.0, 2.0, 3.0, 3.0, 2.0, 1.5, 1.5,
                     1.0, 1.0, 8.0, 8.0, 1.0, 2.0, 2.0, 1.0, 1.0, 3.0, 3.0, 1.0, 2.0, 3.0, 3.0, 2.0, 1.5, 1.5})
      .reshape({2, 18});
}

TEST(MinAreaPolygons, MmcvKnownVectors) {
  const at::Tensor expected =
      at::tensor({3.0, 1.0, 1.0, 1.0, 1.0, 3.0, 3.0, 3.0, 8.0, 8.0, 2.3243, 0.0541, 0.0541, 1.6757, 5.7297, 9.6216})
          .reshape({2, 8});
  for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    const at::Tensor out = mmops::min_area_polygons(mmcv_pointsets().to(dtype));
    EXPECT_EQ(out.scalar_type(), dtype);
    EXPECT_TRUE(at::allclose(out.to(at::kDouble), expected, 0.0, 1e-4)) << out;
  }
}

TEST(MinAreaPolygons, EmptyAndErrors) {
  EXPECT_EQ(mmops::min_area_polygons(at::zeros({0, 18})).sizes(), (std::vector<int64_t>{0, 8}));
  EXPECT_ERROR_MENTIONS(mmops::min_area_polygons(at::zeros({2, 16})),
                        "expected pointsets to be a 2-D tensor of shape [N, 18]");
  EXPECT_ERROR_MENTIONS(mmops::min_area_polygons(at::zeros({2, 18}, at::kInt)), "floating point dtype, but got Int");
}

TEST(MinAreaPolygons, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(3);
  const at::Tensor sets = at::rand({3000, 18}, at::kDouble) * 100.0;
  EXPECT_TRUE(at::allclose(mmops::min_area_polygons(sets.cuda()).cpu(), mmops::min_area_polygons(sets), 1e-9, 1e-9));
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry min_area_polygons_api{
    "mmops::min_area_polygons",
    [](const mmops_test::ApiArgs& a) { return mmops_test::ApiOutputs{mmops::min_area_polygons(a[0].toTensor())}; }};

} // namespace

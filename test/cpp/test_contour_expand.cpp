// C++ face of mmops::contour_expand: mmcv's known vector, the two modes, errors,
// CUDA == CPU, and the op's CppApiEntry. (Not differentiable: no gradient check.)

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

#include <cstdint>
#include <vector>

namespace {

at::Tensor map_of(const std::vector<int32_t>& values, int64_t height, int64_t width) {
  return at::tensor(values, at::TensorOptions().dtype(at::kInt)).reshape({height, width});
}

// mmcv tests/test_ops/test_contour_expand.py: two 2x4 / 1x4 kernels in a 10 x 10 map.
TEST(ContourExpand, MmcvKnownVector) {
  at::Tensor label = at::zeros({10, 10}, at::kInt);
  label.slice(0, 3, 7).slice(1, 2, 4).fill_(1);
  label.slice(0, 3, 7).select(1, 8).fill_(2);
  at::Tensor mask = at::zeros({2, 10, 10}, at::kByte);
  mask[0].slice(0, 3, 7).slice(1, 2, 9).fill_(1);
  mask[1].copy_(label.gt(0));
  at::Tensor expected = at::zeros({10, 10}, at::kInt);
  expected.slice(0, 3, 7).slice(1, 2, 6).fill_(1);
  expected.slice(0, 3, 7).slice(1, 6, 9).fill_(2);
  EXPECT_TRUE(at::equal(mmops::contour_expand(mask, label, 1, 3), expected));
  EXPECT_TRUE(at::equal(mmops::contour_expand(mask, label, 1, 3, true), expected));
}

TEST(ContourExpand, ModesDiffer) {
  at::Tensor mask = at::zeros({3, 1, 6}, at::kByte);
  mask[0].fill_(1);
  mask[1].copy_(map_of({0, 1, 0, 0, 1, 1}, 1, 6));
  const at::Tensor label = map_of({2, 0, 0, 0, 1, 0}, 1, 6);
  EXPECT_TRUE(at::equal(mmops::contour_expand(mask, label, 1, 2), map_of({2, 2, 2, 1, 1, 1}, 1, 6)));
  EXPECT_TRUE(at::equal(mmops::contour_expand(mask, label, 1, 2, true), map_of({2, 2, 2, 2, 1, 1}, 1, 6)));
  // one kernel, or a label below min_kernel_area
  EXPECT_TRUE(at::equal(mmops::contour_expand(mask.slice(0, 0, 1), label, 1, 2), label));
  EXPECT_TRUE(at::equal(mmops::contour_expand(mask, label, 2, 2), at::zeros({1, 6}, at::kInt)));
}

TEST(ContourExpand, EmptyMaps) {
  EXPECT_EQ(mmops::contour_expand(at::zeros({2, 0, 4}, at::kByte), at::zeros({0, 4}, at::kInt), 1, 1).sizes(),
            at::IntArrayRef({0, 4}));
}

TEST(ContourExpand, BadArgumentsRaiseClearErrors) {
  const at::Tensor mask = at::zeros({2, 3, 4}, at::kByte);
  const at::Tensor label = at::zeros({3, 4}, at::kInt);
  EXPECT_ERROR_MENTIONS(mmops::contour_expand(mask[0], label, 1, 1), "expected kernel_mask to be a 3-D tensor");
  EXPECT_ERROR_MENTIONS(mmops::contour_expand(mask, label.to(at::kLong), 1, 1),
                        "expected internal_kernel_label to have dtype int32, but got Long");
  EXPECT_ERROR_MENTIONS(mmops::contour_expand(mask, label.slice(0, 1), 1, 1),
                        "expected internal_kernel_label of shape [3, 4]");
  EXPECT_ERROR_MENTIONS(mmops::contour_expand(mask, label + 2, 1, 1),
                        "expected every value of internal_kernel_label in [0, kernel_num] = [0, 1]");
}

TEST(ContourExpand, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device";
  }
  at::manual_seed(3);
  const at::Tensor mask = at::rand({5, 64, 80}).lt(0.7).to(at::kByte);
  at::Tensor label = at::randint(1, 9, {64, 80}, at::TensorOptions().dtype(at::kInt));
  label.masked_fill_(at::rand({64, 80}).ge(0.1), 0);
  for (const bool progressive : {false, true}) {
    EXPECT_TRUE(at::equal(mmops::contour_expand(mask.cuda(), label.cuda(), 2, 8, progressive).cpu(),
                          mmops::contour_expand(mask, label, 2, 8, progressive)))
        << progressive;
  }
}

const mmops_test::CppApiEntry contour_expand_api{
    "mmops::contour_expand", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{
          mmops::contour_expand(a[0].toTensor(), a[1].toTensor(), a[2].toInt(), a[3].toInt(), a[4].toBool())};
    }};

} // namespace

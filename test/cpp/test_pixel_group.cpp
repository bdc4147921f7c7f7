// C++ face of mmops::pixel_group: mmcv's known vector (float32 means bit for bit),
// errors, CUDA == CPU, and the op's CppApiEntry. (Not differentiable: no gradient check.)

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

namespace {

struct Inputs {
  at::Tensor score, mask, embedding, label, contour;
};

// mmcv tests/test_ops/test_pixel_group.py
Inputs mmcv_inputs() {
  Inputs in;
  in.score = at::zeros({10, 10});
  in.score.slice(0, 3, 7).slice(1, 1, 9).fill_(0.9);
  in.mask = in.score.gt(0.5);
  in.embedding = at::zeros({10, 10, 8});
  in.embedding.slice(1, 0, 7).fill_(0.9);
  in.embedding.slice(1, 7, 10).fill_(10.0);
  in.label = at::zeros({10, 10}, at::kInt);
  in.label.slice(0, 3, 7).slice(1, 2, 5).fill_(1);
  in.label.slice(0, 3, 7).select(1, 8).fill_(2);
  in.contour = in.label.gt(0).to(at::kByte);
  in.contour.slice(0, 4, 6).select(1, 3).fill_(0);
  return in;
}

TEST(PixelGroup, MmcvKnownVector) {
  const Inputs in = mmcv_inputs();
  const auto [labels, scores, counts] =
      mmops::pixel_group(in.score, in.mask, in.embedding, in.label, in.contour, 3, 0.8);
  at::Tensor expected = at::zeros({10, 10}, at::kInt);
  expected.slice(0, 3, 7).slice(1, 1, 7).fill_(1);
  expected.slice(0, 3, 7).slice(1, 7, 9).fill_(2);
  EXPECT_TRUE(at::equal(labels, expected));
  EXPECT_EQ(counts[1].item<int64_t>(), 24);
  EXPECT_EQ(counts[2].item<int64_t>(), 8);
  EXPECT_EQ(scores[0].item<float>(), 0.0f);
  EXPECT_EQ(scores[1].item<float>(), 0.8999997973442078f); // mmcv's float32 sum, in raster order
  EXPECT_EQ(scores[2].item<float>(), 0.9000000357627869f);
}

TEST(PixelGroup, EmptyMaps) {
  const auto [labels, scores, counts] =
      mmops::pixel_group(at::zeros({0, 3}), at::zeros({0, 3}, at::kBool), at::zeros({0, 3, 4}),
                         at::zeros({0, 3}, at::kInt), at::zeros({0, 3}, at::kByte), 2, 0.5);
  EXPECT_EQ(labels.sizes(), at::IntArrayRef({0, 3}));
  EXPECT_EQ(scores.sizes(), at::IntArrayRef({2}));
  EXPECT_EQ(counts.sum().item<int64_t>(), 0);
}

TEST(PixelGroup, BadArgumentsRaiseClearErrors) {
  const Inputs in = mmcv_inputs();
  EXPECT_ERROR_MENTIONS(
      mmops::pixel_group(in.score, in.mask, in.embedding.to(at::kDouble), in.label, in.contour, 3, 0.8),
      "expected embedding to have score's dtype (Float), but got Double");
  EXPECT_ERROR_MENTIONS(
      mmops::pixel_group(in.score, in.mask.to(at::kFloat), in.embedding, in.label, in.contour, 3, 0.8),
      "expected mask to have dtype bool or uint8, but got Float");
  EXPECT_ERROR_MENTIONS(mmops::pixel_group(in.score, in.mask, in.embedding, in.label, in.contour, 2, 0.8),
                        "expected every value of kernel_label in [0, kernel_region_num) = [0, 2)");
  EXPECT_ERROR_MENTIONS(mmops::pixel_group(in.score, in.mask, in.embedding, in.label, in.contour, 3, NAN),
                        "distance_threshold must be a number, but got nan");
}

TEST(PixelGroup, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device";
  }
  at::manual_seed(5);
  const at::Tensor score = at::rand({64, 80});
  const at::Tensor mask = at::rand({64, 80}).lt(0.8);
  const at::Tensor embedding = at::randint(0, 3, {64, 80, 4}).to(at::kFloat).mul_(0.25);
  at::Tensor label = at::randint(1, 9, {64, 80}, at::TensorOptions().dtype(at::kInt));
  label.masked_fill_(at::rand({64, 80}).ge(0.15), 0);
  const at::Tensor contour = at::rand({64, 80}).lt(0.6).to(at::kByte);
  const auto cpu = mmops::pixel_group(score, mask, embedding, label, contour, 9, 0.4);
  const auto gpu =
      mmops::pixel_group(score.cuda(), mask.cuda(), embedding.cuda(), label.cuda(), contour.cuda(), 9, 0.4);
  EXPECT_TRUE(at::equal(std::get<0>(gpu).cpu(), std::get<0>(cpu)));
  EXPECT_TRUE(at::equal(std::get<1>(gpu).cpu(), std::get<1>(cpu)));
  EXPECT_TRUE(at::equal(std::get<2>(gpu).cpu(), std::get<2>(cpu)));
}

const mmops_test::CppApiEntry pixel_group_api{"mmops::pixel_group", [](const mmops_test::ApiArgs& a) {
                                                const auto [labels, scores, counts] = mmops::pixel_group(
                                                    a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), a[3].toTensor(),
                                                    a[4].toTensor(), a[5].toInt(), a[6].toDouble());
                                                return mmops_test::ApiOutputs{labels, scores, counts};
                                              }};

} // namespace

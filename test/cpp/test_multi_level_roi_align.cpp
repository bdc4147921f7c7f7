// C++ face of mmops::multi_level_roi_align: equals roi_align on each roi's
// mmdet level, gradients to every level (finite differences), errors, CUDA == CPU.

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace {

const std::vector<double> kScales{0.25, 0.125, 0.0625, 0.03125};

std::vector<at::Tensor> pyramid(at::ScalarType dtype, int64_t channels = 3) {
  std::vector<at::Tensor> features;
  for (int64_t l = 0; l < 4; ++l) {
    features.push_back(at::randn({2, channels, 64 >> l, 96 >> l}, at::TensorOptions().dtype(dtype)));
  }
  return features;
}

// Boxes in a 384 x 256 image whose sides make mmdet's rule pick every level.
at::Tensor pyramid_rois(at::ScalarType dtype) {
  return at::tensor({0.0, 10.0, 12.0, 40.0, 50.0,     // side ~34  -> level 0
                     1.0, 30.0, 20.0, 150.0, 120.0,   // side ~110 -> level 0 (just below 112)
                     0.0, 5.0, 9.0, 125.0, 131.0,     // side ~121 -> level 1
                     1.0, 50.0, 40.0, 300.0, 240.0,   // side ~224 -> level 1 (just below 224)
                     0.0, 0.0, 0.0, 383.0, 255.0,     // side ~313 -> level 2
                     1.0, -200.0, -150.0, 500.0, 400.0},  // side ~620 -> level 3
                    at::TensorOptions().dtype(dtype))
      .reshape({6, 5});
}

int expected_level(const at::Tensor& roi) {
  const double w = roi[3].item<double>() - roi[1].item<double>();
  const double h = roi[4].item<double>() - roi[2].item<double>();
  const double level = std::floor(std::log2(std::sqrt(w * h) / 56.0 + 1e-6));
  return static_cast<int>(std::min(std::max(level, 0.0), 3.0));
}

TEST(MultiLevelRoIAlign, EqualsRoIAlignOnTheMmdetLevel) {
  at::manual_seed(21);
  const std::vector<at::Tensor> features = pyramid(at::kDouble);
  const at::Tensor rois = pyramid_rois(at::kDouble);
  for (const char* mode : {"avg", "max"}) {
    const at::Tensor out = mmops::multi_level_roi_align(features, rois, {7, 7}, kScales, 2, mode);
    std::vector<int> seen(4, 0);
    for (int64_t k = 0; k < rois.size(0); ++k) {
      const int level = expected_level(rois[k]);
      seen[level] += 1;
      const at::Tensor single = mmops::roi_align(features[level], rois.slice(0, k, k + 1), {7, 7},
                                                 kScales[level], 2, mode);
      EXPECT_TRUE(at::allclose(out.slice(0, k, k + 1), single, 1e-12, 1e-12)) << mode << " roi " << k;
    }
    for (int l = 0; l < 4; ++l) {
      EXPECT_GT(seen[l], 0) << "the test rois should cover level " << l;
    }
  }
}

TEST(MultiLevelRoIAlign, FiniteDifferenceGradientsToEveryLevel) {
  at::manual_seed(22);
  std::vector<at::Tensor> features;
  for (int64_t l = 0; l < 4; ++l) {
    features.push_back(at::randn({2, 1, 16 >> l, 24 >> l}, at::kDouble).requires_grad_(true));
  }
  const at::Tensor rois = pyramid_rois(at::kDouble);
  const at::Tensor weight = at::randn({6, 1, 2, 2}, at::kDouble);
  auto loss = [&](const std::vector<at::Tensor>& f) {
    return (mmops::multi_level_roi_align(f, rois, {2, 2}, kScales, 2, "avg") * weight).sum();
  };
  loss(features).backward();
  const double eps = 1e-6;
  at::NoGradGuard no_grad;
  for (int64_t l = 0; l < 4; ++l) {
    std::vector<at::Tensor> probe;
    for (const at::Tensor& f : features) {
      probe.push_back(f.detach().clone());
    }
    auto flat = probe[l].view({-1});
    at::Tensor numeric = at::zeros_like(probe[l]);
    auto numeric_flat = numeric.view({-1});
    for (int64_t i = 0; i < flat.numel(); ++i) {
      const double saved = flat[i].item<double>();
      flat[i] = saved + eps;
      const double plus = loss(probe).item<double>();
      flat[i] = saved - eps;
      const double minus = loss(probe).item<double>();
      flat[i] = saved;
      numeric_flat[i] = (plus - minus) / (2 * eps);
    }
    EXPECT_TRUE(at::allclose(features[l].grad(), numeric, 1e-6, 1e-6)) << "level " << l;
  }
}

TEST(MultiLevelRoIAlign, BadArgumentsRaiseClearErrors) {
  const std::vector<at::Tensor> features = pyramid(at::kFloat);
  const at::Tensor rois = pyramid_rois(at::kFloat);
  auto message = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const c10::Error& e) {
      return e.what_without_backtrace();
    }
    return "<no error>";
  };
  EXPECT_NE(message([&] { mmops::multi_level_roi_align(features, rois, {7, 7}, {0.25, 0.125}); })
                .find("one spatial scale per feature map"), std::string::npos);
  std::vector<at::Tensor> mixed = features;
  mixed[1] = mixed[1].to(at::kDouble);
  EXPECT_NE(message([&] { mmops::multi_level_roi_align(mixed, rois, {7, 7}, kScales); }).find("features[1]"),
            std::string::npos);
  EXPECT_NE(message([&] { mmops::multi_level_roi_align(features, rois, {7, 7}, kScales, 0, "avg", true, 0); })
                .find("finest_scale must be positive"), std::string::npos);
  EXPECT_NE(message([&] { mmops::multi_level_roi_align({}, rois, {7, 7}, {}); }).find("features"),
            std::string::npos);
}

TEST(MultiLevelRoIAlign, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(23);
  for (const char* mode : {"avg", "max"}) {
    for (const auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
      std::vector<at::Tensor> cpu, cuda;
      for (const at::Tensor& f : pyramid(at::kFloat, 70)) {
        cpu.push_back(f.to(dtype).to(at::kFloat).detach().clone().requires_grad_(true));
        cuda.push_back(f.to(dtype).detach().cuda().requires_grad_(true));
      }
      // Both devices pool the same (rounded) boxes: bfloat16 moves them by up to a pixel.
      const at::Tensor rois = pyramid_rois(at::kFloat).to(dtype).to(at::kFloat);
      const at::Tensor grad = at::randn({6, 70, 7, 7}).to(dtype).to(at::kFloat);
      const at::Tensor out_cpu = mmops::multi_level_roi_align(cpu, rois, {7, 7}, kScales, 2, mode);
      out_cpu.backward(grad);
      const at::Tensor out_cuda =
          mmops::multi_level_roi_align(cuda, rois.to(dtype).cuda(), {7, 7}, kScales, 2, mode);
      out_cuda.backward(grad.to(dtype).cuda());
      const double tol = dtype == at::kFloat || dtype == at::kDouble ? 1e-4 : dtype == at::kHalf ? 1e-2 : 5e-2;
      EXPECT_TRUE(at::allclose(out_cuda.cpu().to(at::kFloat), out_cpu, tol, tol)) << mode << " " << dtype;
      if (std::string(mode) == "avg" || dtype == at::kFloat || dtype == at::kDouble) {
        for (size_t l = 0; l < cpu.size(); ++l) {
          EXPECT_TRUE(at::allclose(cuda[l].grad().cpu().to(at::kFloat), cpu[l].grad(), tol, tol))
              << mode << " " << dtype << " level " << l;
        }
      }
    }
  }
}

} // namespace

// C++ face of mmops::nms, batched_nms, soft_nms and nms_match: the public API, mmcv's
// known vectors, ties / NaN / empty, errors, TorchScript source compiled in
// C++, CUDA == CPU. (bbox_overlaps: test_bbox_overlaps.cpp.)

#include <mmops/mmops.h>

#include <ATen/ATen.h>
#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/frontend/resolver.h>
#include <torch/csrc/jit/frontend/sugared_value.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_support.h"

#include <limits>
#include <string>
#include <vector>

namespace {

std::vector<int64_t> to_vector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

at::Tensor mmcv_boxes(at::ScalarType dtype = at::kFloat) {
  return at::tensor({6.0, 3.0, 8.0, 7.0, 3.0, 6.0, 9.0, 11.0, 3.0, 7.0, 10.0, 12.0, 1.0, 4.0, 13.0, 7.0},
                    at::TensorOptions().dtype(at::kDouble))
      .reshape({4, 4})
      .to(dtype);
}

at::Tensor mmcv_scores(at::ScalarType dtype = at::kFloat) {
  return at::tensor({0.6, 0.9, 0.7, 0.2}, at::TensorOptions().dtype(at::kDouble)).to(dtype);
}

at::Tensor random_boxes(int64_t n, double image, double side, at::ScalarType dtype) {
  const auto options = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor xy = at::rand({n, 2}, options) * image;
  const at::Tensor wh = at::rand({n, 2}, options) * side + 0.5;
  return at::cat({xy, xy + wh}, 1).to(dtype);
}

// Plain float64 IoU and greedy nms, written independently of the library.
double iou(const double* a, const double* b) {
  const double w = std::max(0.0, std::min(a[2], b[2]) - std::max(a[0], b[0]));
  const double h = std::max(0.0, std::min(a[3], b[3]) - std::max(a[1], b[1]));
  const double inter = w * h;
  const double uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
  return uni > 0 ? inter / uni : 0.0;
}

std::vector<int64_t> nms_reference(const at::Tensor& boxes_in, const at::Tensor& scores_in, double threshold,
                                   const at::Tensor& idxs = at::Tensor()) {
  const at::Tensor boxes = boxes_in.to(at::kDouble).contiguous();
  const at::Tensor scores = scores_in.to(at::kDouble).contiguous();
  const int64_t n = boxes.size(0);
  const double* b = boxes.data_ptr<double>();
  const double* s = scores.data_ptr<double>();
  std::vector<int64_t> cats = idxs.defined() ? to_vector(idxs) : std::vector<int64_t>(n, 0);
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) {
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
  std::vector<bool> removed(n, false);
  std::vector<int64_t> keep;
  for (int64_t p = 0; p < n; ++p) {
    const int64_t i = order[p];
    if (removed[i]) {
      continue;
    }
    keep.push_back(i);
    for (int64_t q = p + 1; q < n; ++q) {
      const int64_t j = order[q];
      if (cats[i] == cats[j] && iou(b + 4 * i, b + 4 * j) > threshold) {
        removed[j] = true;
      }
    }
  }
  return keep;
}

// mmcv's nms_match, written independently: groups by decreasing score (ties:
// lower index), a box joining the first leader with IoU >= threshold. Returns
// the flattened rows (leader, member).
std::vector<int64_t> nms_match_reference(const at::Tensor& dets_in, double threshold) {
  const at::Tensor dets = dets_in.to(at::kDouble).contiguous();
  const int64_t n = dets.size(0);
  const double* d = dets.data_ptr<double>();
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) {
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return d[5 * x + 4] > d[5 * y + 4]; });
  std::vector<bool> grouped(n, false);
  std::vector<int64_t> rows;
  for (int64_t p = 0; p < n; ++p) {
    const int64_t i = order[p];
    if (grouped[i]) {
      continue;
    }
    rows.insert(rows.end(), {i, i});
    for (int64_t q = p + 1; q < n; ++q) {
      const int64_t j = order[q];
      if (!grouped[j] && iou(d + 5 * i, d + 5 * j) >= threshold) {
        grouped[j] = true;
        rows.insert(rows.end(), {i, j});
      }
    }
  }
  return rows;
}

at::Tensor random_dets(int64_t n, double image, double side, at::ScalarType dtype) {
  return at::cat({random_boxes(n, image, side, at::kDouble), at::rand({n, 1}, at::TensorOptions().dtype(at::kDouble))},
                 1)
      .to(dtype);
}

TEST(Nms, MmcvKnownVector) {
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    const at::Tensor keep = mmops::nms(mmcv_boxes(dtype), mmcv_scores(dtype), 0.3);
    EXPECT_EQ(keep.scalar_type(), at::kLong);
    EXPECT_EQ(to_vector(keep), (std::vector<int64_t>{1, 0, 3})) << dtype;
  }
}

TEST(Nms, RandomAgainstReference) {
  at::manual_seed(3);
  for (int64_t n : {1, 63, 64, 65, 400}) {
    const at::Tensor boxes = random_boxes(n, 100.0, 30.0, at::kFloat);
    const at::Tensor scores = at::rand({n});
    for (double thr : {0.2, 0.5, 0.8}) {
      EXPECT_EQ(to_vector(mmops::nms(boxes, scores, thr)), nms_reference(boxes, scores, thr)) << n << " " << thr;
      const at::Tensor idxs = at::randint(0, 5, {n}, at::TensorOptions().dtype(at::kLong));
      EXPECT_EQ(to_vector(mmops::batched_nms(boxes, scores, idxs, thr)), [&] {
        // per-category nms, merged by decreasing score (ties: lower index)
        std::vector<int64_t> kept = nms_reference(boxes, scores, thr, idxs);
        const at::Tensor s = scores.to(at::kDouble).contiguous();
        std::stable_sort(kept.begin(), kept.end(), [&](int64_t x, int64_t y) {
          const double a = s.data_ptr<double>()[x], b = s.data_ptr<double>()[y];
          return a > b || (a == b && x < y);
        });
        return kept;
      }());
    }
  }
}

TEST(Nms, TiesNanEmpty) {
  const at::Tensor boxes =
      at::tensor({0.0, 0.0, 10.0, 10.0, 0.0, 0.0, 10.0, 10.0, 0.0, 0.0, 10.0, 10.0}).reshape({3, 4});
  EXPECT_EQ(to_vector(mmops::nms(boxes, at::full({3}, 0.5), 0.5)), (std::vector<int64_t>{0}));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // a NaN score ranks after every number
  EXPECT_EQ(to_vector(mmops::nms(boxes, at::tensor({nan, 0.1, 0.2}), 0.5)), (std::vector<int64_t>{2}));
  // a NaN box overlaps nothing: kept, suppresses nothing
  const at::Tensor with_nan = boxes.clone();
  with_nan[0][2] = nan;
  EXPECT_EQ(to_vector(mmops::nms(with_nan, at::tensor({0.9, 0.8, 0.7}), 0.5)), (std::vector<int64_t>{0, 1}));
  const at::Tensor empty = mmops::nms(at::zeros({0, 4}), at::zeros({0}), 0.5);
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(empty.scalar_type(), at::kLong);
  auto [dets, keep] = mmops::soft_nms(at::zeros({0, 4}), at::zeros({0}));
  EXPECT_EQ(dets.sizes(), (at::IntArrayRef{0, 5}));
  EXPECT_EQ(keep.numel(), 0);
}

TEST(SoftNms, MmcvKnownVectors) {
  struct Case {
    const char* method;
    std::vector<int64_t> inds;
    std::vector<double> scores;
  };
  const std::vector<Case> cases = {
      {"linear", {1, 0, 2, 3}, {0.9, 0.6, 0.29024392, 0.2}},
      {"gaussian", {1, 0, 2, 3}, {0.9, 0.59630775, 0.35275510, 0.18650459}},
      {"naive", {1, 0, 3}, {0.9, 0.6, 0.2}},
  };
  for (const Case& c : cases) {
    auto [dets, keep] = mmops::soft_nms(mmcv_boxes(), mmcv_scores(), 0.3, 0.5, 1e-3, c.method);
    EXPECT_EQ(to_vector(keep), c.inds) << c.method;
    const at::Tensor expected = at::tensor(c.scores, at::TensorOptions().dtype(at::kDouble));
    EXPECT_TRUE(at::allclose(dets.select(1, 4).to(at::kDouble), expected, 1e-6, 1e-6)) << dets;
    EXPECT_TRUE(at::equal(dets.slice(1, 0, 4), mmcv_boxes().index_select(0, keep)));
  }
}

TEST(Nms, BadArgumentsRaiseClearErrors) {
  EXPECT_ERROR_MENTIONS(mmops::nms(at::zeros({3, 5}), at::zeros({3}), 0.5),
                        "expected boxes to be a 2-D tensor of shape [N, 4]");
  EXPECT_ERROR_MENTIONS(mmops::nms(at::zeros({3, 4}), at::zeros({2}), 0.5),
                        "expected scores to be a 1-D tensor of shape [N] with N = boxes.size(0) = 3");
  EXPECT_ERROR_MENTIONS(mmops::batched_nms(at::zeros({3, 4}), at::zeros({3}), at::zeros({3}), 0.5),
                        "integer dtype, but got Float");
  EXPECT_ERROR_MENTIONS(mmops::soft_nms(at::zeros({3, 4}), at::zeros({3}), 0.3, 0.5, 1e-3, "box"),
                        "method must be \"naive\", \"linear\" or \"gaussian\"");
  EXPECT_ERROR_MENTIONS(mmops::soft_nms(at::zeros({3, 4}), at::zeros({3}), 0.3, -1.0, 1e-3, "gaussian"),
                        "sigma must be a positive finite number");
}

TEST(NmsMatch, MmcvKnownVector) {
  // mmcv tests/test_ops/test_nms.py::test_nms_match, iou_thr 0.6: groups [0, 1] and [2, 3]
  const at::Tensor dets = at::tensor({49.1, 32.4, 51.0, 35.9, 0.9, 49.3, 32.9, 51.0, 35.3, 0.9,
                                      35.3, 11.5, 39.9, 14.5, 0.4, 35.2, 11.7, 39.7, 15.7, 0.3})
                              .reshape({4, 5});
  for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    const at::Tensor rows = mmops::nms_match(dets.to(dtype), 0.6);
    EXPECT_EQ(rows.scalar_type(), at::kLong);
    EXPECT_EQ(rows.sizes(), (at::IntArrayRef{4, 2}));
    EXPECT_EQ(to_vector(rows), (std::vector<int64_t>{0, 0, 0, 1, 2, 2, 2, 3})) << dtype;
  }
  EXPECT_EQ(to_vector(mmops::nms_match(dets, 0.7)), (std::vector<int64_t>{0, 0, 1, 1, 2, 2, 3, 3}));
}

TEST(NmsMatch, RandomAgainstReferenceAndEmpty) {
  at::manual_seed(5);
  for (int64_t n : {1, 63, 64, 65, 400}) {
    const at::Tensor dets = random_dets(n, 100.0, 30.0, at::kDouble);
    for (double thr : {-0.1, 0.0, 0.2, 0.5, 0.8}) {
      EXPECT_EQ(to_vector(mmops::nms_match(dets, thr)), nms_match_reference(dets, thr)) << n << " " << thr;
    }
  }
  const at::Tensor empty = mmops::nms_match(at::zeros({0, 5}), 0.5);
  EXPECT_EQ(empty.sizes(), (at::IntArrayRef{0, 2}));
  EXPECT_EQ(empty.scalar_type(), at::kLong);
}

TEST(NmsMatch, BadArgumentsRaiseClearErrors) {
  EXPECT_ERROR_MENTIONS(mmops::nms_match(at::zeros({3, 4}), 0.5),
                        "mmops::nms_match: expected dets to be a 2-D tensor of shape [N, 5]");
  EXPECT_ERROR_MENTIONS(mmops::nms_match(at::zeros({3, 5}, at::kInt), 0.5),
                        "expected dets to have a floating point dtype, but got Int");
  EXPECT_ERROR_MENTIONS(mmops::nms_match(at::zeros({3, 5}), std::numeric_limits<double>::quiet_NaN()),
                        "iou_threshold must be a number, but got nan");
}

TEST(NmsMatch, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(9);
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    const at::Tensor dets = random_dets(3000, 400.0, 60.0, dtype);
    for (double thr : {0.0, 0.3, 0.6}) {
      EXPECT_TRUE(at::equal(mmops::nms_match(dets.cuda(), thr).cpu(), mmops::nms_match(dets, thr))) << dtype << thr;
    }
  }
}

TEST(Nms, TorchScriptSourceCompiledInCpp) {
  auto unit = std::make_shared<torch::jit::CompilationUnit>();
  unit->define(std::nullopt, R"JIT(
def post(boxes: Tensor, scores: Tensor, idxs: Tensor) -> Tensor:
    keep = torch.ops.mmops.nms(boxes, scores, 0.3)
    keep2 = torch.ops.mmops.batched_nms(boxes, scores, idxs, 0.3)
    dets, keep3 = torch.ops.mmops.soft_nms(boxes, scores, 0.3, 0.5, 0.001, "naive")
    iou = torch.ops.mmops.bbox_overlaps(boxes[keep], boxes, "iou", False, 0)
    return torch.cat([keep, keep2, keep3, (iou.amax(1) == 1.0).long()])
)JIT",
               std::make_shared<mmops_test::TorchResolver>(), nullptr);
  const at::Tensor idxs = at::tensor({0, 1, 0, 0}, at::TensorOptions().dtype(at::kLong));
  const at::Tensor out = unit->run_method("post", mmcv_boxes(), mmcv_scores(), idxs).toTensor();
  // nms [1, 0, 3]; batched (box 1 alone in category 1) [1, 2, 0, 3]; soft naive [1, 0, 3];
  // every kept box has IoU 1 with itself: each row's largest IoU is 1.
  EXPECT_EQ(to_vector(out), (std::vector<int64_t>{1, 0, 3, 1, 2, 0, 3, 1, 0, 3, 1, 1, 1}));
}

TEST(Nms, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  at::manual_seed(7);
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    const at::Tensor boxes = random_boxes(3000, 400.0, 60.0, dtype);
    const at::Tensor scores = at::rand({3000}).to(dtype);
    const at::Tensor idxs = at::randint(0, 10, {3000}, at::TensorOptions().dtype(at::kLong));
    EXPECT_TRUE(at::equal(mmops::nms(boxes.cuda(), scores.cuda(), 0.5).cpu(), mmops::nms(boxes, scores, 0.5)));
    EXPECT_TRUE(at::equal(mmops::batched_nms(boxes.cuda(), scores.cuda(), idxs.cuda(), 0.5).cpu(),
                          mmops::batched_nms(boxes, scores, idxs, 0.5)));
    auto [dc, kc] = mmops::soft_nms(boxes.slice(0, 0, 500).cuda(), scores.slice(0, 0, 500).cuda());
    auto [d, k] = mmops::soft_nms(boxes.slice(0, 0, 500), scores.slice(0, 0, 500));
    EXPECT_TRUE(at::equal(kc.cpu(), k));
    EXPECT_TRUE(at::allclose(dc.cpu().to(at::kDouble), d.to(at::kDouble), 1e-2, 1e-2));
  }
}

// The public C++ API on the calls the conformance cases recorded (test_torchscript.cpp).
const mmops_test::CppApiEntry nms_api{
    "mmops::nms", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::nms(a[0].toTensor(), a[1].toTensor(), a[2].toDouble())};
    }};
const mmops_test::CppApiEntry batched_nms_api{
    "mmops::batched_nms", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{
          mmops::batched_nms(a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), a[3].toDouble())};
    }};
const mmops_test::CppApiEntry soft_nms_api{"mmops::soft_nms", [](const mmops_test::ApiArgs& a) {
                                             const auto [dets, keep] =
                                                 mmops::soft_nms(a[0].toTensor(), a[1].toTensor(), a[2].toDouble(),
                                                                 a[3].toDouble(), a[4].toDouble(), a[5].toStringRef());
                                             return mmops_test::ApiOutputs{dets, keep};
                                           }};

const mmops_test::CppApiEntry nms_match_api{
    "mmops::nms_match", [](const mmops_test::ApiArgs& a) {
      return mmops_test::ApiOutputs{mmops::nms_match(a[0].toTensor(), a[1].toDouble())};
    }};

} // namespace

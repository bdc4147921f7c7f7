// Autograd of nms, batched_nms, soft_nms and nms_match: none. keep and
// nms_match's groups, index tensors, have no gradient; soft_nms' dets raise "not implemented" if backward reaches them.

#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("nms", torch::autograd::autogradNotImplementedFallback());
  m.impl("batched_nms", torch::autograd::autogradNotImplementedFallback());
  m.impl("soft_nms", torch::autograd::autogradNotImplementedFallback());
  m.impl("nms_match", torch::autograd::autogradNotImplementedFallback());
}

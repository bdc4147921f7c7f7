// Autograd of box_iou_rotated and box_iou_quadri: none (as mmcv: the clip is
// piecewise and mmcv has no backward); backward raises "not implemented".

#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("box_iou_rotated", torch::autograd::autogradNotImplementedFallback());
  m.impl("box_iou_quadri", torch::autograd::autogradNotImplementedFallback());
}

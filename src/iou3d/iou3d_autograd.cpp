// Autograd of the iou3d family: none (as mmcv: the clip is piecewise and mmcv
// has no backward; NMS returns indices); backward raises "not implemented".

#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("boxes_overlap_bev", torch::autograd::autogradNotImplementedFallback());
  m.impl("boxes_iou_bev", torch::autograd::autogradNotImplementedFallback());
  m.impl("nms_bev", torch::autograd::autogradNotImplementedFallback());
  m.impl("nms_normal_bev", torch::autograd::autogradNotImplementedFallback());
}

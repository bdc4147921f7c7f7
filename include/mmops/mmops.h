#pragma once
// Umbrella header of the mmops C++ API. Every function calls its op through
// the PyTorch dispatcher (CPU, CUDA and autograd included).

#include <mmops/bbox_overlaps.h>
#include <mmops/config.h>
#include <mmops/deform_conv.h>
#include <mmops/focal_loss.h>
#include <mmops/ms_deform_attn.h>
#include <mmops/multi_level_roi_align.h>
#include <mmops/nms.h>
#include <mmops/roi_align.h>
#include <mmops/roi_pool.h>

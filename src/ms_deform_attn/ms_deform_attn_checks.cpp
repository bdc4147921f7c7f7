// Argument validation of ms_deform_attn on every backend (the meta kernels run
// the shape checks too, so fake tensors raise the same errors).

#include "common/check_utils.h"
#include "ms_deform_attn/ms_deform_attn_ops.h"

#include <c10/core/SymInt.h>

#include <cstdint>
#include <limits>
#include <optional>

namespace mmops {
namespace detail {
namespace {

// The prefix of every ms_deform_attn error message.
constexpr const char* kOp = "mmops::ms_deform_attn: ";

void check_floating_like_value(const char* op, const char* name, const at::Tensor& t, const at::Tensor& value) {
  TORCH_CHECK(t.scalar_type() == value.scalar_type(), op, "expected ", name, " to have the dtype of value (",
              value.scalar_type(), "), but got ", t.scalar_type());
  TORCH_CHECK(t.device() == value.device(), op, "expected ", name, " on the device of value (", value.device(),
              "), but got ", t.device());
}

void check_index_tensor(const char* op, const char* name, const at::Tensor& t, const at::Tensor& value) {
  TORCH_CHECK(t.scalar_type() == at::kLong, op, "expected ", name, " to be an int64 tensor, but got ", t.scalar_type());
  TORCH_CHECK(t.device() == value.device(), op, "expected ", name, " on the device of value (", value.device(),
              "), but got ", t.device());
}

// The size products of concrete shapes (every real kernel call), in 64 bits
// with overflow checks, before anything multiplies them: empty tensors can
// have sizes whose product does not fit (value [B, 0, 2^32, 2^32]).
void check_size_arithmetic(const at::Tensor& value, const at::Tensor& sampling_locations) {
  const char* op = kOp;
  const std::optional<int64_t> batch = value.sym_size(0).maybe_as_int(), heads = value.sym_size(2).maybe_as_int(),
                               channels = value.sym_size(3).maybe_as_int(),
                               queries = sampling_locations.sym_size(1).maybe_as_int(),
                               levels = sampling_locations.sym_size(3).maybe_as_int(),
                               points = sampling_locations.sym_size(4).maybe_as_int();
  if (heads.has_value() && channels.has_value()) {
    const int64_t row =
        checked_mul(op, "the output channels num_heads * head_dim (value.size(2) * value.size(3))", *heads, *channels);
    if (batch.has_value() && queries.has_value()) {
      checked_mul(op, "the output size batch * num_queries * num_heads * head_dim",
                  checked_mul(op, "the output size batch * num_queries * num_heads * head_dim", *batch, *queries), row);
    }
    // The CUDA kernels count the channel passes of a head in an int.
    TORCH_CHECK(*channels <= std::numeric_limits<int32_t>::max(), op,
                "expected head_dim (value.size(3)) to be at most 2^31 - 1, but got ", *channels);
  }
  if (levels.has_value() && points.has_value()) {
    checked_mul(op, "the points per query and head num_levels * num_points (sampling_locations.size(3) * .size(4))",
                *levels, *points);
  }
}

} // namespace

void check_ms_deform_attn_forward(const at::Tensor& value, const at::Tensor& spatial_shapes,
                                  const at::Tensor& level_start_index, const at::Tensor& sampling_locations,
                                  const at::Tensor& attention_weights) {
  const char* op = kOp;
  // Ranks first: the size checks below index dimensions.
  TORCH_CHECK(value.dim() == 4, op,
              "expected value to be a 4-D tensor [batch, num_values, num_heads, head_dim], but got shape ",
              shape_of(value));
  TORCH_CHECK(spatial_shapes.dim() == 2 && spatial_shapes.sym_size(1) == 2, op,
              "expected spatial_shapes to be a 2-D tensor [num_levels, 2] of (H, W), but got shape ",
              shape_of(spatial_shapes));
  TORCH_CHECK(level_start_index.dim() == 1, op,
              "expected level_start_index to be a 1-D tensor [num_levels], but got shape ",
              shape_of(level_start_index));
  TORCH_CHECK(sampling_locations.dim() == 6 && sampling_locations.sym_size(5) == 2, op,
              "expected sampling_locations to be a 6-D tensor [batch, num_queries, num_heads, num_levels, "
              "num_points, 2] of (x, y), but got shape ",
              shape_of(sampling_locations));
  TORCH_CHECK(attention_weights.dim() == 5, op,
              "expected attention_weights to be a 5-D tensor [batch, num_queries, num_heads, num_levels, "
              "num_points], but got shape ",
              shape_of(attention_weights));

  TORCH_CHECK(at::isFloatingType(value.scalar_type()), op, "expected value to have a floating point dtype, but got ",
              value.scalar_type());
  check_floating_like_value(op, "sampling_locations", sampling_locations, value);
  check_floating_like_value(op, "attention_weights", attention_weights, value);
  check_index_tensor(op, "spatial_shapes", spatial_shapes, value);
  check_index_tensor(op, "level_start_index", level_start_index, value);

  const c10::SymInt& levels = spatial_shapes.sym_size(0);
  TORCH_SYM_CHECK(levels.sym_ge(1).sym_and(levels.sym_le(kMaxMsDeformAttnLevels)), op,
                  "expected spatial_shapes to hold 1 to ", kMaxMsDeformAttnLevels, " levels, but got ", levels);
  TORCH_SYM_CHECK(level_start_index.sym_size(0).sym_eq(levels), op,
                  "expected level_start_index to hold one start per level (", levels, "), but got shape ",
                  shape_of(level_start_index));
  TORCH_SYM_CHECK(value.sym_size(2).sym_ge(1), op, "expected value to have at least one head, but got shape ",
                  shape_of(value));
  TORCH_SYM_CHECK(value.sym_size(3).sym_ge(1), op, "expected value to have head_dim >= 1 channels, but got shape ",
                  shape_of(value));
  TORCH_SYM_CHECK(sampling_locations.sym_size(0).sym_eq(value.sym_size(0)), op,
                  "expected sampling_locations to have the batch size of value (", value.sym_size(0),
                  "), but got shape ", shape_of(sampling_locations));
  TORCH_SYM_CHECK(sampling_locations.sym_size(2).sym_eq(value.sym_size(2)), op,
                  "expected sampling_locations to have the num_heads of value (", value.sym_size(2),
                  "), but got shape ", shape_of(sampling_locations));
  TORCH_SYM_CHECK(sampling_locations.sym_size(3).sym_eq(levels), op,
                  "expected sampling_locations to have one entry per level of spatial_shapes (", levels,
                  "), but got shape ", shape_of(sampling_locations));
  TORCH_SYM_CHECK(sampling_locations.sym_size(4).sym_ge(1), op,
                  "expected sampling_locations to have num_points >= 1, but got shape ", shape_of(sampling_locations));
  for (int64_t d = 0; d < 5; ++d) {
    TORCH_SYM_CHECK(attention_weights.sym_size(d).sym_eq(sampling_locations.sym_size(d)), op,
                    "expected attention_weights of shape ", sampling_locations.sym_sizes().slice(0, 5),
                    " (sampling_locations without the last dimension), but got shape ", shape_of(attention_weights));
  }
  check_size_arithmetic(value, sampling_locations);
}

void check_ms_deform_attn_backward(const at::Tensor& grad_output, const at::Tensor& value,
                                   const at::Tensor& spatial_shapes, const at::Tensor& level_start_index,
                                   const at::Tensor& sampling_locations, const at::Tensor& attention_weights) {
  const char* op = kOp;
  check_ms_deform_attn_forward(value, spatial_shapes, level_start_index, sampling_locations, attention_weights);
  TORCH_CHECK(grad_output.dim() == 3, op,
              "expected grad_output to be a 3-D tensor [batch, num_queries, num_heads * head_dim], but got shape ",
              shape_of(grad_output));
  check_floating_like_value(op, "grad_output", grad_output, value);
  TORCH_SYM_CHECK(grad_output.sym_size(0)
                      .sym_eq(sampling_locations.sym_size(0))
                      .sym_and(grad_output.sym_size(1).sym_eq(sampling_locations.sym_size(1)))
                      .sym_and(grad_output.sym_size(2).sym_eq(value.sym_size(2) * value.sym_size(3))),
                  op, "expected grad_output of shape [", sampling_locations.sym_size(0), ", ",
                  sampling_locations.sym_size(1), ", ", value.sym_size(2) * value.sym_size(3), "], but got shape ",
                  shape_of(grad_output));
}

void check_levels(const at::Tensor& spatial_shapes, const at::Tensor& level_start_index, int64_t rows) {
  const char* op = kOp;
  const at::Tensor shapes = spatial_shapes.to(at::kCPU).contiguous();
  const at::Tensor starts = level_start_index.to(at::kCPU).contiguous();
  const int64_t* hw = shapes.const_data_ptr<int64_t>();
  const int64_t* st = starts.const_data_ptr<int64_t>();
  int64_t total = 0; // rows of the levels before l
  for (int64_t l = 0; l < shapes.size(0); ++l) {
    const int64_t h = hw[2 * l], w = hw[2 * l + 1];
    TORCH_CHECK(h >= 0 && w >= 0, op, "expected spatial_shapes to hold sizes (H, W) >= 0, but spatial_shapes[", l,
                "] = (", h, ", ", w, ")");
    TORCH_CHECK(st[l] == total, op, "expected level_start_index to be the running sum of H * W over the levels (",
                total, " for level ", l, "), but level_start_index[", l, "] = ", st[l]);
    TORCH_CHECK(h == 0 || w <= (rows - total) / h, op,
                "expected the levels of spatial_shapes to cover value.size(1) = ", rows, " rows, but the levels up to ",
                l, " hold more (spatial_shapes[", l, "] = (", h, ", ", w, "))");
    total += h * w;
  }
  TORCH_CHECK(total == rows, op, "expected the levels of spatial_shapes to cover value.size(1) = ", rows,
              " rows, but sum(H * W) = ", total);
}

} // namespace detail
} // namespace mmops

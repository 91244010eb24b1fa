#include "validate.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "last_error.hpp"
#include "onlinenorm/core/ops/dispatch.hpp"
#include "request_form.hpp"

namespace onorm {

size_t dtype_size(int dtype) {
  switch (dtype) {
    case ONORM_F32: return 4;
    case ONORM_F16: return 2;
    case ONORM_BF16: return 2;
    case ONORM_F64: return 8;
    case ONORM_F8_E4M3: return 1;
    case ONORM_I8: return 1;
    default: return 0;
  }
}

const char* dtype_name(int dtype) {
  switch (dtype) {
    case ONORM_F32: return "f32";
    case ONORM_F16: return "f16";
    case ONORM_BF16: return "bf16";
    case ONORM_F64: return "f64";
    case ONORM_F8_E4M3: return "f8_e4m3";
    case ONORM_I8: return "i8";
    default: return "invalid dtype";
  }
}

const char* op_name(onorm_op op) { return core::ops::name(op); }

namespace {

using i128 = __int128;

// A set of byte intervals: `rows` intervals of `length` bytes, `stride` bytes apart.
struct Region {
  i128 base;
  i128 rows;
  i128 stride;
  i128 length;
  i128 end() const { return base + (rows - 1) * stride + length; }
};

Region region_of(const onorm_rows& r) {
  const i128 es = static_cast<i128>(dtype_size(r.dtype));
  return Region{static_cast<i128>(reinterpret_cast<uintptr_t>(r.data)), r.rows, r.row_stride * es,
                r.cols * es};
}

Region block_of(const void* p, int64_t count, size_t element_size) {
  return Region{static_cast<i128>(reinterpret_cast<uintptr_t>(p)), 1, 0,
                static_cast<i128>(count) * static_cast<i128>(element_size)};
}

i128 floor_div(i128 a, i128 b) {  // b > 0
  i128 q = a / b;
  if ((a % b != 0) && (a < 0)) --q;
  return q;
}

// Is there an integer k in [lo_k, hi_k] with -len_b < offset + k*stride < len_a ?
bool some_shift_hits(i128 offset, i128 stride, i128 len_a, i128 len_b, i128 lo_k, i128 hi_k) {
  // offset + k*stride > -len_b  <=>  k > (-len_b - offset) / stride
  const i128 k_min = floor_div(-len_b - offset, stride) + 1;
  // offset + k*stride < len_a  <=>  k < (len_a - offset) / stride
  const i128 k_max = floor_div(len_a - offset - 1, stride);
  const i128 lo = k_min > lo_k ? k_min : lo_k;
  const i128 hi = k_max < hi_k ? k_max : hi_k;
  return lo <= hi;
}

// Exact when either side is one interval or both share a stride; otherwise it compares
// the spans (conservative: may call interleaved rows of different strides overlapping).
bool overlaps(const Region& a, const Region& b) {
  if (a.length == 0 || b.length == 0 || a.rows == 0 || b.rows == 0) return false;
  if (a.end() <= b.base || b.end() <= a.base) return false;
  if (a.rows == 1 && b.rows == 1) return true;
  if (a.rows == 1) return overlaps(b, a);
  if (b.rows == 1) {
    // Row i of a, [a.base + i*S, +La), meets [b.base, +Lb) iff -La < (a.base - b.base) + i*S < Lb.
    return some_shift_hits(a.base - b.base, a.stride, b.length, a.length, 0, a.rows - 1);
  }
  if (a.stride == b.stride) {
    // Row i of a meets row j of b iff -Lb < (b.base - a.base) + (j - i)*S < La.
    return some_shift_hits(b.base - a.base, a.stride, a.length, b.length, -(a.rows - 1),
                           b.rows - 1);
  }
  return true;
}

std::string shape_of(const onorm_rows& r) {
  return std::string(dtype_name(r.dtype)) + "[" + std::to_string(r.rows) + " x " +
         std::to_string(r.cols) + ", stride " + std::to_string(r.row_stride) + "]";
}

onorm_status check_rows(const onorm_rows& r, const char* what) {
  const std::string name(what);
  if (dtype_size(r.dtype) == 0)
    return fail(ONORM_ERROR_INVALID_ARGUMENT,
                name + ": dtype " + std::to_string(static_cast<int>(r.dtype)) + " is not an onorm_dtype");
  if (r.rows < 0 || r.cols < 0)
    return fail(ONORM_ERROR_INVALID_ARGUMENT, name + ": negative rows or cols in " + shape_of(r));
  if (r.row_stride < r.cols)
    return fail(ONORM_ERROR_INVALID_ARGUMENT,
                name + ": row_stride must be >= cols, got " + shape_of(r));
  // The last element's byte offset must fit in int64 (and so in the address space).
  const i128 elements = static_cast<i128>(r.rows) * r.row_stride;
  const i128 bytes = elements * static_cast<i128>(dtype_size(r.dtype));
  if (elements > INT64_MAX || bytes > INT64_MAX)
    return fail(ONORM_ERROR_INVALID_ARGUMENT,
                name + ": rows * row_stride overflows int64 in " + shape_of(r));
  if (r.data == nullptr && r.rows > 0 && r.cols > 0)
    return fail(ONORM_ERROR_INVALID_ARGUMENT, name + ": data is NULL for non-empty " + shape_of(r));
  return ONORM_OK;
}

}  // namespace

namespace {
// The shortest decimal text that reads back as v: a tiny negative eps must not print as
// "-0.000000" (std::to_string's %f).
std::string number_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
}  // namespace

namespace {

// A scalar parameter against its rule; what the message calls it.
onorm_status check_param(const std::string& op, const char* name, core::ops::ParamRule rule, double v) {
  using core::ops::ParamRule;
  const char* need = nullptr;
  switch (rule) {
    case ParamRule::kNonNegative:
      if (std::isnan(v) || v < 0) need = ">= 0 and not NaN";
      break;
    case ParamRule::kUnit:
      if (!(v >= 0.0 && v <= 1.0)) need = "in [0, 1]";
      break;
    case ParamRule::kFinite:
      if (!std::isfinite(v)) need = "finite";
      break;
    case ParamRule::kFiniteNonNegative:
      if (!(std::isfinite(v) && v >= 0.0)) need = ">= 0 and finite";
      break;
  }
  if (!need) return ONORM_OK;
  return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": " + name + " must be " + need + ", got " + number_text(v));
}

// Float dtypes only: the quantized ones are valid values no row tensor of these ops takes.
onorm_status check_float_rows(const std::string& op, const onorm_rows& r, const char* name) {
  if (onorm_status s = check_rows(r, name)) return s;
  if (is_quantized(r.dtype))
    return fail(ONORM_ERROR_UNSUPPORTED, op + ": " + name + ": " + dtype_name(r.dtype) + " is only a quantized norm output");
  return ONORM_OK;
}

// Blocks of memory a call reads or writes besides its row tensors: no written block may meet
// anything else, no read block may meet a written row tensor.
struct Block {
  const void* p;
  int64_t count;
  size_t size;
  const char* name;
  bool output;
};

onorm_status check_blocks(const std::string& op, const onorm_rows* ins, const char* const* in_names, int n_in,
                          const onorm_rows* outs, const char* const* out_names, int n_out, const Block* blocks,
                          int n_blocks) {
  for (int b = 0; b < n_blocks; ++b) {
    const Block& o = blocks[b];
    if (!o.p || o.count == 0) continue;
    const Region r = block_of(o.p, o.count, o.size);
    for (int i = 0; i < n_out; ++i)
      if (overlaps(region_of(outs[i]), r))
        return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": " + out_names[i] + " overlaps " + o.name);
    if (!o.output) continue;
    for (int i = 0; i < n_in; ++i)
      if (overlaps(region_of(ins[i]), r))
        return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": " + o.name + " overlaps " + in_names[i]);
    for (int c = 0; c < n_blocks; ++c) {
      if (c == b || !blocks[c].p || blocks[c].count == 0) continue;
      if (overlaps(r, block_of(blocks[c].p, blocks[c].count, blocks[c].size)))
        return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": " + o.name + " overlaps " + blocks[c].name);
    }
  }
  return ONORM_OK;
}

onorm_status validate_cross_entropy(const onorm_request& q, bool& empty) {
  const bool stats = q.stage == ONORM_STAGE_STATS, finish = q.stage == ONORM_STAGE_FINISH;
  const std::string op = stats ? "cross_entropy stats" : finish ? "cross_entropy finish" : "cross_entropy";
  const core::ops::Signature& sig = core::ops::CrossEntropy::kSignature;
  if (q.stage != ONORM_STAGE_WHOLE && !stats && !finish)
    return fail(ONORM_ERROR_INVALID_ARGUMENT, "stage " + std::to_string(static_cast<int>(q.stage)) + " is not an onorm_stage");
  if (q.inputs != 1 || q.outputs > (stats ? 0 : 1))
    return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": wrong number of row tensors");
  const onorm_rows& x = q.in[0];
  if (onorm_status s = check_float_rows(op, x, "logits")) return s;
  // A slice of the row starts at a column >= 0 (a whole call at 0).
  if (q.cols_offset < 0 || (q.stage == ONORM_STAGE_WHOLE && q.cols_offset != 0) ||
      q.cols_offset > INT64_MAX - x.cols)
    return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": col_offset " + std::to_string(q.cols_offset) + " is not a slice's start");
  if (stats && x.rows > 0 && !q.state_out) return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": states is NULL");
  if (finish && x.rows > 0 && !q.state_in) return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": states is NULL");
  if (q.outputs == 1) {
    if (onorm_status s = check_float_rows(op, q.out[0], "dlogits")) return s;
    if (q.out[0].rows != x.rows || q.out[0].cols != x.cols)
      return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": logits is " + shape_of(x) + " but dlogits is " + shape_of(q.out[0]));
  }
  for (int i = 0; i < sig.params; ++i)
    if (onorm_status s = check_param(op, sig.param[i], sig.param_rule[i], q.param[i])) return s;
  if (x.rows > 0 && !q.targets) return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": targets is NULL");
  if (x.rows > 0 && !stats && !q.row_out[0]) return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": loss is NULL");
  // Stats of a slice of no columns write the identity state of each row; a finish of one still
  // writes each row's loss.
  if (x.rows == 0 || (x.cols == 0 && q.stage == ONORM_STAGE_WHOLE)) {
    empty = true;
    return ONORM_OK;
  }
  if (q.outputs == 1) {
    const onorm_rows& y = q.out[0];
    const bool same_layout = y.data == x.data && y.row_stride == x.row_stride && dtype_size(y.dtype) == dtype_size(x.dtype);
    if (!same_layout && overlaps(region_of(x), region_of(y)))
      return fail(ONORM_ERROR_INVALID_ARGUMENT,
                  op + ": dlogits overlaps logits (only in place, with the same data, stride and dtype size, is allowed)");
  }
  const size_t record = sizeof(core::ops::CrossEntropy::StateRecord);
  const Block blocks[] = {{q.targets, x.rows, sizeof(int64_t), "targets", false},
                          {q.row_out[0], x.rows, sizeof(float), "loss", true},
                          {q.row_out[1], x.rows, sizeof(float), "lse", true},
                          {q.state_out, x.rows, record, "states", true},
                          {q.state_in, x.rows, record, "states", false}};
  const char* in_names[] = {"logits"};
  const char* out_names[] = {"dlogits"};
  return check_blocks(op, &x, in_names, 1, q.out, out_names, q.outputs, blocks, 5);
}

onorm_status validate_softmax_topk(const onorm_request& q, bool& empty) {
  const std::string op = "softmax_topk";
  if (q.inputs != 1 || q.outputs != 1) return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": wrong number of row tensors");
  const onorm_rows& x = q.in[0];
  const onorm_rows& v = q.out[0];
  if (onorm_status s = check_float_rows(op, x, "x")) return s;
  if (onorm_status s = check_float_rows(op, v, "values")) return s;
  if (q.k < 1 || q.k > x.cols)
    return fail(ONORM_ERROR_INVALID_ARGUMENT,
                op + ": k must be in [1, cols = " + std::to_string(x.cols) + "], got " + std::to_string(q.k));
  if (v.rows != x.rows || v.cols != q.k)
    return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": values must be rows x k = " + std::to_string(x.rows) + " x " +
                                                  std::to_string(q.k) + ", got " + shape_of(v));
  if (x.rows > 0 && !q.indices) return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": indices is NULL");
  if (x.rows > 0 && static_cast<i128>(x.rows) * q.k * 8 > INT64_MAX)
    return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": rows * k indices overflow int64 bytes");
  if (x.rows == 0) {
    empty = true;
    return ONORM_OK;
  }
  if (overlaps(region_of(x), region_of(v))) return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": values overlaps x");
  const Block blocks[] = {{q.indices, x.rows * q.k, sizeof(int64_t), "indices", true}};
  const char* in_names[] = {"x"};
  const char* out_names[] = {"values"};
  return check_blocks(op, &x, in_names, 1, &v, out_names, 1, blocks, 1);
}

// The size of one state of a row op's partial states (0: the op has none).
size_t state_size(onorm_op op) {
  switch (op) {
    case ONORM_OP_SOFTMAX:
    case ONORM_OP_LOG_SOFTMAX: return sizeof(onorm_softmax_state);
    case ONORM_OP_LAYER_NORM:
    case ONORM_OP_RMS_NORM: return sizeof(onorm_moments_state);
    case ONORM_OP_CROSS_ENTROPY: return sizeof(core::ops::CrossEntropy::StateRecord);
    default: return 0;
  }
}

onorm_status validate_merge(const onorm_request& q, bool& empty) {
  const std::string op = std::string(op_name(q.op)) + " merge";
  if (q.inputs != 0 || q.outputs != 0) return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": takes no row tensors");
  if (q.state_parts < 0 || q.state_rows < 0)
    return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": parts and rows must be >= 0, got " +
                                                  std::to_string(q.state_parts) + " and " + std::to_string(q.state_rows));
  const size_t size = state_size(q.op);
  if (static_cast<i128>(q.state_parts) * q.state_rows * static_cast<i128>(size) > INT64_MAX)
    return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": parts * rows states overflow int64 bytes");
  if (q.state_rows == 0) {
    empty = true;
    return ONORM_OK;
  }
  if (!q.state_out) return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": out is NULL");
  if (q.state_parts > 0 && !q.state_in) return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": in is NULL");
  if (q.state_parts > 0 && q.state_out != q.state_in &&
      overlaps(block_of(q.state_in, q.state_parts * q.state_rows, size), block_of(q.state_out, q.state_rows, size)))
    return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": out overlaps in (only out == in is allowed)");
  return ONORM_OK;
}

}  // namespace

onorm_status validate_request(const onorm_request& q, bool& empty) {
  empty = false;
  if (!core::ops::valid_op(q.op))
    return fail(ONORM_ERROR_INVALID_ARGUMENT, "op " + std::to_string(static_cast<int>(q.op)) + " is not an onorm_op");
  if (q.stage != ONORM_STAGE_WHOLE && state_size(q.op) == 0)
    return fail(ONORM_ERROR_INVALID_ARGUMENT, std::string(op_name(q.op)) + ": has no partial row states");
  if (q.stage == ONORM_STAGE_MERGE) return validate_merge(q, empty);
  if (q.op == ONORM_OP_CROSS_ENTROPY) return validate_cross_entropy(q, empty);
  if (q.op == ONORM_OP_SOFTMAX_TOPK) return validate_softmax_topk(q, empty);
  if (q.stage != ONORM_STAGE_WHOLE && q.stage != ONORM_STAGE_STATS && q.stage != ONORM_STAGE_FINISH)
    return fail(ONORM_ERROR_INVALID_ARGUMENT, "stage " + std::to_string(static_cast<int>(q.stage)) + " is not an onorm_stage");
  const core::ops::Signature& sig = core::ops::signature(q.op);
  const std::string op(op_name(q.op));
  const bool stats = q.stage == ONORM_STAGE_STATS, whole = q.stage == ONORM_STAGE_WHOLE;
  // Slots filled: the op's own, and the residual's optional ones (residual_out needs residual);
  // a stats call writes states, no row tensor; a finish takes no residual.
  const int optional_in = whole && (sig.residual || sig.added_input) ? 1 : 0, optional_out = whole && sig.residual ? 1 : 0;
  const int own_outputs = stats ? 0 : sig.outputs;
  if (q.inputs < sig.inputs || q.inputs > sig.inputs + optional_in || q.outputs < own_outputs ||
      q.outputs > own_outputs + optional_out)
    return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": wrong number of row tensors");
  if (stats && !q.state_out) return fail(ONORM_ERROR_INVALID_ARGUMENT, op + " stats: states is NULL");
  if (q.stage == ONORM_STAGE_FINISH && !q.state_in) return fail(ONORM_ERROR_INVALID_ARGUMENT, op + " finish: states is NULL");
  for (int i = 0; i < sig.row_ins; ++i)
    if (!q.row_in[i]) return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": " + sig.row_in[i] + " is NULL");
  if (q.outputs > sig.outputs && q.inputs == sig.inputs)
    return fail(ONORM_ERROR_INVALID_ARGUMENT,
                op + ": " + sig.output[sig.outputs] + " is given without " + sig.input[sig.inputs]);
  for (int i = 0; i < q.inputs; ++i)
    if (onorm_status s = check_rows(q.in[i], sig.input[i])) return s;
  for (int i = 0; i < q.outputs; ++i)
    if (onorm_status s = check_rows(q.out[i], sig.output[i])) return s;
  const onorm_rows& x = q.in[0];
  auto same_shape = [&](const onorm_rows& r, const char* name) -> onorm_status {
    if (r.rows == x.rows && r.cols == x.cols) return ONORM_OK;
    return fail(ONORM_ERROR_INVALID_ARGUMENT,
                op + ": " + sig.input[0] + " is " + shape_of(x) + " but " + name + " is " + shape_of(r));
  };
  for (int i = 1; i < q.inputs; ++i)
    if (onorm_status s = same_shape(q.in[i], sig.input[i])) return s;
  for (int i = 0; i < q.outputs; ++i)
    if (onorm_status s = same_shape(q.out[i], sig.output[i])) return s;
  for (int i = 0; i < sig.params; ++i)
    if (onorm_status s = check_param(op, sig.param[i], sig.param_rule[i], q.param[i])) return s;
  bool any_col = false;
  for (int i = 0; i < sig.cols; ++i) {
    any_col = any_col || q.col[i];
    if (!std::isfinite(q.col_offset[i]))
      return fail(ONORM_ERROR_INVALID_ARGUMENT,
                  op + ": the offset of " + sig.col[i] + " must be finite, got " + number_text(q.col_offset[i]));
  }
  if (any_col && dtype_size(q.col_dtype) == 0)
    return fail(ONORM_ERROR_INVALID_ARGUMENT,
                op + ": param_dtype " + std::to_string(static_cast<int>(q.col_dtype)) + " is not an onorm_dtype");
  // Quantized output: exactly one scale, the static one > 0 and finite; none otherwise.
  const bool quantized = is_quantized(q.out[0].dtype);
  const bool static_scale = q.y_static_scale != 0.0;
  if (quantized && sig.quantized_output) {
    if (static_scale == (q.y_scale != nullptr))
      return fail(ONORM_ERROR_INVALID_ARGUMENT,
                  op + ": a quantized " + dtype_name(q.out[0].dtype) +
                      " output needs exactly one of y_scale (dynamic) and y_static_scale (static)");
    if (static_scale && !(std::isfinite(q.y_static_scale) && q.y_static_scale > 0))
      return fail(ONORM_ERROR_INVALID_ARGUMENT,
                  op + ": y_static_scale must be > 0 and finite, got " + number_text(q.y_static_scale));
  } else if (q.y_scale || static_scale) {
    return fail(ONORM_ERROR_INVALID_ARGUMENT,
                op + ": y_scale and y_static_scale are only for an i8 or f8_e4m3 " + sig.output[0]);
  }
  // Quantized dtypes are valid values that only a quantizing output takes.
  for (int i = 0; i < q.inputs + q.outputs; ++i) {
    const onorm_rows& r = i < q.inputs ? q.in[i] : q.out[i - q.inputs];
    const bool quantizing_slot = i == q.inputs && sig.quantized_output;
    if (is_quantized(r.dtype) && !quantizing_slot)
      return fail(ONORM_ERROR_UNSUPPORTED, op + ": " + (i < q.inputs ? sig.input[i] : sig.output[i - q.inputs]) +
                                               ": " + dtype_name(r.dtype) + " is only a quantized norm output");
  }
  if (any_col && is_quantized(q.col_dtype))
    return fail(ONORM_ERROR_UNSUPPORTED, op + ": param_dtype " + dtype_name(q.col_dtype) + " is not taken");
  if (q.stage == ONORM_STAGE_FINISH && q.y_scale)
    return fail(ONORM_ERROR_UNSUPPORTED, op + " finish: dynamic quantization (y_scale) needs the whole row's values");
  // A stats call on rows of no columns writes the identity state of each row; a finish of one
  // still writes each row's statistics (mean, rstd) that are asked for: its rows are not empty.
  bool row_outputs = false;
  for (int i = 0; i < sig.row_outs; ++i) row_outputs = row_outputs || q.row_out[i];
  if (x.rows == 0 || (x.cols == 0 && !stats && !(q.stage == ONORM_STAGE_FINISH && row_outputs))) {
    empty = true;
    return ONORM_OK;
  }

  // Outputs: each may alias the inputs its signature names exactly (in place), and overlaps
  // nothing else.
  for (int o = 0; o < q.outputs; ++o) {
    const onorm_rows& out = q.out[o];
    const Region ro = region_of(out);
    for (int i = 0; i < q.inputs; ++i) {
      const onorm_rows& in = q.in[i];
      const bool same_layout = in.data == out.data && in.row_stride == out.row_stride &&
                               dtype_size(in.dtype) == dtype_size(out.dtype);
      const bool may_alias = (sig.alias[o] >> i) & 1u;
      if (!(same_layout && may_alias) && overlaps(region_of(in), ro))
        return fail(ONORM_ERROR_INVALID_ARGUMENT,
                    op + ": " + sig.output[o] + " overlaps " + sig.input[i] +
                        (may_alias ? " (only in place, with the same data, stride and dtype size, is allowed)"
                                   : " (not an allowed alias)"));
    }
    for (int p = 0; p < o; ++p)
      if (overlaps(region_of(q.out[p]), ro))
        return fail(ONORM_ERROR_INVALID_ARGUMENT, op + ": " + sig.output[o] + " overlaps " + sig.output[p]);
  }
  // Column vectors (read) and per-row outputs (written): blocks that no output may meet.
  Block blocks[ONORM_REQUEST_COLS + ONORM_REQUEST_ROW_OUTS + 3 + ONORM_REQUEST_ROW_INS + ONORM_REQUEST_COL_OUTS];
  int nblocks = 0;
  for (int i = 0; i < sig.cols; ++i)
    if (q.col[i]) blocks[nblocks++] = Block{q.col[i], x.cols, dtype_size(q.col_dtype), sig.col[i], false};
  for (int i = 0; i < sig.row_ins; ++i)
    blocks[nblocks++] = Block{q.row_in[i], x.rows, sizeof(float), sig.row_in[i], false};
  for (int i = 0; i < sig.row_outs; ++i)
    if (q.row_out[i]) blocks[nblocks++] = Block{q.row_out[i], x.rows, sizeof(float), sig.row_out[i], true};
  for (int i = 0; i < sig.col_outs; ++i)
    if (q.col_out[i]) blocks[nblocks++] = Block{q.col_out[i], x.cols, sizeof(float), sig.col_out[i], true};
  if (q.y_scale) blocks[nblocks++] = Block{q.y_scale, x.rows, sizeof(float), "y_scale", true};
  if (q.state_out) blocks[nblocks++] = Block{q.state_out, x.rows, state_size(q.op), "states", true};
  if (q.state_in) blocks[nblocks++] = Block{q.state_in, x.rows, state_size(q.op), "states", false};
  return check_blocks(op, q.in, sig.input, q.inputs, q.out, sig.output, q.outputs, blocks, nblocks);
}

}  // namespace onorm

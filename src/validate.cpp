#include "validate.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "last_error.hpp"

namespace onorm {

size_t dtype_size(int dtype) {
  switch (dtype) {
    case ONORM_F32: return 4;
    case ONORM_F16: return 2;
    case ONORM_BF16: return 2;
    case ONORM_F64: return 8;
    case ONORM_F8_E4M3: return 1;
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
    default: return "invalid dtype";
  }
}

const char* op_name(onorm_op op) {
  switch (op) {
    case ONORM_OP_SOFTMAX: return "softmax";
    case ONORM_OP_LOG_SOFTMAX: return "log_softmax";
    case ONORM_OP_LAYER_NORM: return "layer_norm";
    case ONORM_OP_RMS_NORM: return "rms_norm";
  }
  return "unknown op";
}

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

onorm_status validate_request(const onorm_request& q, bool& empty) {
  empty = false;
  if (onorm_status s = check_rows(q.x, "x")) return s;
  if (onorm_status s = check_rows(q.y, "y")) return s;
  if (q.x.rows != q.y.rows || q.x.cols != q.y.cols)
    return fail(ONORM_ERROR_INVALID_ARGUMENT,
                std::string(op_name(q.op)) + ": x is " + shape_of(q.x) + " but y is " + shape_of(q.y));
  const bool is_norm = q.op == ONORM_OP_LAYER_NORM || q.op == ONORM_OP_RMS_NORM;
  if (is_norm && (std::isnan(q.eps) || q.eps < 0))
    return fail(ONORM_ERROR_INVALID_ARGUMENT,
                std::string(op_name(q.op)) + ": eps must be >= 0 and not NaN, got " + number_text(q.eps));
  if (q.x.dtype == ONORM_F8_E4M3 || q.y.dtype == ONORM_F8_E4M3)
    return fail(ONORM_ERROR_UNSUPPORTED,
                std::string(op_name(q.op)) + ": f8_e4m3 is reserved for the quantizing operations");
  if (q.x.rows == 0 || q.x.cols == 0) {
    empty = true;
    return ONORM_OK;
  }

  const Region x = region_of(q.x), y = region_of(q.y);
  const bool same_layout = q.x.data == q.y.data && q.x.row_stride == q.y.row_stride &&
                           dtype_size(q.x.dtype) == dtype_size(q.y.dtype);
  if (!same_layout && overlaps(x, y))
    return fail(ONORM_ERROR_INVALID_ARGUMENT,
                std::string(op_name(q.op)) +
                    ": y overlaps x (only in place, with the same data, stride and dtype size, is allowed)");
  const size_t xs = dtype_size(q.x.dtype);
  struct Named { const void* p; int64_t count; size_t size; const char* name; bool output; };
  const Named others[] = {
      {q.gamma, q.x.cols, xs, "gamma", false}, {q.beta, q.x.cols, xs, "beta", false},
      {q.mean, q.x.rows, sizeof(float), "mean", true}, {q.rstd, q.x.rows, sizeof(float), "rstd", true}};
  for (const Named& o : others) {
    if (o.p == nullptr) continue;
    const Region r = block_of(o.p, o.count, o.size);
    if (overlaps(y, r))
      return fail(ONORM_ERROR_INVALID_ARGUMENT, std::string(op_name(q.op)) + ": y overlaps " + o.name);
    if (o.output && overlaps(x, r))
      return fail(ONORM_ERROR_INVALID_ARGUMENT, std::string(op_name(q.op)) + ": " + o.name + " overlaps x");
  }
  for (const Named& o : others) {
    if (!o.output || o.p == nullptr) continue;
    for (const Named& i : others) {
      if (&i == &o || i.p == nullptr) continue;
      if (overlaps(block_of(o.p, o.count, o.size), block_of(i.p, i.count, i.size)))
        return fail(ONORM_ERROR_INVALID_ARGUMENT,
                    std::string(op_name(q.op)) + ": " + o.name + " overlaps " + i.name);
    }
  }
  return ONORM_OK;
}

}  // namespace onorm

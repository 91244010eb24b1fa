// Every op of the list (core/ops/op_list.h) by its id: the type behind an onorm_op, the name,
// the signature, and a call of a generic function with the op's type.
#pragma once

#include "onlinenorm/core/ops/op_list.h"  // the list and, in C++, every op's definition

namespace onorm {
namespace core {
namespace ops {

#define ONORM_OP_VISIT_CASE_(ID, name, Type) \
  case ONORM_OP_##ID:                        \
    return f(Type{});

// f(Type{}) for the op's definition; ops outside the list get f(Softmax{}) never: the caller
// validated the id (valid_op).
template <typename F>
inline auto visit(onorm_op op, F&& f) -> decltype(f(Softmax{})) {
  switch (op) {
    ONORM_OP_LIST(ONORM_OP_VISIT_CASE_)
    default: break;
  }
  return f(Softmax{});
}

// The same for the column ops (ONORM_COLUMN_OP_LIST); others get f(LayerNormBackward{}) never.
template <typename F>
inline auto visit_column_op(onorm_op op, F&& f) -> decltype(f(LayerNormBackward{})) {
  switch (op) {
    ONORM_COLUMN_OP_LIST(ONORM_OP_VISIT_CASE_)
    default: break;
  }
  return f(LayerNormBackward{});
}

// The same for the driver ops (ONORM_DRIVER_OP_LIST); others get f(CrossEntropy{}) never.
template <typename F>
inline auto visit_driver_op(onorm_op op, F&& f) -> decltype(f(CrossEntropy{})) {
  switch (op) {
    ONORM_DRIVER_OP_LIST(ONORM_OP_VISIT_CASE_)
    default: break;
  }
  return f(CrossEntropy{});
}

inline bool is_row_op(int op) { return op >= 0 && op < ONORM_OP_COUNT; }
inline bool is_column_op(int op) { return op > ONORM_OP_COLUMN_OPS_BEFORE_ && op < ONORM_OP_COLUMN_END_; }
inline bool is_driver_op(int op) { return op > ONORM_OP_DRIVER_OPS_BEFORE_ && op < ONORM_OP_ALL_COUNT; }
inline bool valid_op(int op) { return is_row_op(op) || is_column_op(op) || is_driver_op(op); }

inline const char* name(onorm_op op) {
  switch (op) {
#define ONORM_OP_NAME_CASE(ID, name, Type) \
  case ONORM_OP_##ID:                      \
    return #name;
    ONORM_OP_LIST(ONORM_OP_NAME_CASE)
    ONORM_COLUMN_OP_LIST(ONORM_OP_NAME_CASE)
    ONORM_DRIVER_OP_LIST(ONORM_OP_NAME_CASE)
#undef ONORM_OP_NAME_CASE
    default: break;
  }
  return "unknown op";
}

inline const Signature& signature(onorm_op op) {
  if (is_column_op(op)) return visit_column_op(op, [](auto o) -> const Signature& { return decltype(o)::kSignature; });
  if (is_driver_op(op)) return visit_driver_op(op, [](auto o) -> const Signature& { return decltype(o)::kSignature; });
  return visit(op, [](auto o) -> const Signature& { return decltype(o)::kSignature; });
}

}  // namespace ops
}  // namespace core
}  // namespace onorm

#undef ONORM_OP_VISIT_CASE_

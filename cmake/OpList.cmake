# The ops of core/ops/op_list.h (their C++ type names) for the GPU backends' generated
# translation units, and the element type of each GPU dtype.
file(STRINGS "${PROJECT_SOURCE_DIR}/core/include/onlinenorm/core/ops/op_list.h" _onorm_op_lines
     REGEX "^[ ]*X\\([A-Z_]+, *[a-z_]+, *[A-Za-z]+\\)")
set(ONORM_OP_TYPES "")
foreach(_line IN LISTS _onorm_op_lines)
  string(REGEX REPLACE "^[ ]*X\\([A-Z_]+, *[a-z_]+, *([A-Za-z]+)\\).*" "\\1" _type "${_line}")
  list(APPEND ONORM_OP_TYPES ${_type})
endforeach()

function(onorm_gpu_element_type dtype out)
  if(dtype STREQUAL "f32")
    set(${out} float PARENT_SCOPE)
  elseif(dtype STREQUAL "f16")
    set(${out} core::f16_bits PARENT_SCOPE)
  else()
    set(${out} core::bf16_bits PARENT_SCOPE)
  endif()
endfunction()

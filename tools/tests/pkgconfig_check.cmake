# Installs the build tree into a scratch prefix, then builds and runs a C program with the flags
# `pkg-config --cflags --libs onlinenorm` gives for that prefix: the installed onlinenorm.pc must
# point into wherever the tree was installed.
# -DBUILD_DIR -DWORK_DIR -DPKG_CONFIG -DC_COMPILER [-DEXTRA_FLAGS: the sanitizer flags the build used]
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}"
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(rc)
  message(FATAL_ERROR "cmake --install failed: ${err}")
endif()
file(GLOB_RECURSE pcs "${prefix}/*/onlinenorm.pc")
list(LENGTH pcs n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "expected one installed onlinenorm.pc, found: ${pcs}")
endif()
get_filename_component(pc_dir "${pcs}" DIRECTORY)
get_filename_component(pc_parent "${pc_dir}" NAME)
if(NOT pc_parent STREQUAL "pkgconfig")
  message(FATAL_ERROR "onlinenorm.pc is not in a pkgconfig folder: ${pcs}")
endif()
set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
unset(ENV{PKG_CONFIG_LIBDIR})
execute_process(COMMAND ${PKG_CONFIG} --cflags --libs onlinenorm
                RESULT_VARIABLE rc OUTPUT_VARIABLE flags ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
if(rc)
  message(FATAL_ERROR "pkg-config --cflags --libs onlinenorm failed: ${err}")
endif()
message(STATUS "pkg-config: ${flags}")
separate_arguments(flag_list UNIX_COMMAND "${flags}")
set(libdir "")
foreach(f IN LISTS flag_list)
  if(f MATCHES "^-L(.*)$")
    get_filename_component(libdir "${CMAKE_MATCH_1}" REALPATH)
  endif()
endforeach()
get_filename_component(real_prefix "${prefix}" REALPATH)
string(FIND "${libdir}" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "pkg-config's -L (${libdir}) is not under the install prefix ${real_prefix}")
endif()
file(WRITE "${WORK_DIR}/main.c" [=[
#include <onlinenorm/onlinenorm.h>
#include <stdio.h>
int main(void) {
  onorm_context ctx = NULL;
  if (onorm_create(ONORM_BACKEND_CPU, 0, &ctx) != ONORM_OK) return 1;
  float x[3] = {1.0f, 2.0f, 3.0f}, y[3] = {0};
  onorm_rows rx = {x, ONORM_F32, 1, 3, 3}, ry = {y, ONORM_F32, 1, 3, 3};
  const int bad = onorm_softmax(ctx, &rx, &ry) != ONORM_OK || !(y[2] > y[1] && y[1] > y[0]);
  printf("%s: %g %g %g\n", onorm_backend_name(ctx), y[0], y[1], y[2]);
  onorm_destroy(ctx);
  return bad;
}
]=])
separate_arguments(extra UNIX_COMMAND "${EXTRA_FLAGS}")
execute_process(COMMAND ${C_COMPILER} ${extra} "${WORK_DIR}/main.c" -o "${WORK_DIR}/main" ${flag_list}
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc)
  message(FATAL_ERROR "compiling with the pkg-config flags failed: ${err}")
endif()
# The installed library first; what the environment already names (e.g. a Highway outside the
# system folders) stays reachable.
set(ENV{LD_LIBRARY_PATH} "${libdir}:$ENV{LD_LIBRARY_PATH}")
execute_process(COMMAND "${WORK_DIR}/main" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc)
  message(FATAL_ERROR "the pkg-config-built program failed (${rc}): ${out}${err}")
endif()
message(STATUS "${out}")
file(REMOVE_RECURSE "${WORK_DIR}")

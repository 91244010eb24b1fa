/* The C ABI header compiled as C (C99/C11): every declaration must be valid C, and a small
   program in C must be able to run an op. Called from cpp_api_test. */
#include <math.h>
#include <stdlib.h>

#include "onlinenorm/onlinenorm.h"

int onorm_c_abi_check(void) {
  onorm_context ctx = NULL;
  if (onorm_create(ONORM_BACKEND_CPU, 0, &ctx) != ONORM_OK) return 1;
  float x[6] = {1, 2, 3, -INFINITY, -INFINITY, -INFINITY};
  float y[6] = {0};
  onorm_rows xr = {x, ONORM_F32, 2, 3, 3};
  onorm_rows yr = {y, ONORM_F32, 2, 3, 3};
  int bad = 0;
  if (onorm_softmax(ctx, &xr, &yr) != ONORM_OK) bad |= 2;
  const double e1 = exp(-2.0), e2 = exp(-1.0), s = e1 + e2 + 1.0;
  if (fabs(y[0] - e1 / s) > 1e-6 || fabs(y[2] - 1.0 / s) > 1e-6) bad |= 4;
  if (y[3] != 0.0f || y[4] != 0.0f || y[5] != 0.0f) bad |= 8;
  onorm_rows broken = xr;
  broken.row_stride = 1;
  if (onorm_softmax(ctx, &broken, &yr) != ONORM_ERROR_INVALID_ARGUMENT) bad |= 16;
  if (onorm_last_error()[0] == '\0') bad |= 32;
  onorm_destroy(ctx);
  return bad;
}

/* Enum arguments with values no enumerator has, as any C caller may pass (in C++ such values
   are not valid values of these enums, so they are passed from here). Returns a bit mask of
   the checks that failed. */
int onorm_c_out_of_range_enums(void) {
  int bad = 0;
  onorm_context ctx = NULL;
  if (onorm_create((onorm_backend)7, 0, &ctx) != ONORM_ERROR_INVALID_ARGUMENT) bad |= 1;
  if (onorm_create((onorm_backend)-1, 0, &ctx) != ONORM_ERROR_INVALID_ARGUMENT) bad |= 2;
  if (onorm_backend_device_count((onorm_backend)9) != 0) bad |= 4;
  if (onorm_dtype_size((onorm_dtype)-1) != 0 || onorm_dtype_size((onorm_dtype)1000) != 0) bad |= 8;
  if (onorm_status_string((onorm_status)77)[0] == '\0') bad |= 16;
  if (onorm_create(ONORM_BACKEND_CPU, 0, &ctx) != ONORM_OK) return bad | 32;
  float x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0};
  onorm_rows xr = {x, (onorm_dtype)-1, 1, 4, 4};
  onorm_rows yr = {y, ONORM_F32, 1, 4, 4};
  if (onorm_softmax(ctx, &xr, &yr) != ONORM_ERROR_INVALID_ARGUMENT) bad |= 64;
  xr.dtype = ONORM_F32;
  yr.dtype = (onorm_dtype)1000;
  if (onorm_softmax(ctx, &xr, &yr) != ONORM_ERROR_INVALID_ARGUMENT) bad |= 128;
  if (y[0] != 0 || y[3] != 0) bad |= 256;
  if (onorm_memcpy(ctx, y, x, 4, (onorm_copy_kind)9) != ONORM_ERROR_INVALID_ARGUMENT) bad |= 512;
  onorm_destroy(ctx);
  return bad;
}

/* Softmax backward from C: y = (0.25, 0.75), dy = (1, 3) give dx = (-0.375, 0.375), here written
   over dy (an exact alias); a dy dtype no enumerator has is INVALID_ARGUMENT, nothing written. */
int onorm_c_softmax_backward_check(void) {
  int bad = 0;
  onorm_context ctx = NULL;
  if (onorm_create(ONORM_BACKEND_CPU, 0, &ctx) != ONORM_OK) return 1;
  float y[2] = {0.25f, 0.75f}, dy[2] = {1.0f, 3.0f};
  onorm_rows yr = {y, ONORM_F32, 1, 2, 2};
  onorm_rows dyr = {dy, (onorm_dtype)-1, 1, 2, 2};
  if (onorm_softmax_backward(ctx, &yr, &dyr, &dyr) != ONORM_ERROR_INVALID_ARGUMENT) bad |= 2;
  if (dy[0] != 1.0f || dy[1] != 3.0f) bad |= 4;
  dyr.dtype = ONORM_F32;
  if (onorm_softmax_backward(ctx, &yr, &dyr, &dyr) != ONORM_OK) bad |= 8;
  if (dy[0] != -0.375f || dy[1] != 0.375f) bad |= 16;
  onorm_destroy(ctx);
  return bad;
}

/* Log-softmax backward from C: y = (0, -inf), dy = (1, 3) give dx = (1 - 4, 3 - 0) = (-3, 3). */
int onorm_c_log_softmax_backward_check(void) {
  int bad = 0;
  onorm_context ctx = NULL;
  if (onorm_create(ONORM_BACKEND_CPU, 0, &ctx) != ONORM_OK) return 1;
  float y[2] = {0.0f, -INFINITY}, dy[2] = {1.0f, 3.0f}, dx[2] = {7.0f, 7.0f};
  onorm_rows yr = {y, ONORM_F32, 1, 2, 2}, dyr = {dy, ONORM_F32, 1, 2, 2}, dxr = {dx, ONORM_F32, 1, 2, 2};
  if (onorm_log_softmax_backward(ctx, &yr, &dyr, &dxr) != ONORM_OK) bad |= 2;
  if (dx[0] != -3.0f || dx[1] != 3.0f) bad |= 4;
  onorm_destroy(ctx);
  return bad;
}

/* onorm_norm from C: RMSNorm of h = x + residual = (3, -3) (rstd 1/3 with eps 0), weight_offset
   1 and gamma 0 (scale 1): y = (1, -1), residual_out = (3, -3); a struct_size of 0 is refused. */
int onorm_c_norm_check(void) {
  int bad = 0;
  onorm_context ctx = NULL;
  if (onorm_create(ONORM_BACKEND_CPU, 0, &ctx) != ONORM_OK) return 1;
  float x[2] = {1.0f, -1.0f}, r[2] = {2.0f, -2.0f}, h[2] = {0, 0}, y[2] = {0, 0}, gamma[2] = {0, 0};
  onorm_rows xr = {x, ONORM_F32, 1, 2, 2}, rr = {r, ONORM_F32, 1, 2, 2}, hr = {h, ONORM_F32, 1, 2, 2},
             yr = {y, ONORM_F32, 1, 2, 2};
  onorm_norm_args a;
  onorm_norm_args_init(&a, ONORM_RMS_NORM);
  a.gamma = gamma;
  a.param_dtype = ONORM_F32;
  a.weight_offset = 1.0;
  a.residual = &rr;
  a.residual_out = &hr;
  if (onorm_norm(ctx, &xr, &a, &yr) != ONORM_OK) bad |= 2;
  if (y[0] != 1.0f || y[1] != -1.0f || h[0] != 3.0f || h[1] != -3.0f) bad |= 4;
  a.struct_size = 0;
  y[0] = 7.0f;
  if (onorm_norm(ctx, &xr, &a, &yr) != ONORM_ERROR_INVALID_ARGUMENT || y[0] != 7.0f) bad |= 8;
  onorm_destroy(ctx);
  return bad;
}

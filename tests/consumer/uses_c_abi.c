#include <onlinenorm/onlinenorm.h>

/* Runs RMSNorm on one row through the C ABI; returns 0 on success. */
int consumer_c_rms(float* y) {
  onorm_context ctx = 0;
  if (onorm_create(ONORM_BACKEND_CPU, 0, &ctx) != ONORM_OK) return 1;
  float x[4] = {1, -1, 1, -1};
  onorm_rows xr = {x, ONORM_F32, 1, 4, 4};
  onorm_rows yr = {y, ONORM_F32, 1, 4, 4};
  const onorm_status s = onorm_rms_norm(ctx, &xr, 0, 0.0, &yr, 0);
  onorm_destroy(ctx);
  return s == ONORM_OK ? 0 : 2;
}

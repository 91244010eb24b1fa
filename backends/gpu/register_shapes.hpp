// The register placement's row shapes, per warp width and vector width, smallest first:
// TRY(threads per row, vectors per thread and input, block). The planner (row_plan.hpp) takes
// the first shape whose TPR * ITEMS * vector width covers the row. One thread holds at most
// 32 floats per input; a row group never exceeds the warp, blocks are whole warps. Measured
// choices (bench/cuda/NOTES.md): one row per group; on NVIDIA, short rows take the "wide"
// entries (half the lanes per row, twice the vectors per thread: fewer shuffle levels, more
// bytes in flight per thread), ONLINENORM_TUNE=short_wide=0 the plain ones. Three items a
// thread where a row of three times a power of two (96, 192, 384) left a quarter of the lanes
// idle: 16-bit rows of 65-384 columns, f32 of 65-96 (f32 at 129-192 and 257-384 measured slower
// so; bench/RESULTS.md, issue 11). Models' hidden sizes between the powers of two (2560, 3584,
// 5120, 7168) have shapes that fill them: blocks of five and seven warps, or five and seven
// items a thread.
#pragma once

// ------------------------------------------------------------- 32-lane warps (NVIDIA, RDNA)
// 4 elements per 16-byte vector (f32); the comment is the widest row each shape holds.
#define ONORM_GPU_W32_SHAPES_VEC4(TRY) \
  TRY(8, 1, 256)     /* 32 */          \
  TRY(16, 1, 256)    /* 64 */          \
  TRY(32, 1, 256)    /* 128 */         \
  TRY(32, 2, 256)    /* 256 */         \
  TRY(32, 4, 256)    /* 512 */         \
  TRY(32, 6, 256)    /* 768 */         \
  TRY(32, 8, 256)    /* 1024 */        \
  TRY(96, 4, 96)     /* 1536 */        \
  TRY(128, 4, 128)   /* 2048 */        \
  TRY(160, 4, 160)   /* 2560 */        \
  TRY(192, 4, 192)   /* 3072 */        \
  TRY(224, 4, 224)   /* 3584 */        \
  TRY(256, 4, 256)   /* 4096 */        \
  TRY(160, 8, 160)   /* 5120 */        \
  TRY(384, 4, 384)   /* 6144 */        \
  TRY(224, 8, 224)   /* 7168 */        \
  TRY(512, 4, 512)   /* 8192 */        \
  TRY(384, 8, 384)   /* 12288 */       \
  TRY(512, 8, 512)   /* 16384 */
// f32 rows of 5121-8192 columns of ops whose finish reads two column vectors (LayerNorm): 32
// floats a thread, as 5120 and 7168 in the plain list, where the plain 6144 and 8192 shapes'
// 16 measured slower (8192's blocks of 512 spill under their cap; bench/RESULTS.md).
#define ONORM_GPU_W32_TWO_COLUMN_SHAPES_VEC4(TRY) \
  TRY(192, 8, 192)   /* 6144 */                 \
  TRY(224, 8, 224)   /* 7168 */                 \
  TRY(256, 8, 256)   /* 8192 */
// 8 elements per 16-byte vector (f16, bf16).
#define ONORM_GPU_W32_SHAPES_VEC8(TRY) \
  TRY(4, 1, 256)     /* 32 */          \
  TRY(8, 1, 256)     /* 64 */          \
  TRY(16, 1, 256)    /* 128 */         \
  TRY(32, 1, 256)    /* 256 */         \
  TRY(16, 3, 256)    /* 384 */         \
  TRY(32, 2, 256)    /* 512 */         \
  TRY(32, 3, 256)    /* 768 */         \
  TRY(32, 4, 256)    /* 1024 */        \
  TRY(64, 3, 64)     /* 1536 */        \
  TRY(128, 2, 128)   /* 2048 */        \
  TRY(160, 2, 160)   /* 2560 */        \
  TRY(128, 3, 128)   /* 3072 */        \
  TRY(224, 2, 224)   /* 3584 */        \
  TRY(256, 2, 256)   /* 4096 */        \
  TRY(160, 4, 160)   /* 5120 */        \
  TRY(384, 2, 384)   /* 6144 */        \
  TRY(224, 4, 224)   /* 7168 */        \
  TRY(512, 2, 512)   /* 8192 */        \
  TRY(384, 4, 384)   /* 12288 */       \
  TRY(512, 4, 512)   /* 16384 */
// 16-bit rows with the norms' options (the residual add reads two rows): 32 elements per
// thread and input, the bytes in flight per thread of the f32 rows, for 3073-8192 columns
// (2048 and 6144 measured slower so: bench/RESULTS.md, issue 12).
#define ONORM_GPU_W32_OPTIONS_SHAPES_VEC8(TRY) \
  TRY(128, 4, 128)   /* 4096 */              \
  TRY(256, 4, 256)   /* 8192 */
// Dense 16-bit rows of ops that read one input: 64 elements per thread, a quarter of the
// threads per row, so that a thread's fixed work (the block reductions, the coefficients, the
// column vectors' addresses) is spread over four times the elements; tried first from
// kDenseMinCols (row_plan.hpp). Measured on an H100 (bench/RESULTS.md, issue 11): faster for
// every op at 8192-16384 columns and for LayerNorm from 4096; slower for the others below. On an
// H200, with the column vectors' loads batched, LayerNorm from 1024 (groups of 16 and 32 lanes);
// 48 elements per thread where that fills every lane of rows of three times a power of two
// (768, 1536, 3072), which left a quarter of them idle in the 64-element shapes. LayerNorm's
// rows of 65-512 columns too, before the wide short shapes; the other ops' from 2049 columns.
#define ONORM_GPU_W32_DENSE_SHAPES_VEC8(TRY) \
  TRY(2, 6, 256)     /* 96 */              \
  TRY(2, 8, 256)     /* 128 */             \
  TRY(4, 6, 256)     /* 192 */             \
  TRY(4, 8, 256)     /* 256 */             \
  TRY(8, 6, 256)     /* 384 */             \
  TRY(8, 8, 256)     /* 512 */             \
  TRY(16, 6, 256)    /* 768 */             \
  TRY(16, 8, 256)    /* 1024 */            \
  TRY(32, 6, 256)    /* 1536 */            \
  TRY(32, 8, 256)    /* 2048 */            \
  TRY(64, 5, 64)     /* 2560 */            \
  TRY(64, 6, 64)     /* 3072 */            \
  TRY(64, 7, 64)     /* 3584 */            \
  TRY(64, 8, 64)     /* 4096 */            \
  TRY(128, 5, 128)   /* 5120 */            \
  TRY(96, 8, 96)     /* 6144 */            \
  TRY(128, 7, 128)   /* 7168 */            \
  TRY(128, 8, 128)   /* 8192 */            \
  TRY(192, 8, 192)   /* 12288 */           \
  TRY(256, 8, 256)   /* 16384 */
// Wide short rows, tried first where the device asks for them (short_wide).
#define ONORM_GPU_W32_WIDE_SHAPES_VEC4(TRY) \
  TRY(4, 2, 256)     /* 32 */               \
  TRY(8, 2, 256)     /* 64 */               \
  TRY(8, 3, 256)     /* 96 */               \
  TRY(16, 2, 256)    /* 128 */              \
  TRY(16, 4, 256)    /* 256 */
#define ONORM_GPU_W32_WIDE_SHAPES_VEC8(TRY) \
  TRY(4, 1, 256)     /* 32 */               \
  TRY(4, 2, 256)     /* 64 */               \
  TRY(4, 3, 256)     /* 96 */               \
  TRY(8, 2, 256)     /* 128 */              \
  TRY(8, 3, 256)     /* 192 */              \
  TRY(16, 2, 256)    /* 256 */

// ------------------------------------------------------------- 64-lane waves (CDNA)
// Wider waves take 64-lane groups up to 1K-2K columns.
#define ONORM_GPU_W64_SHAPES_VEC4(TRY) \
  TRY(8, 1, 256)     /* 32 */          \
  TRY(16, 1, 256)    /* 64 */          \
  TRY(32, 1, 256)    /* 128 */         \
  TRY(64, 1, 256)    /* 256 */         \
  TRY(64, 2, 256)    /* 512 */         \
  TRY(64, 4, 256)    /* 1024 */        \
  TRY(128, 4, 128)   /* 2048 */        \
  TRY(256, 4, 256)   /* 4096 */        \
  TRY(512, 4, 512)   /* 8192 */        \
  TRY(512, 8, 512)   /* 16384 */
#define ONORM_GPU_W64_SHAPES_VEC8(TRY) \
  TRY(4, 1, 256)     /* 32 */          \
  TRY(8, 1, 256)     /* 64 */          \
  TRY(16, 1, 256)    /* 128 */         \
  TRY(32, 1, 256)    /* 256 */         \
  TRY(64, 1, 256)    /* 512 */         \
  TRY(64, 2, 256)    /* 1024 */        \
  TRY(64, 4, 256)    /* 2048 */        \
  TRY(256, 2, 256)   /* 4096 */        \
  TRY(384, 2, 384)   /* 6144 */        \
  TRY(512, 2, 512)   /* 8192 */        \
  TRY(384, 4, 384)   /* 12288 */       \
  TRY(512, 4, 512)   /* 16384 */

// The register regime's row shapes for 32-lane warps (NVIDIA, and RDNA under HIP), smallest
// first: (threads per row, vectors per thread, block, rows per group). One thread holds at most
// 32 floats; one row per group (several collapsed 16-bit short rows on the H200,
// bench/cuda/NOTES.md v2). A backend expands a list with its own TRY(TPR, ITEMS, BLOCK, RPG),
// which launches the first shape whose TPR * ITEMS * vector width covers the row.
#pragma once

// 4 elements per 16-byte vector (f32); the comment is the widest row each shape holds.
#define ONORM_GPU_W32_SHAPES_VEC4(TRY) \
  TRY(8, 1, 256, 1)     /* 32 */       \
  TRY(16, 1, 256, 1)    /* 64 */       \
  TRY(32, 1, 256, 1)    /* 128 */      \
  TRY(32, 2, 256, 1)    /* 256 */      \
  TRY(32, 4, 256, 1)    /* 512 */      \
  TRY(32, 8, 256, 1)    /* 1024 */     \
  TRY(128, 4, 128, 1)   /* 2048 */     \
  TRY(256, 4, 256, 1)   /* 4096 */     \
  TRY(512, 4, 512, 1)   /* 8192 */     \
  TRY(512, 8, 512, 1)   /* 16384 */

// 8 elements per 16-byte vector (f16, bf16).
#define ONORM_GPU_W32_SHAPES_VEC8(TRY) \
  TRY(4, 1, 256, 1)     /* 32 */       \
  TRY(8, 1, 256, 1)     /* 64 */       \
  TRY(16, 1, 256, 1)    /* 128 */      \
  TRY(32, 1, 256, 1)    /* 256 */      \
  TRY(32, 2, 256, 1)    /* 512 */      \
  TRY(32, 4, 256, 1)    /* 1024 */     \
  TRY(128, 2, 128, 1)   /* 2048 */     \
  TRY(256, 2, 256, 1)   /* 4096 */     \
  TRY(512, 2, 512, 1)   /* 8192 */     \
  TRY(512, 4, 512, 1)   /* 16384 */

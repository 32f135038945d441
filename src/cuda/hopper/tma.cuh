/* tma.cuh — host-side creation of TMA tensor maps (CUtensorMap) for the Hopper kernels.
   The driver's cuTensorMapEncodeTiled is reached through the runtime (cudaGetDriverEntryPointByVersion),
   so the library needs no -lcuda. Maps are built per call on the host (about a microsecond) and passed to
   the kernel by value as __grid_constant__ parameters. */
#ifndef BSK_HOPPER_TMA_CUH
#define BSK_HOPPER_TMA_CUH

#include <cuda.h> /* CUtensorMap and its enums: header only */
#include "../cuda_internal.h"

/* A row-major 16-bit matrix of `rows` x `cols` elements (row stride `ld` elements) seen as 2-D tiles of
   box_rows x box_cols (box_cols * 2 <= 128 bytes), 128-byte swizzled in shared memory. Out-of-range
   elements of a box read as zero. BSK_ERR_UNSUPPORTED when the driver cannot encode it. */
bsk_status bsk_hopper_tmap_2d(CUtensorMap *map, const void *base, bsk_dtype t, uint64_t rows, uint64_t cols,
                              uint64_t ld, uint32_t box_rows, uint32_t box_cols);

/* Any rank (1..5, e.g. the attention kernel's 4-D strided views): dims[0] innermost, strides[rank-1] in bytes
   of dimensions 1.., box per dimension, 128-byte swizzled, zero-filled outside. */
bsk_status bsk_hopper_tmap_encode(CUtensorMap *map, const void *base, bsk_dtype t, uint32_t rank, const cuuint64_t *dims,
                                  const cuuint64_t *strides, const cuuint32_t *box);

/* `count` contiguous row-major rows x cols matrices (BSR values: count = nnzb blocks) as a 3-D tensor
   [count][rows][cols], boxes of 1 x box_rows x box_cols, 128-byte swizzled. */
bsk_status bsk_hopper_tmap_3d(CUtensorMap *map, const void *base, bsk_dtype t, uint64_t count, uint64_t rows,
                              uint64_t cols, uint32_t box_rows, uint32_t box_cols);

/* The same two with the TMA L2 promotion chosen by the caller (promo 0: 256 B as above, 1 none, 2 64 B, 3 128 B). */
bsk_status bsk_hopper_tmap_2d_promo(CUtensorMap *map, const void *base, bsk_dtype t, uint64_t rows, uint64_t cols,
                                    uint64_t ld, uint32_t box_rows, uint32_t box_cols, int promo);
bsk_status bsk_hopper_tmap_3d_promo(CUtensorMap *map, const void *base, bsk_dtype t, uint64_t count, uint64_t rows,
                                    uint64_t cols, uint32_t box_rows, uint32_t box_cols, int promo);

/* The same two shapes without swizzle, for L2 prefetches only (cp.async.bulk.prefetch.tensor): no shared-memory
   layout is involved, so a box may be wider than 128 bytes (up to 256 elements per dimension) and one
   prefetch covers a whole block or B panel. */
bsk_status bsk_hopper_tmap_2d_plain(CUtensorMap *map, const void *base, bsk_dtype t, uint64_t rows, uint64_t cols,
                                    uint64_t ld, uint32_t box_rows, uint32_t box_cols);
bsk_status bsk_hopper_tmap_3d_plain(CUtensorMap *map, const void *base, bsk_dtype t, uint64_t count, uint64_t rows,
                                    uint64_t cols, uint32_t box_rows, uint32_t box_cols);

/* The 3-D shape with the swizzle chosen by the caller: swizzle_bytes 128, 64 or 32 (the box's inner extent in bytes
   must not exceed it), 0 for none. The small-block SpMM loads its 32 x 32 / 16 x 16 blocks with the swizzle of
   their row width (spmm_small_kernel.cuh). */
bsk_status bsk_hopper_tmap_3d_swz(CUtensorMap *map, const void *base, bsk_dtype t, uint64_t count, uint64_t rows,
                                  uint64_t cols, uint32_t box_rows, uint32_t box_cols, int swizzle_bytes);

#endif

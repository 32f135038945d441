/* tma.cu — tensor-map creation through the driver entry point (see tma.cuh). */
#include <cudaTypedefs.h> /* PFN_cuTensorMapEncodeTiled_v12000 */
#include "tma.cuh"

/* The driver function, looked up once. A benign race: concurrent first calls store the same pointer. */
static PFN_cuTensorMapEncodeTiled_v12000 encode_fn(void)
{
    static PFN_cuTensorMapEncodeTiled_v12000 fn = NULL;
    static int tried = 0;
    if (!tried) {
        void *p = NULL;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) ==
                cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = (PFN_cuTensorMapEncodeTiled_v12000)p;
        else
            (void)cudaGetLastError();
        tried = 1;
    }
    return fn;
}

static CUtensorMapDataType tma_dtype(bsk_dtype t)
{
    return t == BSK_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
}

static bsk_status encode(CUtensorMap *map, const void *base, bsk_dtype t, cuuint32_t rank, const cuuint64_t *dims,
                         const cuuint64_t *strides, const cuuint32_t *box, CUtensorMapSwizzle swz,
                         CUtensorMapL2promotion promo = CU_TENSOR_MAP_L2_PROMOTION_L2_256B)
{
    PFN_cuTensorMapEncodeTiled_v12000 fn = encode_fn();
    if (!fn) return BSK_ERR_UNSUPPORTED;
    const cuuint32_t estr[5] = {1, 1, 1, 1, 1}; /* rank <= 5 */
    CUresult r = fn(map, tma_dtype(t), rank, (void *)base, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                    swz, promo,
                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? BSK_SUCCESS : BSK_ERR_UNSUPPORTED;
}

bsk_status bsk_hopper_tmap_encode(CUtensorMap *map, const void *base, bsk_dtype t, uint32_t rank, const cuuint64_t *dims,
                                  const cuuint64_t *strides, const cuuint32_t *box)
{
    if (rank < 1 || rank > 5) return BSK_ERR_UNSUPPORTED;
    return encode(map, base, t, rank, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
}

/* A row-major matrix (2-D) and `count` stacked matrices (3-D), with or without the 128-byte swizzle. */
static bsk_status map_2d(CUtensorMap *map, const void *base, bsk_dtype t, uint64_t rows, uint64_t cols, uint64_t ld,
                         uint32_t box_rows, uint32_t box_cols, CUtensorMapSwizzle swz,
                         CUtensorMapL2promotion promo = CU_TENSOR_MAP_L2_PROMOTION_L2_256B)
{
    const cuuint64_t dims[2] = {cols, rows};
    const cuuint64_t strides[1] = {ld * 2};
    const cuuint32_t box[2] = {box_cols, box_rows};
    return encode(map, base, t, 2, dims, strides, box, swz, promo);
}
static bsk_status map_3d(CUtensorMap *map, const void *base, bsk_dtype t, uint64_t count, uint64_t rows, uint64_t cols,
                         uint32_t box_rows, uint32_t box_cols, CUtensorMapSwizzle swz,
                         CUtensorMapL2promotion promo = CU_TENSOR_MAP_L2_PROMOTION_L2_256B)
{
    const cuuint64_t dims[3] = {cols, rows, count};
    const cuuint64_t strides[2] = {cols * 2, rows * cols * 2};
    const cuuint32_t box[3] = {box_cols, box_rows, 1};
    return encode(map, base, t, 3, dims, strides, box, swz, promo);
}
static CUtensorMapL2promotion promo_of(int promo)
{
    return promo == 1   ? CU_TENSOR_MAP_L2_PROMOTION_NONE
           : promo == 2 ? CU_TENSOR_MAP_L2_PROMOTION_L2_64B
           : promo == 3 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B
                        : CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
}
bsk_status bsk_hopper_tmap_2d_promo(CUtensorMap *map, const void *base, bsk_dtype t, uint64_t rows, uint64_t cols,
                                    uint64_t ld, uint32_t box_rows, uint32_t box_cols, int promo)
{
    return map_2d(map, base, t, rows, cols, ld, box_rows, box_cols, CU_TENSOR_MAP_SWIZZLE_128B, promo_of(promo));
}
bsk_status bsk_hopper_tmap_3d_promo(CUtensorMap *map, const void *base, bsk_dtype t, uint64_t count, uint64_t rows,
                                    uint64_t cols, uint32_t box_rows, uint32_t box_cols, int promo)
{
    return map_3d(map, base, t, count, rows, cols, box_rows, box_cols, CU_TENSOR_MAP_SWIZZLE_128B, promo_of(promo));
}

bsk_status bsk_hopper_tmap_2d(CUtensorMap *map, const void *base, bsk_dtype t, uint64_t rows, uint64_t cols,
                              uint64_t ld, uint32_t box_rows, uint32_t box_cols)
{
    return map_2d(map, base, t, rows, cols, ld, box_rows, box_cols, CU_TENSOR_MAP_SWIZZLE_128B);
}
bsk_status bsk_hopper_tmap_3d(CUtensorMap *map, const void *base, bsk_dtype t, uint64_t count, uint64_t rows,
                              uint64_t cols, uint32_t box_rows, uint32_t box_cols)
{
    return map_3d(map, base, t, count, rows, cols, box_rows, box_cols, CU_TENSOR_MAP_SWIZZLE_128B);
}
bsk_status bsk_hopper_tmap_2d_plain(CUtensorMap *map, const void *base, bsk_dtype t, uint64_t rows, uint64_t cols,
                                    uint64_t ld, uint32_t box_rows, uint32_t box_cols)
{
    return map_2d(map, base, t, rows, cols, ld, box_rows, box_cols, CU_TENSOR_MAP_SWIZZLE_NONE);
}
bsk_status bsk_hopper_tmap_3d_plain(CUtensorMap *map, const void *base, bsk_dtype t, uint64_t count, uint64_t rows,
                                    uint64_t cols, uint32_t box_rows, uint32_t box_cols)
{
    return map_3d(map, base, t, count, rows, cols, box_rows, box_cols, CU_TENSOR_MAP_SWIZZLE_NONE);
}
bsk_status bsk_hopper_tmap_3d_swz(CUtensorMap *map, const void *base, bsk_dtype t, uint64_t count, uint64_t rows,
                                  uint64_t cols, uint32_t box_rows, uint32_t box_cols, int swizzle_bytes)
{
    const CUtensorMapSwizzle swz = swizzle_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                   : swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                   : swizzle_bytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                         : CU_TENSOR_MAP_SWIZZLE_NONE;
    return map_3d(map, base, t, count, rows, cols, box_rows, box_cols, swz);
}

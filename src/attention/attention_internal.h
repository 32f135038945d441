/* attention_internal.h — what the attention front-end, its CPU reference backend and its CUDA kernels
   share. Nothing here is public; the contract is the attention section of include/bsk.h. */
#ifndef BSK_ATTENTION_INTERNAL_H
#define BSK_ATTENTION_INTERNAL_H

#include "../internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Small rules shared by the host code and the CUDA kernels. */
#ifdef __CUDACC__
#define BSK_HD __host__ __device__
#else
#define BSK_HD
#endif

/* Sizes every backend needs, resolved once by the front-end after validation. */
typedef struct bsk__attn_dims {
    int64_t batch, heads, kv_heads, seq_q, seq_k, dim;
    int64_t mq, nb;        /* query blocks, key blocks of the layout */
    float scale;           /* resolved (0 -> 1/sqrt(dim)) */
} bsk__attn_dims;

/* Which of a layout's batch*heads layouts serves (b, h): shared layouts broadcast. */
static inline int64_t bsk__attn_layout_index(const bsk_attn_layout *L, int64_t b, int64_t h)
{
    return (L->batch == 1 ? 0 : b) * L->heads + (L->heads == 1 ? 0 : h);
}

/* O(1) descriptor checks of a layout: sizes, block sizes, capacity, NULL pointers, alignment,
   overflow of the array sizes. */
bsk_status bsk__attn_layout_check_desc(const bsk_attn_layout *L);
/* Every array of L is where L->mem says (asks the CUDA runtime). */
bsk_status bsk__attn_layout_check_location(const bsk_attn_layout *L);
/* O(entries) checks of host lists: counts in range, indices in range, sorted, the lists disjoint. */
bsk_status bsk__attn_layout_check_lists(const bsk_attn_layout *L, const int32_t *full_count,
                                        const int32_t *full_idx, const int32_t *part_count,
                                        const int32_t *part_idx);
/* Elements in the count arrays / index arrays (descriptor already checked). */
int64_t bsk__attn_layout_rows(const bsk_attn_layout *L);

/* Whether tile rows [q0, q1) x keys [k0, k1) needs an element mask (1), is fully masked (2) or is
   entirely visible (0) under kv_len and the causal rule. Shared by builders, the gate and kernels. */
static inline BSK_HD int bsk__attn_tile_class(int64_t q0, int64_t q1, int64_t k0, int64_t k1, int64_t kv_len,
                                       int causal, int64_t off)
{
    if (k0 >= kv_len || q1 <= q0 || k1 <= k0) return 2;
    if (causal && k0 > q1 - 1 + off) return 2;
    if (k1 > kv_len) return 1;
    if (causal && k1 - 1 > q0 + off) return 1;
    return 0;
}

/* Gate: whether key block j is a candidate for query rows [q0, q1) (some key the mask rules allow). */
static inline BSK_HD int bsk__topk_candidate(int64_t j, int64_t bk, int64_t q1, int64_t kv_len, int causal, int64_t off)
{
    return j * bk < kv_len && (!causal || j * bk <= q1 - 1 + off);
}
/* Gate: the diagonal key block of query rows [q0, q1): the one holding key min(q1-1+off, kv_len-1);
   -1 when that key is negative or not a candidate. */
static inline BSK_HD int64_t bsk__topk_diagonal(int64_t bk, int64_t q1, int64_t kv_len, int causal, int64_t off)
{
    int64_t key = q1 - 1 + off < kv_len - 1 ? q1 - 1 + off : kv_len - 1;
    if (key < 0) return -1;
    return bsk__topk_candidate(key / bk, bk, q1, kv_len, causal, off) ? key / bk : -1;
}

/* ---- front-end checks shared by the forward and the backward (src/attention/attention.c) */
/* Every check bsk_attention_forward makes of p (o_out = 1: O and lse are outputs and must not overlap
   inputs; 0: they are inputs, as in the backward), then *dims. Nothing is written. */
bsk_status bsk__attention_check(bsk_context *ctx, const bsk_attention_params *p, int o_out, bsk__attn_dims *dims);
bsk_status bsk__attn_check_tensor(const bsk_attn_tensor *t);  /* one view: sizes, strides, dtype, pointer */
int bsk__attn_self_overlaps(const bsk_attn_tensor *t);        /* a view that would write an element twice */
int64_t bsk__attn_tensor_bytes(const bsk_attn_tensor *t);     /* byte span of a view */
int64_t bsk__attn_lse_bytes(int64_t batch, int64_t heads, int64_t seq); /* lse bytes, saturated */
/* [p, p+bytes) over the layout's arrays or kv_lens (inputs the kernels read). */
int bsk__attn_overlaps_reads(const void *p, int64_t bytes, const bsk_attn_layout *L, const int32_t *kv_lens,
                             int64_t batch);

/* ---- CPU backend (src/attention/attention_cpu.c, topk_cpu.c). Arguments validated, host memory. */
bsk_status bsk_cpu_attention_forward(const bsk_attention_params *p, const bsk__attn_dims *d);
bsk_status bsk_cpu_topk_block_layout(const bsk_topk_params *p, const bsk__attn_dims *d, bsk_attn_layout *out);
/* Backward (src/attention/attention_bwd_cpu.c). */
bsk_status bsk_cpu_attention_backward(const bsk_attention_bwd_params *p, const bsk__attn_dims *d);

/* ---- CUDA backend (src/cuda/attention/). Arguments validated, device memory (O(1) checks only).
   Launch on ctx->stream, set ctx->last_kernel. */
bsk_status bsk_cuda_attention_forward(bsk_context *ctx, const bsk_attention_params *p, const bsk__attn_dims *d);
bsk_status bsk_cuda_topk_block_layout(bsk_context *ctx, const bsk_topk_params *p, const bsk__attn_dims *d,
                                      bsk_attn_layout *out);
/* Backward (src/cuda/attention/attention_bwd.cu). */
bsk_status bsk_cuda_attention_backward(bsk_context *ctx, const bsk_attention_bwd_params *p, const bsk__attn_dims *d);
/* Test hook (src/attention/attention.c): nonzero forces the CUDA-core attention kernel even where the
   tensor-core one applies, so tests can check both. */
extern int bsk__attn_simt_forced;
void bsk__attention_force_simt(int on);
/* Benchmark hook: which build of the tensor-core kernel runs (0 default, 1 two CTAs per SM at D=128). */
extern int bsk__attn_variant;
/* Benchmark hook: 1 (default) launches the Hopper attention kernel with programmatic dependent launch, 0 without
   (bsk attention times the gate -> attention sequence both ways). */
extern int bsk__attn_pdl;

#ifdef __cplusplus
}
#endif
#endif

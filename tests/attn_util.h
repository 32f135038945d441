/* attn_util.h — fixtures the attention tests share (tests/attn_util.c): strided host tensors in either
   order, the problem spec and the layouts and key lengths it names, the element mask of the float64
   references, device upload. test_attention.c (forward, gate) and test_attention_bwd.c (backward). */
#ifndef BSK_TEST_ATTN_UTIL_H
#define BSK_TEST_ATTN_UTIL_H

#include <stdint.h>
#include "harness.h"

enum { BSHD = 0, BHSD = 1 }; /* tensor orders: [batch, seq, heads, dim] / [batch, heads, seq, dim] */

/* A host tensor and the buffer behind it (elems elements, 8 past the last row). */
typedef struct attn_tbuf {
    bsk_attn_tensor t;
    void *host;
    int64_t elems;
} attn_tbuf;

/* A random (or NaN-poisoned) tensor in either order; `pad` extra elements after each row (keeps the
   16-byte row alignment the tensor-core kernels want when pad % 8 == 0). */
attn_tbuf attn_tensor_make(int64_t B, int64_t S, int64_t H, int64_t D, bsk_dtype dt, int order, int64_t pad, bsk_rng *r,
                           int poison);
/* Every element of the buffer NaN again. */
void attn_tensor_poison(attn_tbuf *tb);

/* Element (b, s, h, d) of t. */
static inline int64_t attn_tidx(const bsk_attn_tensor *t, int64_t b, int64_t s, int64_t h, int64_t d)
{
    return b * t->stride_batch + s * t->stride_seq + h * t->stride_head + d;
}

/* One attention problem's shape and mask rules. */
typedef struct attn_spec {
    int64_t B, H, HK, SQ, SK, D;
    int32_t bq, bk;
    bsk_dtype dt;
    int order, causal;
    int64_t off;
    int kind;         /* 0 dense, 1 causal builder, 2 local+global, 3 random per (batch, head), 4 random shared */
    int kv_lens;      /* random per-batch key lengths (2: and batch 0 has none) */
    int64_t pad;
    int64_t empty_qb; /* kind 3/4: a query block of layout 0 with no tiles */
    float scale;      /* 0: 1/sqrt(D) */
    int dlse;         /* backward: the loss uses lse too (a random d_lse) */
} attn_spec;

/* Case n of the tensor-core grid the forward and backward GPU tests walk (dt: 0 f16, 1 bf16; head dim D;
   query block bq; causal): key block, order, layout kind, GQA, kv_lens, odd lengths and row padding varied
   with n. `what` gets its label. */
void attn_grid_spec(int n, int dt, int D, int bq, int causal, attn_spec *sp, char *what, size_t what_size);

/* A random layout from a block mask with about `density` of the tiles; query block `empty_qb` (if >= 0)
   of layout 0 gets no tiles at all. */
bsk_status attn_random_layout(int64_t SQ, int64_t SK, int32_t bq, int32_t bk, int32_t lb, int32_t lh, double density,
                              int causal, int64_t off, int64_t empty_qb, bsk_rng *r, bsk_attn_layout *out);
/* The layout of sp->kind (host). */
bsk_status attn_spec_layout(const attn_spec *sp, bsk_rng *r, bsk_attn_layout *out);
/* sp->kv_lens ? random per-batch key lengths in [0, SK] (batch 0 may be 0; always 0 with kv_lens == 2), malloc'd : NULL. */
int32_t *attn_spec_kv_lens(const attn_spec *sp, bsk_rng *r);

/* For the references: allowed[k] = 1 iff key k (of SK) is visible to query q of batch entry b, head h
   under the layout's lists (expanded element by element), kv_len and the causal rule. */
void attn_allowed_keys(const bsk_attn_layout *L, int64_t b, int64_t h, int64_t q, int64_t SK, int64_t kv_len, int causal,
                       int64_t off, uint8_t *allowed);
/* Rows [0, S) of head h of batch entry b of T as float64, [S][dim]. */
void attn_load_rows(const bsk_attn_tensor *T, int64_t b, int64_t h, int64_t S, double *out);

/* GPU: a CUDA context (0 without a device); a device copy of `bytes` host bytes (NULL on failure). */
int attn_gpu_ctx(bsk_context **ctx);
void *attn_to_dev(const void *h, size_t bytes);

#endif

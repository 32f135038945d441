/* fuzz_attn_views.c — arbitrary tensor views for the attention forward: sizes, strides (packed, arbitrary,
   huge), offsets into one shared arena (so views may overlap each other, lse and kv_lens), GQA head counts.
   Properties checked on the CPU backend, besides "no sanitizer report":
     - a refused call (any status but SUCCESS) leaves every byte of the arena as it was;
     - an accepted call changed nothing but O's elements and lse, and O shares no element with q, k, v,
       lse or kv_lens;
     - a view whose extent reaches 2^60 elements (the library's limit; sums of such strides pass INT64_MAX) is
       refused. Otherwise the harness only calls with views inside its arena: a view past the caller's buffer
       is the caller's bug, not the library's. */
#include <stdlib.h>
#include <string.h>
#include "bsk.h"
#include "fuzz_input.h"

enum { ARENA = 4096 }; /* floats */

typedef struct {
    bsk_attn_tensor t;
    int huge; /* extent beyond int64 (the call must be refused) */
    int fits; /* every element inside the arena */
} view;

static view make_view(fuzz_in *in, float *arena, int64_t b, int64_t s, int64_t h, int64_t d)
{
    view v = {{b, s, h, d, 0, 0, 0, BSK_F32, BSK_MEM_HOST, NULL}, 0, 0};
    switch (fuzz_u8(in) % 5) {
    case 0: v.t.stride_head = d, v.t.stride_seq = h * d, v.t.stride_batch = s * h * d; break; /* bshd */
    case 1: v.t.stride_seq = d, v.t.stride_head = s * d, v.t.stride_batch = h * s * d; break; /* bhsd */
    case 2: /* small arbitrary strides (0 broadcasts, overlapping rows) */
        v.t.stride_batch = fuzz_small(in, 96), v.t.stride_seq = fuzz_small(in, 24), v.t.stride_head = fuzz_small(in, 12);
        break;
    case 3: /* near the limit: each product below 2^62, their sum past it (or past INT64_MAX) */
        v.t.stride_batch = ((int64_t)1 << (59 + fuzz_small(in, 3))) - fuzz_small(in, 3);
        v.t.stride_seq = ((int64_t)1 << (59 + fuzz_small(in, 3))) - fuzz_small(in, 3);
        v.t.stride_head = ((int64_t)1 << (59 + fuzz_small(in, 3))) - fuzz_small(in, 3);
        break;
    default: /* arbitrary huge: 32 random bits shifted up to 31 places */
        v.t.stride_batch = (int64_t)((uint64_t)fuzz_u32(in) << fuzz_small(in, 31));
        v.t.stride_seq = (int64_t)((uint64_t)fuzz_u32(in) << fuzz_small(in, 31));
        v.t.stride_head = (int64_t)((uint64_t)fuzz_u32(in) << fuzz_small(in, 31));
        break;
    }
    const int64_t off = fuzz_small(in, 255) * 8;
    v.t.data = arena + off;
    /* the last element's index, in 128 bits */
    __int128 last = (__int128)off + (__int128)(b - 1) * v.t.stride_batch + (__int128)(s - 1) * v.t.stride_seq +
                    (__int128)(h - 1) * v.t.stride_head + (d - 1);
    const int empty = b * s * h * d == 0; /* no element: any strides are fine */
    v.huge = !empty && last - off + 1 >= ((__int128)1 << 60); /* the library's per-view limit: 2^60 of extent */
    v.fits = empty || last < ARENA;
    return v;
}

static void mark(const bsk_attn_tensor *t, const float *arena, unsigned char *m, unsigned char bit)
{
    for (int64_t b = 0; b < t->batch; b++)
        for (int64_t s = 0; s < t->seq; s++)
            for (int64_t h = 0; h < t->heads; h++)
                for (int64_t d = 0; d < t->dim; d++)
                    m[(const float *)t->data - arena + b * t->stride_batch + s * t->stride_seq + h * t->stride_head + d] |= bit;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    const int64_t sq = fuzz_small(&in, 12), sk = fuzz_small(&in, 12);
    const int32_t bq = (int32_t)fuzz_small(&in, 5) + 1, bk = (int32_t)fuzz_small(&in, 5) + 1;
    const int64_t batch = fuzz_small(&in, 2) + 1, hk = fuzz_small(&in, 1) + 1, hq = hk * (fuzz_small(&in, 1) + 1);
    const int64_t dim = fuzz_small(&in, 5) + 1;
    bsk_attn_layout L;
    if (bsk_attn_layout_dense(sq, sk, bq, bk, &L) != BSK_SUCCESS) return 0;
    float *arena = (float *)malloc(ARENA * sizeof(float)), *before = (float *)malloc(ARENA * sizeof(float));
    unsigned char *m = (unsigned char *)calloc(ARENA, 1);
    for (int i = 0; i < ARENA; i++) arena[i] = (float)(i % 7) - 3.0f;
    view q = make_view(&in, arena, batch, sq, hq, dim), k = make_view(&in, arena, batch, sk, hk, dim);
    view v = make_view(&in, arena, batch, sk, hk, dim), o = make_view(&in, arena, batch, sq, hq, dim);
    bsk_attention_params p = {q.t, k.t, v.t, o.t, NULL, &L, NULL, 0.0f, (int)(fuzz_u8(&in) & 1), 0};
    const int64_t lse_n = batch * hq * sq;
    if (fuzz_u8(&in) & 1) { /* lse somewhere in the arena (4-byte aligned) */
        const int64_t off = fuzz_small(&in, 255) * 4;
        if (off + lse_n <= ARENA) p.lse = arena + off;
    }
    if (fuzz_u8(&in) & 1) { /* kv_lens in the arena, as int32 in [0, sk] */
        const int64_t off = fuzz_small(&in, 255) * 4;
        int32_t *kl = (int32_t *)(arena + off);
        if (off + batch <= ARENA) {
            for (int64_t b = 0; b < batch; b++) kl[b] = (int32_t)fuzz_small(&in, sk);
            p.kv_lens = kl;
        }
    }
    const int huge = q.huge || k.huge || v.huge || o.huge;
    const int fits = q.fits && k.fits && v.fits && o.fits;
    if (huge || fits) {
        memcpy(before, arena, ARENA * sizeof(float));
        bsk_context *ctx = NULL;
        if (bsk_create(&ctx, BSK_BACKEND_CPU) != BSK_SUCCESS) abort();
        const bsk_status s = bsk_attention_forward(ctx, &p);
        bsk_destroy(ctx);
        if (huge && s == BSK_SUCCESS) abort(); /* an extent past int64 accepted */
        if (s != BSK_SUCCESS) {
            if (memcmp(before, arena, ARENA * sizeof(float)) != 0) abort(); /* a refused call wrote */
        } else {
            /* 1 = O, 2 = an input (q, k, v, lse, kv_lens) */
            mark(&o.t, arena, m, 1);
            mark(&q.t, arena, m, 2), mark(&k.t, arena, m, 2), mark(&v.t, arena, m, 2);
            if (p.lse)
                for (int64_t i = 0; i < lse_n; i++) m[p.lse - arena + i] |= 4;
            if (p.kv_lens)
                for (int64_t b = 0; b < batch; b++) m[(const float *)p.kv_lens - arena + b] |= 2;
            for (int i = 0; i < ARENA; i++) {
                if ((m[i] & 1) && (m[i] & 6)) abort(); /* O accepted over an input or over lse */
                if ((m[i] & 4) && (m[i] & 2)) abort(); /* lse accepted over an input */
                if (!(m[i] & 5) && memcmp(&before[i], &arena[i], sizeof(float)) != 0) abort(); /* wrote elsewhere */
            }
        }
    }
    free(arena), free(before), free(m);
    bsk_attn_layout_free(&L);
    return 0;
}

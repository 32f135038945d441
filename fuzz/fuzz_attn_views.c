/* fuzz_attn_views.c — arbitrary tensor views for the attention forward and backward: sizes, strides (packed,
   arbitrary, near-limit, huge), offsets into one shared arena (so views may overlap each other, lse, d_lse,
   kv_lens and — copied there — the layout's arrays), GQA head counts.
   Properties checked on the CPU backend, besides "no sanitizer report":
     - a refused call (any status but SUCCESS) leaves every byte of the arena as it was;
     - an accepted call changed nothing but its outputs' elements (O and lse; dq, dk and dv), and no output
       shares an element with an input (q, k, v, o, d_o, lse, d_lse, kv_lens, the layout's arrays);
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

/* the layout's four arrays copied into the arena at fuzzed word offsets (so outputs may land on them); marked as
   inputs in m. Returns 0 when they do not fit. */
static int layout_in_arena(fuzz_in *in, const bsk_attn_layout *D, bsk_attn_layout *L, float *arena, unsigned char *m)
{
    const int64_t rows = (int64_t)D->batch * D->heads * bsk_attn_layout_mq(D), idx = rows * D->capacity;
    int32_t **dst[4] = {&L->full_count, &L->part_count, &L->full_idx, &L->part_idx};
    const int32_t *src[4] = {D->full_count, D->part_count, D->full_idx, D->part_idx};
    const int64_t n[4] = {rows, rows, idx, idx};
    *L = *D;
    for (int a = 0; a < 4; a++) {
        const int64_t off = fuzz_small(in, 255) * 16;
        if (off + n[a] > ARENA) return 0;
        memcpy(arena + off, src[a], (size_t)n[a] * 4);
        *dst[a] = (int32_t *)(arena + off);
        for (int64_t i = 0; i < n[a]; i++) m[off + i] |= 2;
    }
    return 1;
}

/* a float array of n elements somewhere in the arena (4-byte aligned), or NULL when it does not fit */
static float *arena_array(fuzz_in *in, float *arena, int64_t n)
{
    const int64_t off = fuzz_small(in, 255) * 4;
    return off + n <= ARENA ? arena + off : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    const int bwd = fuzz_u8(&in) & 1; /* 0: forward (writes O, lse); 1: backward (writes dq, dk, dv) */
    const int64_t sq = fuzz_small(&in, 12), sk = fuzz_small(&in, 12);
    const int32_t bq = (int32_t)fuzz_small(&in, 5) + 1, bk = (int32_t)fuzz_small(&in, 5) + 1;
    const int64_t batch = fuzz_small(&in, 2) + 1, hk = fuzz_small(&in, 1) + 1, hq = hk * (fuzz_small(&in, 1) + 1);
    const int64_t dim = fuzz_small(&in, 5) + 1;
    bsk_attn_layout D, L;
    if (bsk_attn_layout_dense(sq, sk, bq, bk, &D) != BSK_SUCCESS) return 0;
    float *arena = (float *)malloc(ARENA * sizeof(float)), *before = (float *)malloc(ARENA * sizeof(float));
    unsigned char *m = (unsigned char *)calloc(ARENA, 1); /* bit 1: written by the call; 2: read; 4: lse (fwd) */
    for (int i = 0; i < ARENA; i++) arena[i] = (float)(i % 7) - 3.0f;
    L = D;
    const int in_arena = (fuzz_u8(&in) & 1) && layout_in_arena(&in, &D, &L, arena, m);
    const int64_t lse_n = batch * hq * sq;
    int32_t *kl = NULL;
    if (fuzz_u8(&in) & 1) { /* kv_lens in the arena, as int32 in [0, sk] */
        float *a = arena_array(&in, arena, batch);
        if (a) {
            kl = (int32_t *)a;
            for (int64_t b = 0; b < batch; b++) kl[b] = (int32_t)fuzz_small(&in, sk);
        }
    }
    view vw[8];
    int nv = 0, huge = 0, fits = 1;
    bsk_status s = BSK_SUCCESS;
    int call = 0;
    if (!bwd) {
        vw[0] = make_view(&in, arena, batch, sq, hq, dim), vw[1] = make_view(&in, arena, batch, sk, hk, dim);
        vw[2] = make_view(&in, arena, batch, sk, hk, dim), vw[3] = make_view(&in, arena, batch, sq, hq, dim);
        nv = 4;
    } else { /* q k v o d_o | dq dk dv */
        const int64_t sz[8] = {sq, sk, sk, sq, sq, sq, sk, sk}, hh[8] = {hq, hk, hk, hq, hq, hq, hk, hk};
        for (int i = 0; i < 8; i++) vw[i] = make_view(&in, arena, batch, sz[i], hh[i], dim);
        nv = 8;
    }
    for (int i = 0; i < nv; i++) huge |= vw[i].huge, fits &= vw[i].fits;
    float *lse = (bwd || (fuzz_u8(&in) & 1)) ? arena_array(&in, arena, lse_n) : NULL;
    float *d_lse = bwd && (fuzz_u8(&in) & 1) ? arena_array(&in, arena, lse_n) : NULL;
    if ((huge || fits) && (!bwd || lse)) {
        memcpy(before, arena, ARENA * sizeof(float));
        bsk_context *ctx = NULL;
        if (bsk_create(&ctx, BSK_BACKEND_CPU) != BSK_SUCCESS) abort();
        if (!bwd) {
            bsk_attention_params p = {vw[0].t, vw[1].t, vw[2].t, vw[3].t, lse, &L, kl, 0.0f, (int)(fuzz_u8(&in) & 1), 0};
            s = bsk_attention_forward(ctx, &p);
        } else {
            bsk_attention_bwd_params p = {vw[0].t, vw[1].t, vw[2].t, vw[3].t, vw[4].t, lse, d_lse,
                                          vw[5].t, vw[6].t, vw[7].t, &L, kl, 0.0f, (int)(fuzz_u8(&in) & 1), 0};
            s = bsk_attention_backward(ctx, &p);
        }
        bsk_destroy(ctx);
        call = 1;
    }
    if (call && huge && s == BSK_SUCCESS) abort(); /* an extent of 2^60 or more accepted */
    if (call && s != BSK_SUCCESS && memcmp(before, arena, ARENA * sizeof(float)) != 0) abort(); /* a refused call wrote */
    if (call && s == BSK_SUCCESS) {
        const int nin = bwd ? 5 : 3; /* views 0 .. nin-1 are read, the rest written */
        for (int i = 0; i < nv; i++) mark(&vw[i].t, arena, m, i < nin ? 2 : 1);
        if (kl)
            for (int64_t b = 0; b < batch; b++) m[(float *)kl - arena + b] |= 2;
        if (lse)
            for (int64_t i = 0; i < lse_n; i++) m[lse - arena + i] |= bwd ? 2 : 4;
        if (d_lse)
            for (int64_t i = 0; i < lse_n; i++) m[d_lse - arena + i] |= 2;
        for (int i = 0; i < ARENA; i++) {
            if ((m[i] & 1) && (m[i] & 6)) abort(); /* an output accepted over an input or over lse */
            if ((m[i] & 4) && (m[i] & 2)) abort(); /* lse accepted over an input */
            if (!(m[i] & 5) && memcmp(&before[i], &arena[i], sizeof(float)) != 0) abort(); /* wrote elsewhere */
        }
    }
    (void)in_arena;
    free(arena), free(before), free(m);
    bsk_attn_layout_free(&D);
    return 0;
}

/* fuzz_attn_layout.c — arbitrary attention layouts (counts, index lists, sizes) into validate, and the
   host layout builders with arbitrary parameters; whatever validates must run through the CPU attention
   forward without a sanitizer report. */
#include <stdlib.h>
#include "bsk.h"
#include "fuzz_input.h"

static void run_forward(const bsk_attn_layout *L, int causal, int64_t offset)
{
    int64_t b = L->batch, h = L->heads, d = 4, sq = L->seq_q, sk = L->seq_k;
    float *q = (float *)calloc((size_t)(b * sq * h * d + 1), 4), *k = (float *)calloc((size_t)(b * sk * h * d + 1), 4);
    float *v = (float *)calloc((size_t)(b * sk * h * d + 1), 4), *o = (float *)calloc((size_t)(b * sq * h * d + 1), 4);
    float *lse = (float *)calloc((size_t)(b * h * sq + 1), 4);
    for (int64_t i = 0; i < b * sq * h * d; i++) q[i] = (float)(i % 7) - 3.0f;
    for (int64_t i = 0; i < b * sk * h * d; i++) { k[i] = (float)(i % 5) - 2.0f; v[i] = (float)(i % 3); }
    bsk_context *ctx = NULL;
    if (bsk_create(&ctx, BSK_BACKEND_CPU) == BSK_SUCCESS) {
        bsk_attention_params p = {0};
        p.q = bsk_attn_tensor_bshd(q, b, sq, h, d, BSK_F32, BSK_MEM_HOST);
        p.k = bsk_attn_tensor_bshd(k, b, sk, h, d, BSK_F32, BSK_MEM_HOST);
        p.v = bsk_attn_tensor_bshd(v, b, sk, h, d, BSK_F32, BSK_MEM_HOST);
        p.o = bsk_attn_tensor_bshd(o, b, sq, h, d, BSK_F32, BSK_MEM_HOST);
        p.lse = lse;
        p.layout = L;
        p.scale = 0.5f;
        p.causal = causal;
        p.causal_offset = offset;
        (void)bsk_attention_forward(ctx, &p);
        bsk_destroy(ctx);
    }
    free(q); free(k); free(v); free(o); free(lse);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    uint8_t mode = fuzz_u8(&in) % 3;
    int64_t sq = fuzz_small(&in, 40), sk = fuzz_small(&in, 40);
    int32_t bq = (int32_t)fuzz_small(&in, 9), bk = (int32_t)fuzz_small(&in, 9);
    int causal = fuzz_u8(&in) & 1;
    int64_t offset = (int64_t)(int8_t)fuzz_u8(&in);
    bsk_attn_layout L = {0};
    if (mode == 0) {
        /* raw lists: allocate legally, then overwrite counts and indices with fuzz */
        int32_t batch = (int32_t)fuzz_small(&in, 2) + 1, heads = (int32_t)fuzz_small(&in, 2) + 1;
        int32_t cap = (int32_t)fuzz_small(&in, 8);
        if (bsk_attn_layout_alloc(sq, sk, bq, bk, batch, heads, cap, BSK_MEM_HOST, &L) != BSK_SUCCESS) return 0;
        int64_t rows = (int64_t)batch * heads * bsk_attn_layout_mq(&L);
        for (int64_t r = 0; r < rows; r++) {
            L.full_count[r] = (int32_t)fuzz_small(&in, cap + 1);
            L.part_count[r] = (int32_t)fuzz_small(&in, cap + 1);
            for (int32_t c = 0; c < cap; c++) {
                L.full_idx[r * cap + c] = fuzz_u8(&in) == 0 ? fuzz_i32(&in) : (int32_t)fuzz_small(&in, 8);
                L.part_idx[r * cap + c] = (int32_t)fuzz_small(&in, 8);
            }
        }
        if (bsk_attn_layout_validate(&L) == BSK_SUCCESS) run_forward(&L, causal, offset);
        bsk_attn_layout_free(&L);
    } else if (mode == 1) {
        int32_t wl = (int32_t)fuzz_small(&in, 5) - 1, wr = (int32_t)fuzz_small(&in, 5) - 1, g = (int32_t)fuzz_small(&in, 3);
        if (bsk_attn_layout_local(sq, sk, bq, bk, wl, wr, g, causal, offset, &L) == BSK_SUCCESS) {
            if (bsk_attn_layout_validate(&L) != BSK_SUCCESS) abort(); /* a builder made an invalid layout */
            run_forward(&L, causal, offset);
            bsk_attn_layout_free(&L);
        }
    } else {
        int64_t mq = bq > 0 ? (sq + bq - 1) / bq : 0, nb = bk > 0 ? (sk + bk - 1) / bk : 0;
        uint8_t *mask = (uint8_t *)malloc((size_t)(mq * nb) + 1);
        for (int64_t i = 0; i < mq * nb; i++) mask[i] = fuzz_u8(&in) & 1;
        if (bsk_attn_layout_from_mask(sq, sk, bq, bk, 1, 1, mask, causal, offset, &L) == BSK_SUCCESS) {
            if (bsk_attn_layout_validate(&L) != BSK_SUCCESS) abort();
            run_forward(&L, causal, offset);
            bsk_attn_layout_free(&L);
        }
        free(mask);
    }
    return 0;
}

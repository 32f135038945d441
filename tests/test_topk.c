/* test_topk.c — the top-k gate's pre-pooled input (bsk_topk_params.pooled) on the CPU backend (no GPU needed):
   - the caller's means, computed in the order the gate pools (F32 rows), give exactly the layout of the
     unpooled gate on the full tensors (causal, kv_lens, GQA, odd lengths, both orders, projections), and the rows
     of key blocks past kv_len are never read as candidates (they hold huge values here);
   - 16-bit pooled rows (the caller's rounding) keep exactly the forced candidates plus the best others by a
     float64 brute force of the documented score;
   - malformed pooled shapes and arguments are refused with the documented status and leave `out` untouched.
   tests/test_topk_gpu.c checks the GPU's pooled paths against this CPU gate with topk_test_pooled below. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "attn_util.h"
#include "../src/internal.h"
#include "../src/attention/attention_internal.h"

/* A pooled tensor B x nblk x H x D (dtype dt, order, row pad) whose row blk of (b, h) is the mean of rows
   [blk*bs, min((blk+1)*bs, len_b)) of src, computed as the gate pools (fp32: 8 partial sums over rows r0+g,
   r0+g+8, ..., combined ((p0+p1)+(p2+p3))+((p4+p5)+(p6+p7)), divided by the count); len_b = lens[b] (NULL: src's
   seq). Rows of blocks starting at or past len_b hold `garbage`. Shared with tests/test_topk_gpu.c. */
attn_tbuf topk_test_pooled(const bsk_attn_tensor *src, int32_t bs, const int32_t *lens, bsk_dtype dt, int order,
                           int64_t pad, float garbage, bsk_rng *r)
{
    const int64_t B = src->batch, H = src->heads, D = src->dim, S = src->seq, nblk = (S + bs - 1) / bs;
    attn_tbuf tb = attn_tensor_make(B, nblk, H, D, dt, order, pad, r, 0);
    for (int64_t b = 0; b < B; b++) {
        const int64_t len = lens ? lens[b] : S;
        for (int64_t h = 0; h < H; h++)
            for (int64_t blk = 0; blk < nblk; blk++) {
                const int64_t r0 = blk * bs, r1 = r0 + bs < len ? r0 + bs : len;
                for (int64_t c = 0; c < D; c++) {
                    float p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                    for (int64_t q = r0; q < r1; q++) p[(q - r0) & 7] += bsk__load(src->data, src->dtype, attn_tidx(src, b, q, h, c));
                    const float sum = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
                    const float v = r1 > r0 ? sum / (float)(r1 - r0) : garbage;
                    bsk__store(tb.host, dt, attn_tidx(&tb.t, b, blk, h, c), v);
                }
            }
    }
    return tb;
}

/* Two host layouts hold the same lists (count and every index of every row). */
int64_t topk_test_layout_diff(const bsk_attn_layout *A, const bsk_attn_layout *B)
{
    const int64_t rows = bsk__attn_layout_rows(A);
    int64_t diff = 0;
    if (rows != bsk__attn_layout_rows(B) || A->capacity != B->capacity) return 1;
    for (int64_t x = 0; x < rows; x++) {
        if (A->full_count[x] != B->full_count[x] || A->part_count[x] != B->part_count[x]) { diff++; continue; }
        for (int32_t a = 0; a < A->full_count[x]; a++) diff += A->full_idx[x * A->capacity + a] != B->full_idx[x * B->capacity + a];
        for (int32_t a = 0; a < A->part_count[x]; a++) diff += A->part_idx[x * A->capacity + a] != B->part_idx[x * B->capacity + a];
    }
    return diff;
}

typedef struct pooled_case {
    int64_t B, H, HK, SQ, SK, D;
    int32_t bq, bk, top_k;
    int causal, keep_first, keep_diag, kv_lens, proj;
    int64_t off;
    int order, pooled_order;
    bsk_dtype dt;
} pooled_case;

static const pooled_case pooled_cases[] = {
    /* causal, GQA, kv_lens, both forced blocks, odd lengths (partial last blocks) */
    {2, 4, 2, 333, 333, 32, 32, 32, 4, 1, 1, 1, 1, 0, 0, BSHD, BSHD, BSK_BF16},
    /* non-causal, different block sizes, bhsd input, bshd pooled rows */
    {1, 3, 3, 200, 517, 64, 64, 16, 7, 0, 0, 1, 0, 0, 0, BHSD, BSHD, BSK_F16},
    /* projections (width 24), kv_lens, bottom-right causal offset, MQA */
    {2, 2, 1, 150, 410, 16, 16, 32, 5, 1, 1, 1, 1, 24, 260, BSHD, BHSD, BSK_F32},
    /* top_k above the candidates: everything kept; odd dim */
    {1, 2, 2, 64, 100, 33, 8, 8, 40, 0, 1, 0, 1, 0, 0, BHSD, BHSD, BSK_BF16},
};

static bsk_topk_params pooled_params(const pooled_case *c, const bsk_attn_tensor *q, const bsk_attn_tensor *k,
                                     const int32_t *lens, const bsk_dense *wq, const bsk_dense *wk)
{
    bsk_topk_params p;
    memset(&p, 0, sizeof p);
    p.q = *q; p.k = *k; p.kv_lens = lens; p.top_k = c->top_k; p.causal = c->causal; p.causal_offset = c->off;
    p.keep_first = c->keep_first; p.keep_diagonal = c->keep_diag;
    if (c->proj) { p.w_q = wq; p.w_k = wk; }
    return p;
}

BSK_TEST(attn_topk_pooled_cpu_equals_unpooled)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    for (size_t ci = 0; ci < sizeof pooled_cases / sizeof pooled_cases[0]; ci++) {
        const pooled_case *c = &pooled_cases[ci];
        bsk_rng *r = bsk_test_rng();
        attn_tbuf q = attn_tensor_make(c->B, c->SQ, c->H, c->D, c->dt, c->order, 0, r, 0);
        attn_tbuf k = attn_tensor_make(c->B, c->SK, c->HK, c->D, c->dt, c->order, 0, r, 0);
        int32_t *lens = NULL;
        if (c->kv_lens) {
            lens = (int32_t *)malloc((size_t)c->B * 4);
            for (int64_t b = 0; b < c->B; b++) lens[b] = (int32_t)bsk_rng_int(r, 1, c->SK - 1);
        }
        bsk_dense wq, wk;
        if (c->proj) { wq = bsk_test_dense(c->D, c->proj, 2, BSK_F32, r); wk = bsk_test_dense(c->D, c->proj, 0, BSK_BF16, r); }
        attn_tbuf pq = topk_test_pooled(&q.t, c->bq, NULL, BSK_F32, c->pooled_order, 3, 0.0f, r);
        attn_tbuf pk = topk_test_pooled(&k.t, c->bk, lens, BSK_F32, c->pooled_order, 1, 1e30f, r);
        const int64_t nb = (c->SK + c->bk - 1) / c->bk, cap = c->top_k < nb ? c->top_k : nb;
        bsk_attn_layout U, P;
        REQUIRE_OK(bsk_attn_layout_alloc(c->SQ, c->SK, c->bq, c->bk, (int32_t)c->B, (int32_t)c->H, (int32_t)cap, BSK_MEM_HOST, &U));
        REQUIRE_OK(bsk_attn_layout_alloc(c->SQ, c->SK, c->bq, c->bk, (int32_t)c->B, (int32_t)c->H, (int32_t)cap, BSK_MEM_HOST, &P));
        for (int64_t x = 0; x < bsk__attn_layout_rows(&P); x++) P.full_count[x] = P.part_count[x] = -7; /* poison */
        bsk_topk_params up = pooled_params(c, &q.t, &k.t, lens, &wq, &wk);
        bsk_topk_params pp = pooled_params(c, &pq.t, &pk.t, lens, &wq, &wk);
        pp.pooled = 1;
        CHECK_STATUS(bsk_topk_block_layout(ctx, &up, &U), BSK_SUCCESS);
        CHECK_STATUS(bsk_topk_block_layout(ctx, &pp, &P), BSK_SUCCESS);
        CHECK(strcmp(bsk_last_kernel(ctx), "cpu-topk") == 0);
        CHECK_STATUS(bsk_attn_layout_validate(&P), BSK_SUCCESS);
        int64_t diff = topk_test_layout_diff(&U, &P), kept = 0;
        for (int64_t x = 0; x < bsk__attn_layout_rows(&P); x++) kept += P.full_count[x] + P.part_count[x];
        if (diff) fprintf(stderr, "  pooled case %zu: %lld differences pooled vs unpooled\n", ci, (long long)diff);
        CHECK(diff == 0);
        CHECK(kept > 0);
        bsk_attn_layout_free(&U); bsk_attn_layout_free(&P);
        free(q.host); free(k.host); free(pq.host); free(pk.host); free(lens);
        if (c->proj) { bsk_test_dense_free(&wq); bsk_test_dense_free(&wk); }
    }
    bsk_destroy(ctx);
}

/* 16-bit pooled rows: float64 brute force of the documented rule on the rows as given. */
BSK_TEST(attn_topk_pooled_cpu_vs_brute_force)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    const int64_t B = 2, H = 4, HK = 2, SQ = 700, SK = 900, D = 48, off = 200;
    const int32_t bq = 64, bk = 32, top_k = 6;
    const int64_t mq = (SQ + bq - 1) / bq, nb = (SK + bk - 1) / bk;
    for (int causal = 0; causal < 2; causal++) {
        bsk_rng *r = bsk_test_rng();
        attn_tbuf q = attn_tensor_make(B, mq, H, D, causal ? BSK_F16 : BSK_BF16, BSHD, 0, r, 0);
        attn_tbuf k = attn_tensor_make(B, nb, HK, D, causal ? BSK_F16 : BSK_BF16, BHSD, 5, r, 0);
        int32_t lens[2] = {(int32_t)bsk_rng_int(r, 1, SK), (int32_t)SK};
        bsk_attn_layout L;
        REQUIRE_OK(bsk_attn_layout_alloc(SQ, SK, bq, bk, (int32_t)B, (int32_t)H, top_k, BSK_MEM_HOST, &L));
        bsk_topk_params p;
        memset(&p, 0, sizeof p);
        p.q = q.t; p.k = k.t; p.kv_lens = lens; p.top_k = top_k; p.causal = causal; p.causal_offset = off;
        p.keep_first = 1; p.keep_diagonal = causal; p.pooled = 1;
        CHECK_STATUS(bsk_topk_block_layout(ctx, &p, &L), BSK_SUCCESS);
        CHECK_STATUS(bsk_attn_layout_validate(&L), BSK_SUCCESS);
        int bad = 0;
        double sc[64];
        REQUIRE(nb <= 64);
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < mq; i++) {
                    const int64_t row = (b * H + h) * mq + i, q0 = i * bq, q1 = q0 + bq < SQ ? q0 + bq : SQ, kv_len = lens[b];
                    int64_t ncand = 0;
                    for (int64_t j = 0; j < nb; j++) {
                        sc[j] = NAN;
                        if (!(j * bk < kv_len && (!causal || j * bk <= q1 - 1 + off))) continue;
                        ncand++;
                        double acc = 0;
                        for (int64_t e = 0; e < D; e++)
                            acc += (double)bsk__load(q.host, q.t.dtype, attn_tidx(&q.t, b, i, h, e)) *
                                   (double)bsk__load(k.host, k.t.dtype, attn_tidx(&k.t, b, j, h / (H / HK), e));
                        sc[j] = acc;
                    }
                    uint8_t kept[64] = {0};
                    for (int list = 0; list < 2; list++) {
                        const int32_t n = list ? L.part_count[row] : L.full_count[row];
                        const int32_t *idx = (list ? L.part_idx : L.full_idx) + row * L.capacity;
                        for (int32_t a = 0; a < n; a++) {
                            if (idx[a] < 0 || idx[a] >= nb || isnan(sc[idx[a]])) { bad++; continue; }
                            kept[idx[a]] = 1;
                            const int64_t j = idx[a];
                            const int need = (j + 1) * bk > kv_len || (causal && (j + 1) * bk - 1 > q0 + off);
                            if (need != list) bad++;
                        }
                    }
                    if (L.full_count[row] + L.part_count[row] != (ncand < top_k ? ncand : top_k)) bad++;
                    const int64_t key = q1 - 1 + off < kv_len - 1 ? q1 - 1 + off : kv_len - 1, jd = causal && key >= 0 ? key / bk : -1;
                    if (!isnan(sc[0]) && !kept[0]) bad++;
                    if (jd >= 0 && !isnan(sc[jd]) && !kept[jd]) bad++;
                    double min_kept = INFINITY, max_left = -INFINITY;
                    for (int64_t j = 0; j < nb; j++) {
                        if (isnan(sc[j]) || j == 0 || j == jd) continue;
                        if (kept[j]) { if (sc[j] < min_kept) min_kept = sc[j]; }
                        else if (sc[j] > max_left) max_left = sc[j];
                    }
                    if (min_kept < max_left - 1e-9 * (1 + fabs(max_left))) bad++;
                }
        if (bad) fprintf(stderr, "  pooled brute force (causal %d): %d problems\n", causal, bad);
        CHECK(bad == 0);
        bsk_attn_layout_free(&L);
        free(q.host); free(k.host);
    }
    bsk_destroy(ctx);
}

/* Malformed pooled input: the documented status, `out` untouched. */
BSK_TEST(attn_topk_pooled_errors)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    bsk_rng *r = bsk_test_rng();
    const int64_t B = 2, H = 2, SQ = 300, SK = 500, D = 16;
    const int32_t bq = 64, bk = 64; /* mq = 5, nb = 8 */
    attn_tbuf q = attn_tensor_make(B, 5, H, D, BSK_BF16, BSHD, 0, r, 0), k = attn_tensor_make(B, 8, H, D, BSK_BF16, BSHD, 0, r, 0);
    attn_tbuf qfull = attn_tensor_make(B, SQ, H, D, BSK_BF16, BSHD, 0, r, 0), kfull = attn_tensor_make(B, SK, H, D, BSK_BF16, BSHD, 0, r, 0);
    bsk_attn_layout L;
    REQUIRE_OK(bsk_attn_layout_alloc(SQ, SK, bq, bk, (int32_t)B, (int32_t)H, 3, BSK_MEM_HOST, &L));
    for (int64_t x = 0; x < bsk__attn_layout_rows(&L); x++) L.full_count[x] = L.part_count[x] = -7;
    bsk_topk_params p;
    memset(&p, 0, sizeof p);
    p.q = q.t; p.k = k.t; p.top_k = 3; p.pooled = 1;
    bsk_topk_params bad = p;
    bad.pooled = 2;
    CHECK_STATUS(bsk_topk_block_layout(ctx, &bad, &L), BSK_ERR_INVALID_ARGUMENT);
    bad = p; bad.pooled = -1;
    CHECK_STATUS(bsk_topk_block_layout(ctx, &bad, &L), BSK_ERR_INVALID_ARGUMENT);
    bad = p; bad.q.seq = 4; /* one query block short */
    CHECK_STATUS(bsk_topk_block_layout(ctx, &bad, &L), BSK_ERR_SHAPE_MISMATCH);
    bad = p; bad.k.seq = 9; /* one key block too many (the buffer is long enough: only the shape is wrong) */
    bad.k.stride_batch = k.t.stride_batch;
    CHECK_STATUS(bsk_topk_block_layout(ctx, &bad, &L), BSK_ERR_SHAPE_MISMATCH);
    bad = p; bad.q = qfull.t; bad.k = kfull.t; /* full tensors flagged as pooled */
    CHECK_STATUS(bsk_topk_block_layout(ctx, &bad, &L), BSK_ERR_SHAPE_MISMATCH);
    bad = p; bad.pooled = 0; /* pooled tensors not flagged */
    CHECK_STATUS(bsk_topk_block_layout(ctx, &bad, &L), BSK_ERR_SHAPE_MISMATCH);
    bad = p; bad.q = qfull.t; /* one side pooled, the other not */
    CHECK_STATUS(bsk_topk_block_layout(ctx, &bad, &L), BSK_ERR_SHAPE_MISMATCH);
    int32_t lens_bad[2] = {(int32_t)SK + 1, 10};
    bad = p; bad.kv_lens = lens_bad; /* kv_lens are checked against out's seq_k */
    CHECK_STATUS(bsk_topk_block_layout(ctx, &bad, &L), BSK_ERR_INVALID_ARGUMENT);
    for (int64_t x = 0; x < bsk__attn_layout_rows(&L); x++) CHECK(L.full_count[x] == -7 && L.part_count[x] == -7);
    /* kv_lens beyond the pooled row count but within seq_k are valid: only out's seq_k bounds them */
    int32_t lens_ok[2] = {(int32_t)SK, 100};
    p.kv_lens = lens_ok;
    CHECK_STATUS(bsk_topk_block_layout(ctx, &p, &L), BSK_SUCCESS);
    CHECK_STATUS(bsk_attn_layout_validate(&L), BSK_SUCCESS);
    /* batch 1, kv_len 100: key blocks 0 and 1 are the only candidates */
    const int64_t mq = 5;
    for (int64_t x = H * mq; x < 2 * H * mq; x++) {
        CHECK(L.full_count[x] + L.part_count[x] == 2);
        for (int32_t a = 0; a < L.full_count[x]; a++) CHECK(L.full_idx[x * L.capacity + a] < 2);
        for (int32_t a = 0; a < L.part_count[x]; a++) CHECK(L.part_idx[x * L.capacity + a] < 2);
    }
    bsk_attn_layout_free(&L);
    free(q.host); free(k.host); free(qfull.host); free(kfull.host);
    bsk_destroy(ctx);
}

/* The gate's output arrays over its inputs (q, k, kv_lens) or over each other: INVALID_ARGUMENT, nothing written
   (before session 15 the gate wrote through them and could return a layout that does not validate). */
BSK_TEST(attn_topk_out_overlap_refused)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    bsk_rng *r = bsk_test_rng();
    const int64_t B = 1, H = 1, S = 256, D = 16;
    attn_tbuf q = attn_tensor_make(B, S, H, D, BSK_F32, BSHD, 0, r, 0), k = attn_tensor_make(B, S, H, D, BSK_F32, BSHD, 0, r, 0);
    bsk_attn_layout L;
    REQUIRE_OK(bsk_attn_layout_alloc(S, S, 64, 64, 1, 1, 2, BSK_MEM_HOST, &L)); /* 4 rows, capacity 2 */
    bsk_topk_params p;
    memset(&p, 0, sizeof p);
    p.q = q.t; p.k = k.t; p.top_k = 2;
    CHECK_STATUS(bsk_topk_block_layout(ctx, &p, &L), BSK_SUCCESS); /* the arrays as allocated: accepted */
    const size_t qbytes = (size_t)(B * S * H * D) * 4;
    float *qsave = (float *)malloc(qbytes);
    memcpy(qsave, q.host, qbytes);
    bsk_attn_layout bad = L;
    bad.full_idx = (int32_t *)q.host + 8; /* full_idx inside q */
    CHECK_STATUS(bsk_topk_block_layout(ctx, &p, &bad), BSK_ERR_INVALID_ARGUMENT);
    CHECK(memcmp(qsave, q.host, qbytes) == 0);
    bad = L;
    bad.part_count = (int32_t *)k.host; /* part_count over k */
    CHECK_STATUS(bsk_topk_block_layout(ctx, &p, &bad), BSK_ERR_INVALID_ARGUMENT);
    bad = L;
    bad.part_count = L.full_count + 2; /* the two count arrays overlapping */
    CHECK_STATUS(bsk_topk_block_layout(ctx, &p, &bad), BSK_ERR_INVALID_ARGUMENT);
    int32_t lens[4] = {(int32_t)S, 0, 0, 0};
    bad = L;
    bad.full_count = lens; /* full_count (4 rows) over kv_lens (lens[0]; batch 1) */
    bsk_topk_params pk = p;
    pk.kv_lens = lens;
    CHECK_STATUS(bsk_topk_block_layout(ctx, &pk, &bad), BSK_ERR_INVALID_ARGUMENT);
    CHECK(lens[0] == (int32_t)S && lens[1] == 0 && lens[2] == 0 && lens[3] == 0);
    free(qsave);
    bsk_attn_layout_free(&L);
    free(q.host); free(k.host);
    bsk_destroy(ctx);
}

/* test_topk_gpu.c — the GPU top-k gate's paths (src/cuda/attention/topk.cu) against the CPU gate, which
   tests/test_attention.c checks against a float64 brute force. The GPU must select bit-identical layouts on
   every path: the fast pool (16-bit dtypes, aligned rows, Q and K in one launch, one or several 16-row load
   bursts per thread), the generic pool (misaligned strides, f32), and each select, run on every case through
   the bsk__topk_variant hook: the warp select (nb <= 512: 2, 4, 8 or 16 key blocks per lane; arg-max rounds,
   mirrored rounds when more than half the candidates are kept, keep-all; key chunks of 64 and score-element
   chunks of 64 with partial tails, odd score lengths), the tiled select (the default above nb = 512) and the
   one-CTA-per-query-block select (key-block counts whose scores do not fit in shared memory); exact ties must
   go to the lower block on all of them. Pre-pooled input (pooled = 1) runs the same cases on every variant: the
   one-pass pooled select (nb <= 64, 16-byte aligned rows: one launch, all rows loaded at once, two rows' rounds
   interleaved), the direct-read warp select (one launch, rows in their dtype) and the workspace paths
   (projection, tiled and per-query-block selects), against the unpooled and the pooled CPU gate. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "attn_util.h"
#include "../src/internal.h"
#include "../src/attention/attention_internal.h"

typedef struct topk_case {
    int64_t B, H, HK, SQ, SK, D;
    int32_t bq, bk, top_k;
    int causal, keep_first, keep_diag, kv_lens, proj; /* proj: projection width (0: none) */
    int64_t pad;   /* extra elements per row (odd: rows not 16-byte aligned -> generic pool) */
    int bhsd;      /* [batch, heads, seq, dim] storage instead of [batch, seq, heads, dim] */
    int ties;      /* every key block holds the same rows: all full key blocks tie exactly */
    bsk_dtype dt;
} topk_case;

static const topk_case topk_cases[] = {
    /* fast pool + tiled select: bf16 D=128, 128-blocks, mq = 9 (one partial tile of 16 query blocks: the third
       group of 4 holds one, the fourth none), GQA, causal, kv_lens, both forced blocks */
    {2, 4, 2, 1100, 1100, 128, 128, 128, 3, 1, 1, 1, 1, 0, 0, 0, 0, BSK_BF16},
    /* f16 D=64, bk 32: nb = 66 (a full key chunk of 64 and a chunk of 2), non-causal, [b, h, s, d] */
    {1, 3, 3, 640, 2100, 64, 64, 32, 7, 0, 0, 1, 0, 0, 0, 1, 0, BSK_F16},
    /* bf16 D=128, mq = nb = 65: four full tiles of 16 query blocks and one of 1, key chunks of 64 and 1 */
    {1, 2, 1, 8320, 8320, 128, 128, 128, 5, 0, 1, 0, 0, 0, 0, 0, 0, BSK_BF16},
    /* D=16 (two threads per row group), 256-row blocks: two load bursts per thread; odd block sizes */
    {2, 2, 2, 1000, 1500, 16, 256, 200, 3, 1, 1, 1, 1, 0, 0, 0, 0, BSK_BF16},
    /* misaligned rows (pad 3): the generic pool, the tiled select */
    {1, 2, 2, 700, 700, 128, 128, 64, 4, 1, 0, 1, 0, 0, 3, 0, 0, BSK_BF16},
    /* f32, odd dim 33: generic pool, odd score length in the tiled select (the pad column) */
    {1, 2, 1, 300, 500, 33, 32, 16, 6, 0, 1, 1, 1, 0, 0, 1, 0, BSK_F32},
    /* projection (odd width 25) after the fast pool; projection (24) after the generic pool */
    {1, 2, 2, 512, 512, 64, 64, 64, 3, 1, 1, 1, 0, 25, 0, 0, 0, BSK_F16},
    {2, 2, 1, 300, 400, 32, 32, 16, 5, 0, 1, 0, 1, 24, 0, 1, 0, BSK_F32},
    /* nb = 4000 key blocks: scores do not fit in shared memory -> one CTA per query block */
    {1, 1, 1, 64, 8000, 8, 16, 2, 9, 0, 1, 1, 0, 0, 0, 0, 0, BSK_BF16},
    /* exact ties everywhere: lower blocks win on both backends (tiled select) */
    {1, 2, 2, 1024, 2048, 64, 128, 64, 5, 0, 0, 0, 0, 0, 0, 0, 1, BSK_BF16},
    /* exact ties with the large-nb select */
    {1, 1, 1, 32, 7000, 8, 16, 2, 11, 0, 1, 1, 1, 0, 0, 1, 1, BSK_F16},
    /* warp select, 16 key blocks per lane (nb = 300), top_k 200 causal: early rows keep every candidate, middle
       rows take arg-max rounds, late rows the mirrored rounds; GQA, kv_lens, both forced blocks */
    {1, 2, 1, 2400, 2400, 64, 8, 8, 200, 1, 1, 1, 1, 0, 0, 0, 0, BSK_BF16},
    /* 8 per lane (nb = 130), top_k = nb: every candidate kept; D=128: two score-element chunks */
    {1, 2, 2, 100, 2080, 128, 10, 16, 130, 0, 0, 1, 0, 0, 0, 0, 0, BSK_F16},
    /* exact ties with the mirrored rounds (top_k 40 of 64): the lowest 40 blocks win */
    {1, 2, 2, 256, 2048, 32, 32, 32, 40, 0, 0, 0, 0, 0, 0, 0, 1, BSK_BF16},
    /* 4 per lane (nb = 100), projection width 70: element chunks of 64 and 6; block sizes 37 / 20 */
    {2, 2, 1, 333, 2000, 64, 37, 20, 9, 1, 1, 1, 1, 70, 0, 0, 0, BSK_F16},
    /* D = 512 (8 element chunks), nb = 40, [b, h, s, d] */
    {1, 2, 2, 300, 2560, 512, 64, 64, 6, 0, 1, 1, 0, 0, 0, 1, 0, BSK_F16},
};

/* topk.cu's benchmark / test hook: 0 the default choice, 32 the warp select's other scoring split, 8 the tiled
   select instead of the warp select, 2 the one-CTA-per-query-block select. Weak here so that a build without CUDA (no topk.cu; these tests skip) links;
   topk.cu's definition wins where it exists. */
__attribute__((weak)) int bsk__topk_variant = 0;
static const int topk_variants[] = {0, 32, 8, 2};

typedef struct topk_buf {
    bsk_attn_tensor t;
    void *host;
    int64_t elems;
} topk_buf;

static topk_buf topk_tensor(const topk_case *c, int64_t S, int64_t H, bsk_rng *r, int ties, int32_t bs)
{
    topk_buf tb;
    int64_t B = c->B, D = c->D, row = D + c->pad;
    tb.t.batch = B; tb.t.seq = S; tb.t.heads = H; tb.t.dim = D;
    tb.t.dtype = c->dt; tb.t.mem = BSK_MEM_HOST;
    if (c->bhsd) {
        tb.t.stride_seq = row;
        tb.t.stride_head = S * row;
        tb.t.stride_batch = H * tb.t.stride_head;
    } else {
        tb.t.stride_head = row;
        tb.t.stride_seq = H * row;
        tb.t.stride_batch = S * tb.t.stride_seq;
    }
    tb.elems = B * tb.t.stride_batch + 8;
    tb.host = malloc((size_t)tb.elems * bsk_dtype_size(c->dt));
    for (int64_t i = 0; i < tb.elems; i++) bsk__store(tb.host, c->dt, i, bsk_rng_sym(r));
    if (ties) /* row s repeats row s % bs of its (batch, head): every full block has the same mean */
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t s = bs; s < S; s++)
                    for (int64_t d = 0; d < D; d++) {
                        int64_t base = b * tb.t.stride_batch + h * tb.t.stride_head + d;
                        float v = bsk__load(tb.host, c->dt, base + (s % bs) * tb.t.stride_seq);
                        bsk__store(tb.host, c->dt, base + s * tb.t.stride_seq, v);
                    }
    tb.t.data = tb.host;
    return tb;
}

/* One case's host inputs, drawn in this order from r: Q, K, kv_lens (if the case has them), the projections (if
   any) — the prologue both case loops below share, so both see the same draws. */
typedef struct topk_setup {
    topk_buf q, k;
    int64_t nb, cap;
    int32_t *lens;
    bsk_dense wq, wk;
} topk_setup;

static void topk_case_setup(const topk_case *c, bsk_rng *r, topk_setup *s)
{
    s->q = topk_tensor(c, c->SQ, c->H, r, 0, c->bq);
    s->k = topk_tensor(c, c->SK, c->HK, r, c->ties, c->bk);
    s->nb = (c->SK + c->bk - 1) / c->bk;
    s->cap = c->top_k < s->nb ? c->top_k : s->nb;
    s->lens = NULL;
    if (c->kv_lens) {
        s->lens = (int32_t *)malloc((size_t)c->B * 4);
        for (int64_t b = 0; b < c->B; b++) s->lens[b] = (int32_t)bsk_rng_int(r, 1, c->SK);
    }
    if (c->proj) {
        s->wq = bsk_test_dense(c->D, c->proj, 1, BSK_F32, r);
        s->wk = bsk_test_dense(c->D, c->proj, 0, BSK_BF16, r);
    }
}

/* Device copies of a projection (its data on the device; free with bsk_cuda_free(d->data)). */
static bsk_dense topk_dense_to_dev(const bsk_dense *w)
{
    bsk_dense d = *w;
    d.data = attn_to_dev(w->data, (size_t)(w->rows * w->ld) * bsk_dtype_size(w->dtype));
    d.mem = BSK_MEM_DEVICE;
    return d;
}

static void topk_case_free(const topk_case *c, topk_setup *s)
{
    if (c->proj) { bsk_test_dense_free(&s->wq); bsk_test_dense_free(&s->wk); }
    free(s->q.host); free(s->k.host); free(s->lens);
}

/* Fill a device layout's four arrays with -7 so that any entry the gate should write and does not shows. */
static int topk_poison(bsk_attn_layout *L)
{
    int64_t rows = bsk__attn_layout_rows(L), n = rows * (L->capacity > 0 ? L->capacity : 1);
    int32_t *p = (int32_t *)malloc((size_t)n * 4);
    if (!p) return 1;
    for (int64_t i = 0; i < n; i++) p[i] = -7;
    int bad = bsk_cuda_memcpy(L->full_count, p, (size_t)rows * 4, 1, 0) || bsk_cuda_memcpy(L->part_count, p, (size_t)rows * 4, 1, 0);
    if (L->capacity > 0)
        bad = bad || bsk_cuda_memcpy(L->full_idx, p, (size_t)n * 4, 1, 0) || bsk_cuda_memcpy(L->part_idx, p, (size_t)n * 4, 1, 0);
    free(p);
    return bad;
}

/* Pre-pooled input (bsk_topk_params.pooled; tests/test_topk.c). */
attn_tbuf topk_test_pooled(const bsk_attn_tensor *src, int32_t bs, const int32_t *lens, bsk_dtype dt, int order,
                           int64_t pad, float garbage, bsk_rng *r);
int64_t topk_test_layout_diff(const bsk_attn_layout *A, const bsk_attn_layout *B);

/* Ties case (every full key block has the same mean; no causal mask, kv_lens or forced blocks): each query block
   keeps blocks 0 .. top_k-1 (the last, partial key block has another mean and may rank anywhere). */
static void topk_check_ties(bsk_test_ctx *t, const topk_case *c, int64_t nb, int64_t cap, const bsk_attn_layout *back)
{
    int64_t bad = 0, full_nb = c->SK / c->bk;
    for (int64_t x = 0; x < bsk__attn_layout_rows(back); x++) {
        int32_t nf = back->full_count[x], np = back->part_count[x], want = (int32_t)cap;
        if (full_nb < nb) want--; /* leave room for the partial block either way */
        int32_t low = 0;
        for (int32_t a = 0; a < nf; a++) low += back->full_idx[x * cap + a] < want;
        for (int32_t a = 0; a < np; a++) low += back->part_idx[x * cap + a] < want;
        if (low < want) bad++;
    }
    CHECK(bad == 0);
}

/* The GPU gate on dp under each hook variant (output poisoned first), each layout validated and compared with the
   CPU layout H list by list; `ties` (or NULL): also the ties rule above. `what`, ci, form label a difference. */
static void topk_check_variants(bsk_test_ctx *t, bsk_context *ctx, const bsk_topk_params *dp, bsk_attn_layout *D,
                                const bsk_attn_layout *H, const int *variants, size_t nv, const char *what, size_t ci,
                                int form, const topk_case *ties, int64_t nb)
{
    for (size_t vi = 0; vi < nv; vi++) {
        CHECK(topk_poison(D) == 0);
        bsk__topk_variant = variants[vi];
        CHECK_STATUS(bsk_topk_block_layout(ctx, dp, D), BSK_SUCCESS);
        bsk__topk_variant = 0;
        CHECK(strcmp(bsk_last_kernel(ctx), "cuda-topk") == 0);
        CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
        bsk_attn_layout back;
        if (bsk_attn_layout_clone(D, BSK_MEM_HOST, &back) != BSK_SUCCESS) { CHECK(0); continue; }
        CHECK_STATUS(bsk_attn_layout_validate(&back), BSK_SUCCESS);
        const int64_t diff = topk_test_layout_diff(H, &back);
        int64_t kept = 0;
        for (int64_t x = 0; x < bsk__attn_layout_rows(&back); x++) kept += back.full_count[x] + back.part_count[x];
        if (diff)
            fprintf(stderr, "  %s case %zu form %d variant %d: %lld differences GPU vs CPU\n", what, ci, form, variants[vi],
                    (long long)diff);
        CHECK(diff == 0);
        CHECK(kept > 0);
        if (ties) topk_check_ties(t, ties, nb, back.capacity, &back);
        bsk_attn_layout_free(&back);
    }
}

BSK_TEST(gpu_attn_topk_paths_match_cpu)
{
    bsk_context *ctx, *cpu;
    if (bsk_create(&ctx, BSK_BACKEND_CUDA) != BSK_SUCCESS) SKIP("no CUDA device");
    REQUIRE_OK(bsk_create(&cpu, BSK_BACKEND_CPU));
    for (size_t ci = 0; ci < sizeof topk_cases / sizeof topk_cases[0]; ci++) {
        const topk_case *c = &topk_cases[ci];
        topk_setup su;
        topk_case_setup(c, bsk_test_rng(), &su);
        const topk_buf q = su.q, k = su.k;
        const int64_t nb = su.nb, cap = su.cap;
        int32_t *lens = su.lens;
        bsk_topk_params p;
        memset(&p, 0, sizeof p);
        p.q = q.t; p.k = k.t; p.top_k = c->top_k; p.causal = c->causal;
        p.keep_first = c->keep_first; p.keep_diagonal = c->keep_diag;
        p.kv_lens = lens;
        if (c->proj) { p.w_q = &su.wq; p.w_k = &su.wk; }
        bsk_attn_layout H, D;
        REQUIRE_OK(bsk_attn_layout_alloc(c->SQ, c->SK, c->bq, c->bk, (int32_t)c->B, (int32_t)c->H, (int32_t)cap, BSK_MEM_HOST, &H));
        REQUIRE_OK(bsk_attn_layout_alloc(c->SQ, c->SK, c->bq, c->bk, (int32_t)c->B, (int32_t)c->H, (int32_t)cap, BSK_MEM_DEVICE, &D));
        CHECK_STATUS(bsk_topk_block_layout(cpu, &p, &H), BSK_SUCCESS);
        size_t es = bsk_dtype_size(c->dt);
        bsk_topk_params dp = p;
        bsk_dense dwq, dwk;
        dp.q.data = attn_to_dev(q.host, (size_t)q.elems * es);
        dp.k.data = attn_to_dev(k.host, (size_t)k.elems * es);
        dp.q.mem = dp.k.mem = BSK_MEM_DEVICE;
        dp.kv_lens = lens ? (const int32_t *)attn_to_dev(lens, (size_t)c->B * 4) : NULL;
        if (c->proj) {
            dwq = topk_dense_to_dev(&su.wq); dwk = topk_dense_to_dev(&su.wk);
            dp.w_q = &dwq; dp.w_k = &dwk;
        }
        REQUIRE(dp.q.data && dp.k.data);
        const int ties = c->ties && !c->causal && !c->kv_lens && !c->keep_diag && !c->keep_first;
        topk_check_variants(t, ctx, &dp, &D, &H, topk_variants, sizeof topk_variants / sizeof topk_variants[0], "topk", ci, 0,
                            ties ? c : NULL, nb);
        bsk_cuda_free(dp.q.data); bsk_cuda_free(dp.k.data); bsk_cuda_free((void *)dp.kv_lens);
        if (c->proj) { bsk_cuda_free(dwq.data); bsk_cuda_free(dwk.data); }
        bsk_attn_layout_free(&H); bsk_attn_layout_free(&D);
        topk_case_free(c, &su);
    }
    bsk_destroy(cpu);
    bsk_destroy(ctx);
}

/* Repeated calls on one context (the workspace is reused; no host synchronisation between them) give the
   same layout, and a bigger problem after a smaller one grows the workspace correctly. */
BSK_TEST(gpu_attn_topk_repeat_stable)
{
    bsk_context *ctx;
    if (bsk_create(&ctx, BSK_BACKEND_CUDA) != BSK_SUCCESS) SKIP("no CUDA device");
    const topk_case *small = &topk_cases[0], *big = &topk_cases[2];
    bsk_rng *r = bsk_test_rng();
    int32_t *first = NULL;
    int64_t first_n = 0;
    const uint64_t seed12 = bsk_rng_next(r);
    for (int rep = 0; rep < 3; rep++) {
        const topk_case *c = rep == 0 ? small : big;
        bsk_rng same; /* reps 1 and 2: the same inputs */
        bsk_rng_init(&same, seed12);
        bsk_rng *g = rep == 0 ? r : &same;
        topk_buf q = topk_tensor(c, c->SQ, c->H, g, 0, c->bq);
        topk_buf k = topk_tensor(c, c->SK, c->HK, g, 0, c->bk);
        int64_t nb = (c->SK + c->bk - 1) / c->bk, cap = c->top_k < nb ? c->top_k : nb;
        bsk_topk_params p;
        memset(&p, 0, sizeof p);
        p.q = q.t; p.k = k.t; p.top_k = c->top_k; p.causal = c->causal; p.keep_first = c->keep_first;
        p.keep_diagonal = c->keep_diag;
        size_t es = bsk_dtype_size(c->dt);
        p.q.data = attn_to_dev(q.host, (size_t)q.elems * es);
        p.k.data = attn_to_dev(k.host, (size_t)k.elems * es);
        p.q.mem = p.k.mem = BSK_MEM_DEVICE;
        bsk_attn_layout D, back;
        REQUIRE_OK(bsk_attn_layout_alloc(c->SQ, c->SK, c->bq, c->bk, (int32_t)c->B, (int32_t)c->H, (int32_t)cap, BSK_MEM_DEVICE, &D));
        REQUIRE(p.q.data && p.k.data && topk_poison(&D) == 0);
        CHECK_STATUS(bsk_topk_block_layout(ctx, &p, &D), BSK_SUCCESS);
        CHECK_STATUS(bsk_topk_block_layout(ctx, &p, &D), BSK_SUCCESS);
        REQUIRE_OK(bsk_attn_layout_clone(&D, BSK_MEM_HOST, &back));
        CHECK_STATUS(bsk_attn_layout_validate(&back), BSK_SUCCESS);
        int64_t rows = bsk__attn_layout_rows(&back), n = 2 * rows + 2 * rows * cap;
        if (rep == 1) {
            first = (int32_t *)malloc((size_t)n * 4);
            first_n = n;
            memcpy(first, back.full_count, (size_t)rows * 4);
            memcpy(first + rows, back.part_count, (size_t)rows * 4);
            memcpy(first + 2 * rows, back.full_idx, (size_t)(rows * cap) * 4);
            memcpy(first + 2 * rows + rows * cap, back.part_idx, (size_t)(rows * cap) * 4);
        } else if (rep == 2) {
            int64_t diff = first_n != n;
            for (int64_t x = 0; x < rows && !diff; x++) {
                diff += first[x] != back.full_count[x] || first[rows + x] != back.part_count[x];
                for (int32_t a = 0; a < back.full_count[x]; a++) diff += first[2 * rows + x * cap + a] != back.full_idx[x * cap + a];
                for (int32_t a = 0; a < back.part_count[x]; a++)
                    diff += first[2 * rows + rows * cap + x * cap + a] != back.part_idx[x * cap + a];
            }
            CHECK(diff == 0);
        }
        bsk_cuda_free(p.q.data); bsk_cuda_free(p.k.data);
        bsk_attn_layout_free(&D); bsk_attn_layout_free(&back);
        free(q.host); free(k.host);
    }
    free(first);
    bsk_destroy(ctx);
}


/* Every case above with pooled rows (causal ones with nonzero offsets too), on every select variant: (a) the F32 means the gate itself would compute (in
   its order; rows of key blocks past kv_len hold 1e30, never candidates) must give the unpooled CPU layout bit
   for bit; (b) the same means rounded to the case's dtype (another row order and alignment) must give the
   pooled CPU layout. Case (a) with the case's projections runs the projection from pooled rows, (b) without
   them runs the one-launch direct-read warp select for every dtype. */
BSK_TEST(gpu_attn_topk_pooled_matches_cpu)
{
    bsk_context *ctx, *cpu;
    if (bsk_create(&ctx, BSK_BACKEND_CUDA) != BSK_SUCCESS) SKIP("no CUDA device");
    REQUIRE_OK(bsk_create(&cpu, BSK_BACKEND_CPU));
    for (size_t ci = 0; ci < sizeof topk_cases / sizeof topk_cases[0]; ci++) {
        const topk_case *c = &topk_cases[ci];
        bsk_rng *r = bsk_test_rng();
        topk_setup su;
        topk_case_setup(c, r, &su);
        const topk_buf q = su.q, k = su.k;
        const int64_t nb = su.nb, cap = su.cap;
        int32_t *lens = su.lens;
        bsk_dense dwq, dwk;
        if (c->proj) {
            dwq = topk_dense_to_dev(&su.wq); dwk = topk_dense_to_dev(&su.wk);
            REQUIRE(dwq.data && dwk.data);
        }
        for (int form = 0; form < 2; form++) {
            /* form 0: F32 gate-order means, the case's order and padding, the case's projections;
               form 1: the case's dtype, the other order, no padding, no projection */
            const bsk_dtype pdt = form ? c->dt : BSK_F32;
            const int order = form ? !c->bhsd : c->bhsd;
            const int64_t pad = form ? 0 : c->pad;
            attn_tbuf pq = topk_test_pooled(&q.t, c->bq, NULL, pdt, order, pad, 0.0f, r);
            attn_tbuf pk = topk_test_pooled(&k.t, c->bk, lens, pdt, order, pad, 1e30f, r);
            bsk_topk_params p;
            memset(&p, 0, sizeof p);
            p.top_k = c->top_k; p.causal = c->causal; p.keep_first = c->keep_first; p.keep_diagonal = c->keep_diag;
            p.kv_lens = lens;
            /* causal cases: bottom-right aligned, negative (early query blocks without candidates) or positive offsets */
            const int64_t offs[3] = {c->SK - c->SQ, -5, 37};
            p.causal_offset = c->causal ? offs[ci % 3] : 0;
            if (c->proj && !form) { p.w_q = &su.wq; p.w_k = &su.wk; }
            bsk_attn_layout H, D, back;
            REQUIRE_OK(bsk_attn_layout_alloc(c->SQ, c->SK, c->bq, c->bk, (int32_t)c->B, (int32_t)c->H, (int32_t)cap, BSK_MEM_HOST, &H));
            REQUIRE_OK(bsk_attn_layout_alloc(c->SQ, c->SK, c->bq, c->bk, (int32_t)c->B, (int32_t)c->H, (int32_t)cap, BSK_MEM_DEVICE, &D));
            /* the reference: form 0 the unpooled CPU gate on the full tensors, form 1 the pooled CPU gate */
            p.q = form ? pq.t : q.t; p.k = form ? pk.t : k.t; p.pooled = form;
            CHECK_STATUS(bsk_topk_block_layout(cpu, &p, &H), BSK_SUCCESS);
            bsk_topk_params dp = p;
            dp.pooled = 1;
            dp.q = pq.t; dp.k = pk.t;
            size_t es = bsk_dtype_size(pdt);
            dp.q.data = attn_to_dev(pq.host, (size_t)pq.elems * es);
            dp.k.data = attn_to_dev(pk.host, (size_t)pk.elems * es);
            dp.q.mem = dp.k.mem = BSK_MEM_DEVICE;
            dp.kv_lens = lens ? (const int32_t *)attn_to_dev(lens, (size_t)c->B * 4) : NULL;
            if (c->proj && !form) { dp.w_q = &dwq; dp.w_k = &dwk; }
            REQUIRE(dp.q.data && dp.k.data);
            /* 0: the one-pass pooled select where it applies (nb <= 64, aligned rows), 128: the direct-read warp select
               instead, with 16: its L2 prefetch, 32: its query-per-warp scoring split, 64: its early conversion of the
               rows; 4: no PDL; 512: the one-pass select with one row tile per CTA, 1024: its exact path for every
               candidate (bsk__topk_variant bits, topk.cu) */
            static const int pooled_variants[] = {0, 4, 512, 516, 1024, 1536, 128, 144, 160, 176, 192, 208, 8, 2};
            topk_check_variants(t, ctx, &dp, &D, &H, pooled_variants, sizeof pooled_variants / sizeof pooled_variants[0],
                                "pooled topk", ci, form, NULL, nb);
            /* a malformed pooled shape is refused on the device path too, nothing written */
            bsk_topk_params bad = dp;
            bad.k.seq = nb + 1;
            CHECK(topk_poison(&D) == 0);
            CHECK_STATUS(bsk_topk_block_layout(ctx, &bad, &D), BSK_ERR_SHAPE_MISMATCH);
            if (bsk_attn_layout_clone(&D, BSK_MEM_HOST, &back) == BSK_SUCCESS) {
                CHECK(back.full_count[0] == -7 && back.part_count[0] == -7);
                bsk_attn_layout_free(&back);
            }
            bsk_cuda_free(dp.q.data); bsk_cuda_free(dp.k.data); bsk_cuda_free((void *)dp.kv_lens);
            bsk_attn_layout_free(&H); bsk_attn_layout_free(&D);
            free(pq.host); free(pk.host);
        }
        if (c->proj) { bsk_cuda_free(dwq.data); bsk_cuda_free(dwk.data); }
        topk_case_free(c, &su);
    }
    bsk_destroy(cpu);
    bsk_destroy(ctx);
}

/* Pre-pooled rows built to defeat the one-pass select's fp32 pre-score (topk.cu): per (batch, head) a base key row R;
   key block j holds R exactly (j % 4 == 0: exact ties), R with one element one unit in the last place up (1: a score
   difference far below the pre-score's error bound, resolved only by the exact fp64 chains), R with one element up
   and another down (2), or its own random row (3). Head 1 is scaled by 2^64 (bf16 / f32: the fp32 products
   overflow, so every candidate takes the exact path), head 2 by 2^-70 (fp32 products below the normal range); f16
   keeps them at 1 and 2^-10. 40 query blocks (three tiles of 16: the two-tile CTAs pair tiles 0 and 2, tile 1 runs
   alone), 64 key blocks, causal and not, top_k 7 (rounds) and 40 (mirrored rounds); every select variant must give
   the CPU gate's layout exactly. */
static void topk_bump(void *data, bsk_dtype dt, int64_t i, int up)
{
    if (dt == BSK_F32) ((uint32_t *)data)[i] += up ? 1u : (uint32_t)-1;
    else ((uint16_t *)data)[i] += up ? 1 : (uint16_t)-1;
}

BSK_TEST(gpu_attn_topk_pooled_near_ties)
{
    bsk_context *ctx, *cpu;
    if (bsk_create(&ctx, BSK_BACKEND_CUDA) != BSK_SUCCESS) SKIP("no CUDA device");
    REQUIRE_OK(bsk_create(&cpu, BSK_BACKEND_CPU));
    const bsk_dtype dts[3] = {BSK_BF16, BSK_F16, BSK_F32};
    const int64_t Ds[3] = {64, 64, 36};
    const int64_t B = 2, H = 3, mq = 40, nb = 64;
    const int32_t bq = 32, bk = 32;
    const int64_t SQ = mq * bq - 5, SK = nb * bk - 7;
    for (int di = 0; di < 3; di++) {
        const bsk_dtype dt = dts[di];
        const int64_t D = Ds[di];
        bsk_rng *r = bsk_test_rng();
        attn_tbuf q = attn_tensor_make(B, mq, H, D, dt, BSHD, 0, r, 0), k = attn_tensor_make(B, nb, H, D, dt, BSHD, 0, r, 0);
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++) {
                for (int64_t j = 1; j < nb; j++) {
                    if (j % 4 == 3) continue;
                    for (int64_t e = 0; e < D; e++)
                        bsk__store(k.host, dt, attn_tidx(&k.t, b, j, h, e), bsk__load(k.host, dt, attn_tidx(&k.t, b, 0, h, e)));
                    if (j % 4 >= 1) topk_bump(k.host, dt, attn_tidx(&k.t, b, j, h, j % D), 1);
                    if (j % 4 == 2) topk_bump(k.host, dt, attn_tidx(&k.t, b, j, h, (j + 5) % D), 0);
                }
                const float scale = h == 0 ? 1.0f : dt == BSK_F16 ? (h == 1 ? 1.0f : ldexpf(1.0f, -10))
                                                                  : ldexpf(1.0f, h == 1 ? 64 : -70);
                for (int side = 0; side < 2; side++) {
                    attn_tbuf *tb = side ? &k : &q;
                    for (int64_t s = 0; s < (side ? nb : mq); s++)
                        for (int64_t e = 0; e < D; e++) {
                            const int64_t x = attn_tidx(&tb->t, b, s, h, e);
                            bsk__store(tb->host, dt, x, bsk__load(tb->host, dt, x) * scale); /* a power of two: exact */
                        }
                }
            }
        const size_t es = bsk_dtype_size(dt);
        bsk_topk_params p;
        memset(&p, 0, sizeof p);
        p.q = q.t; p.k = k.t; p.pooled = 1; p.keep_first = 1;
        bsk_topk_params dp = p;
        dp.q.data = attn_to_dev(q.host, (size_t)q.elems * es);
        dp.k.data = attn_to_dev(k.host, (size_t)k.elems * es);
        dp.q.mem = dp.k.mem = BSK_MEM_DEVICE;
        REQUIRE(dp.q.data && dp.k.data);
        for (int form = 0; form < 4; form++) { /* causal (diagonal kept) or not x top_k 7 or 40 */
            p.causal = dp.causal = p.keep_diagonal = dp.keep_diagonal = form & 1;
            p.top_k = dp.top_k = form & 2 ? 40 : 7;
            bsk_attn_layout Hl, Dl;
            REQUIRE_OK(bsk_attn_layout_alloc(SQ, SK, bq, bk, (int32_t)B, (int32_t)H, p.top_k, BSK_MEM_HOST, &Hl));
            REQUIRE_OK(bsk_attn_layout_alloc(SQ, SK, bq, bk, (int32_t)B, (int32_t)H, p.top_k, BSK_MEM_DEVICE, &Dl));
            CHECK_STATUS(bsk_topk_block_layout(cpu, &p, &Hl), BSK_SUCCESS);
            static const int variants[] = {0, 512, 1024, 4, 128};
            topk_check_variants(t, ctx, &dp, &Dl, &Hl, variants, sizeof variants / sizeof variants[0], "near-ties topk",
                                (size_t)di, form, NULL, nb);
            bsk_attn_layout_free(&Hl); bsk_attn_layout_free(&Dl);
        }
        bsk_cuda_free(dp.q.data); bsk_cuda_free(dp.k.data);
        free(q.host); free(k.host);
    }
    bsk_destroy(cpu);
    bsk_destroy(ctx);
}

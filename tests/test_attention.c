/* test_attention.c — block-sparse attention forward and the top-k block gate, against a float64 reference
   of masked attention written from the definition (the mask expanded element by element from the layout's
   lists, kv_len and the causal rule), and a brute-force gate. CPU tests: attn_*; GPU tests: gpu_attn_*
   (they SKIP without a device). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "attn_util.h"
#include "../src/internal.h"
#include "../src/attention/attention_internal.h"

/* ------------------------------------------------------------------ fixtures */

typedef attn_spec spec; /* the problem shape and mask rules (attn_util.h) */

/* float64 reference: O[((b*SQ + q)*H + h)*D + d], lse[(b*H + h)*SQ + q]. */
static void ref_attention(const bsk_attention_params *p, double *O, double *lse)
{
    const bsk_attn_layout *L = p->layout;
    const bsk_attn_tensor *Q = &p->q, *K = &p->k, *V = &p->v;
    int64_t B = Q->batch, H = Q->heads, HK = K->heads, SQ = Q->seq, SK = K->seq, D = Q->dim;
    double scale = p->scale != 0.0f ? p->scale : 1.0 / sqrt((double)D);
    uint8_t *allowed = (uint8_t *)malloc((size_t)SK + 1);
    double *s = (double *)malloc((size_t)(SK + 1) * sizeof(double)), *qd = (double *)malloc((size_t)D * sizeof(double));
    double *kd = (double *)malloc((size_t)(SK * D + 1) * sizeof(double)), *vd = (double *)malloc((size_t)(SK * D + 1) * sizeof(double));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            int64_t hk = h / (H / HK), kv_len = p->kv_lens ? p->kv_lens[b] : SK;
            attn_load_rows(K, b, hk, SK, kd);
            attn_load_rows(V, b, hk, SK, vd);
            for (int64_t q = 0; q < SQ; q++) {
                for (int64_t d = 0; d < D; d++) qd[d] = bsk__load(Q->data, Q->dtype, attn_tidx(Q, b, q, h, d));
                attn_allowed_keys(L, b, h, q, SK, kv_len, p->causal, p->causal_offset, allowed);
                double mx = -INFINITY;
                for (int64_t k = 0; k < SK; k++) {
                    if (!allowed[k]) continue;
                    double acc = 0;
                    for (int64_t d = 0; d < D; d++) acc += qd[d] * kd[k * D + d];
                    s[k] = acc * scale;
                    if (s[k] > mx) mx = s[k];
                }
                double sum = 0;
                double *o = O + ((b * SQ + q) * H + h) * D;
                for (int64_t d = 0; d < D; d++) o[d] = 0;
                for (int64_t k = 0; k < SK; k++) {
                    if (!allowed[k]) continue;
                    double e = exp(s[k] - mx);
                    sum += e;
                    for (int64_t d = 0; d < D; d++) o[d] += e * vd[k * D + d];
                }
                if (sum > 0) for (int64_t d = 0; d < D; d++) o[d] /= sum;
                lse[(b * H + h) * SQ + q] = sum > 0 ? mx + log(sum) : -INFINITY;
            }
        }
    free(allowed); free(s); free(qd); free(kd); free(vd);
}

/* Every element of O and lse (host copies) against the reference; rows with nothing to attend to must be
   exactly O = 0, lse = -inf. Returns the relative error of O. */
static double check_result(bsk_test_ctx *t, const bsk_attn_tensor *o, const float *lse, const double *O,
                           const double *lse_ref, double tol, const char *what)
{
    int64_t B = o->batch, SQ = o->seq, H = o->heads, D = o->dim, bad_empty = 0, bad_lse = 0;
    double num = 0, den = 0;
    int nonfinite = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t q = 0; q < SQ; q++)
            for (int64_t h = 0; h < H; h++) {
                double lr = lse_ref[(b * H + h) * SQ + q];
                float lg = lse[(b * H + h) * SQ + q];
                if (isinf(lr)) { if (!(isinf(lg) && lg < 0)) bad_lse++; }
                else if (!(fabs(lg - lr) <= 2e-3 * (1.0 + fabs(lr)))) bad_lse++;
                for (int64_t d = 0; d < D; d++) {
                    double g = bsk__load(o->data, o->dtype, attn_tidx(o, b, q, h, d)), r = O[((b * SQ + q) * H + h) * D + d];
                    if (!isfinite(g)) nonfinite = 1;
                    if (isinf(lr) && g != 0.0) bad_empty++;
                    num += (g - r) * (g - r);
                    den += r * r;
                }
            }
    double err = nonfinite ? NAN : (den > 0 ? sqrt(num / den) : sqrt(num));
    if (!(err <= tol) || bad_empty || bad_lse)
        fprintf(stderr, "  [%s] rel err %.3e (tol %.1e), %lld non-zero empty-row outputs, %lld bad lse\n", what, err, tol,
                (long long)bad_empty, (long long)bad_lse);
    CHECK_REL(err, tol);
    CHECK(bad_empty == 0);
    CHECK(bad_lse == 0);
    return err;
}

static float *lse_poison(int64_t n)
{
    float *p = (float *)malloc((size_t)(n + 1) * sizeof(float));
    for (int64_t i = 0; i <= n; i++) p[i] = NAN;
    return p;
}

/* One attention problem, built on the host. */
typedef struct problem {
    attn_tbuf q, k, v, o;
    float *lse;
    bsk_attn_layout layout;
    int32_t *kv_lens;
    bsk_attention_params p;
    double *O_ref, *lse_ref;
} problem;

static bsk_status problem_make(problem *P, const spec *sp, bsk_rng *r)
{
    memset(P, 0, sizeof *P);
    P->q = attn_tensor_make(sp->B, sp->SQ, sp->H, sp->D, sp->dt, sp->order, sp->pad, r, 0);
    P->k = attn_tensor_make(sp->B, sp->SK, sp->HK, sp->D, sp->dt, sp->order, sp->pad, r, 0);
    P->v = attn_tensor_make(sp->B, sp->SK, sp->HK, sp->D, sp->dt, sp->order, sp->pad, r, 0);
    P->o = attn_tensor_make(sp->B, sp->SQ, sp->H, sp->D, sp->dt, sp->order ^ 1, sp->pad, r, 1); /* O in the other order */
    P->lse = lse_poison(sp->B * sp->H * sp->SQ);
    bsk_status s = attn_spec_layout(sp, r, &P->layout);
    if (s) return s;
    P->kv_lens = attn_spec_kv_lens(sp, r);
    P->p.q = P->q.t; P->p.k = P->k.t; P->p.v = P->v.t; P->p.o = P->o.t;
    P->p.lse = P->lse;
    P->p.layout = &P->layout;
    P->p.kv_lens = P->kv_lens;
    P->p.scale = sp->scale;
    P->p.causal = sp->causal;
    P->p.causal_offset = sp->off;
    P->O_ref = (double *)malloc((size_t)(sp->B * sp->SQ * sp->H * sp->D + 1) * sizeof(double));
    P->lse_ref = (double *)malloc((size_t)(sp->B * sp->H * sp->SQ + 1) * sizeof(double));
    ref_attention(&P->p, P->O_ref, P->lse_ref);
    return BSK_SUCCESS;
}

static void problem_free(problem *P)
{
    free(P->q.host); free(P->k.host); free(P->v.host); free(P->o.host);
    free(P->lse); free(P->kv_lens); free(P->O_ref); free(P->lse_ref);
    bsk_attn_layout_free(&P->layout);
}

static double tol_for(bsk_dtype dt, int gpu)
{
    double t = dt == BSK_F32 ? 1e-5 : dt == BSK_F16 ? 2e-3 : 1e-2;
    return gpu ? 2 * t : t; /* the GPU also rounds P to the input type before P·V */
}

static void run_cpu_spec(bsk_test_ctx *t, const spec *sp, const char *what)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    problem P;
    bsk_status s = problem_make(&P, sp, bsk_test_rng());
    CHECK_STATUS(s, BSK_SUCCESS);
    if (!s) {
        CHECK_STATUS(bsk_attention_forward(ctx, &P.p), BSK_SUCCESS);
        check_result(t, &P.o.t, P.lse, P.O_ref, P.lse_ref, tol_for(sp->dt, 0), what);
        CHECK(strcmp(bsk_last_kernel(ctx), "cpu-attention") == 0);
    }
    problem_free(&P);
    bsk_destroy(ctx);
}

/* ------------------------------------------------------------------ CPU tests */

BSK_TEST(attn_dense_bshd_f16_odd_length)
{
    spec sp = {.B = 2, .H = 3, .HK = 3, .SQ = 100, .SK = 100, .D = 64, .bq = 32, .bk = 32, .dt = BSK_F16, .order = BSHD,
                .kind = 0, .empty_qb = -1};
    run_cpu_spec(t, &sp, "dense bshd f16");
}

BSK_TEST(attn_causal_bhsd_bf16_mixed_blocks)
{
    spec sp = {.B = 1, .H = 2, .HK = 2, .SQ = 77, .SK = 77, .D = 128, .bq = 16, .bk = 32, .dt = BSK_BF16, .order = BHSD,
                .causal = 1, .kind = 1, .pad = 8, .empty_qb = -1};
    run_cpu_spec(t, &sp, "causal bhsd bf16");
}

BSK_TEST(attn_causal_bottom_right_offset)
{
    /* a KV cache: 40 new queries against 100 keys, bottom-right aligned */
    spec sp = {.B = 2, .H = 2, .HK = 1, .SQ = 40, .SK = 100, .D = 64, .bq = 16, .bk = 16, .dt = BSK_F16, .order = BSHD,
                .causal = 1, .off = 60, .kind = 1, .empty_qb = -1};
    run_cpu_spec(t, &sp, "causal offset");
}

BSK_TEST(attn_local_global_layout)
{
    spec sp = {.B = 1, .H = 2, .HK = 2, .SQ = 150, .SK = 150, .D = 64, .bq = 16, .bk = 16, .dt = BSK_BF16, .order = BSHD,
                .kind = 2, .empty_qb = -1};
    run_cpu_spec(t, &sp, "local+global");
    spec sc = {.B = 1, .H = 2, .HK = 2, .SQ = 150, .SK = 150, .D = 64, .bq = 16, .bk = 16, .dt = BSK_BF16, .order = BHSD,
                .causal = 1, .kind = 2, .empty_qb = -1};
    run_cpu_spec(t, &sc, "local+global causal");
}

BSK_TEST(attn_random_per_head_gqa_kvlens_empty_rows)
{
    spec sp = {.B = 2, .H = 4, .HK = 2, .SQ = 90, .SK = 130, .D = 64, .bq = 16, .bk = 32, .dt = BSK_F16, .order = BHSD,
                .kind = 3, .kv_lens = 2, .pad = 8, .empty_qb = 2};
    run_cpu_spec(t, &sp, "random gqa kv_lens");
    spec sc = {.B = 2, .H = 4, .HK = 1, .SQ = 90, .SK = 90, .D = 64, .bq = 32, .bk = 16, .dt = BSK_BF16, .order = BSHD,
                .causal = 1, .kind = 4, .kv_lens = 1, .empty_qb = 1};
    run_cpu_spec(t, &sc, "random shared causal mqa");
}

BSK_TEST(attn_f32_and_scale)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    spec sp = {.B = 1, .H = 2, .HK = 2, .SQ = 50, .SK = 70, .D = 40, .bq = 16, .bk = 16, .dt = BSK_F32, .order = BSHD,
                .kind = 4, .empty_qb = -1};
    problem P;
    REQUIRE_OK(problem_make(&P, &sp, bsk_test_rng()));
    P.p.scale = 0.37f;
    ref_attention(&P.p, P.O_ref, P.lse_ref);
    CHECK_STATUS(bsk_attention_forward(ctx, &P.p), BSK_SUCCESS);
    check_result(t, &P.o.t, P.lse, P.O_ref, P.lse_ref, 1e-5, "f32 scale");
    problem_free(&P);
    bsk_destroy(ctx);
}

/* Packed QKV: q, k, v are slices of one [B, S, 3, H, D] buffer (stride_seq = 3*H*D). */
BSK_TEST(attn_packed_qkv_strides)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    int64_t B = 2, S = 65, H = 2, D = 64;
    bsk_rng *r = bsk_test_rng();
    int64_t n = B * S * 3 * H * D;
    uint16_t *qkv = (uint16_t *)malloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++) qkv[i] = bsk__float_to_half(bsk_rng_sym(r));
    attn_tbuf o = attn_tensor_make(B, S, H, D, BSK_F16, BSHD, 0, r, 1);
    bsk_attention_params p;
    memset(&p, 0, sizeof p);
    bsk_attn_tensor base = {B, S, H, D, S * 3 * H * D, 3 * H * D, D, BSK_F16, BSK_MEM_HOST, qkv};
    p.q = base; p.k = base; p.v = base;
    p.k.data = qkv + H * D;
    p.v.data = qkv + 2 * H * D;
    p.o = o.t;
    float *lse = lse_poison(B * H * S);
    p.lse = lse;
    bsk_attn_layout L;
    REQUIRE_OK(bsk_attn_layout_causal(S, S, 16, 16, 0, &L));
    p.layout = &L;
    p.causal = 1;
    double *O = (double *)malloc((size_t)(B * S * H * D) * sizeof(double)), *lr = (double *)malloc((size_t)(B * H * S) * sizeof(double));
    ref_attention(&p, O, lr);
    CHECK_STATUS(bsk_attention_forward(ctx, &p), BSK_SUCCESS);
    check_result(t, &o.t, lse, O, lr, 2e-3, "packed qkv");
    /* O overlapping an input is refused */
    bsk_attention_params bad = p;
    bad.o = base;
    CHECK_STATUS(bsk_attention_forward(ctx, &bad), BSK_ERR_INVALID_ARGUMENT);
    free(O); free(lr); free(lse); free(qkv); free(o.host);
    bsk_attn_layout_free(&L);
    bsk_destroy(ctx);
}

BSK_TEST(attn_layout_builders)
{
    bsk_attn_layout L;
    /* dense 100 x 70 at 32 x 32: 4 x 3 tiles; the last key block (64..95 > 70) is partial */
    REQUIRE_OK(bsk_attn_layout_dense(100, 70, 32, 32, &L));
    int64_t nf = -1, np = -1;
    CHECK_STATUS(bsk_attn_layout_tiles(&L, &nf, &np), BSK_SUCCESS);
    CHECK(nf == 8 && np == 4);
    CHECK_STATUS(bsk_attn_layout_validate(&L), BSK_SUCCESS);
    /* malformed lists */
    L.full_idx[1] = L.full_idx[0];
    CHECK_STATUS(bsk_attn_layout_validate(&L), BSK_ERR_INVALID_BSR);
    L.full_idx[1] = 1;
    L.part_idx[0] = 0; /* tile 0 now in both lists */
    CHECK_STATUS(bsk_attn_layout_validate(&L), BSK_ERR_INVALID_BSR);
    L.part_idx[0] = 2;
    L.full_count[0] = 4; /* past capacity */
    CHECK_STATUS(bsk_attn_layout_validate(&L), BSK_ERR_INVALID_BSR);
    L.full_count[0] = 2;
    CHECK_STATUS(bsk_attn_layout_validate(&L), BSK_SUCCESS);
    bsk_attn_layout_free(&L);
    CHECK(L.full_count == NULL);
    /* causal 128 x 128 at 32: 4 diagonal partial tiles, 6 full below */
    REQUIRE_OK(bsk_attn_layout_causal(128, 128, 32, 32, 0, &L));
    CHECK_STATUS(bsk_attn_layout_tiles(&L, &nf, &np), BSK_SUCCESS);
    CHECK(nf == 6 && np == 4);
    for (int i = 0; i < 4; i++) CHECK(L.part_count[i] == 1 && L.part_idx[i * L.capacity] == i && L.full_count[i] == i);
    bsk_attn_layout_free(&L);
    /* local: window 1 each side + 1 global block, 8 x 8 blocks */
    REQUIRE_OK(bsk_attn_layout_local(256, 256, 32, 32, 1, 1, 1, 0, 0, &L));
    CHECK(L.full_count[0] == 8);                       /* a global query block sees everything */
    CHECK(L.full_count[5] == 4 && L.full_idx[5 * L.capacity] == 0 && L.full_idx[5 * L.capacity + 1] == 4);
    bsk_attn_layout_free(&L);
    /* bad arguments */
    CHECK_STATUS(bsk_attn_layout_dense(100, 70, 0, 32, &L), BSK_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(bsk_attn_layout_dense(100, 70, 32, 2048, &L), BSK_ERR_OVERFLOW);
    CHECK_STATUS(bsk_attn_layout_alloc(100, 70, 32, 32, 1, 1, 4, BSK_MEM_HOST, &L), BSK_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(bsk_attn_layout_local(64, 64, 32, 32, -1, 0, 0, 0, 0, &L), BSK_ERR_INVALID_ARGUMENT);
}

BSK_TEST(attn_validation_outputs_untouched)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    spec sp = {.B = 2, .H = 4, .HK = 2, .SQ = 40, .SK = 40, .D = 64, .bq = 16, .bk = 16, .dt = BSK_F16, .order = BSHD,
                .kind = 0, .empty_qb = -1};
    problem P;
    REQUIRE_OK(problem_make(&P, &sp, bsk_test_rng()));
    size_t ob = (size_t)P.o.elems * 2;
    void *before = malloc(ob);
    memcpy(before, P.o.host, ob);
    bsk_attention_params b;
#define EXPECT(mod, want)                                                                                 \
    do { b = P.p; mod; CHECK_STATUS(bsk_attention_forward(ctx, &b), want);                                 \
         CHECK(memcmp(before, P.o.host, ob) == 0); CHECK(isnan(P.lse[0])); } while (0)
    EXPECT(b.layout = NULL, BSK_ERR_NULL_POINTER);
    EXPECT(b.q.data = NULL, BSK_ERR_NULL_POINTER);
    EXPECT(b.q.dtype = (bsk_dtype)9, BSK_ERR_INVALID_ARGUMENT);
    EXPECT(b.k.dtype = BSK_BF16, BSK_ERR_UNSUPPORTED);
    EXPECT(b.q.dim = 600; b.k.dim = 600; b.v.dim = 600; b.o.dim = 600, BSK_ERR_UNSUPPORTED);
    EXPECT(b.v.dim = 32, BSK_ERR_SHAPE_MISMATCH);
    EXPECT(b.k.heads = 3; b.v.heads = 3, BSK_ERR_SHAPE_MISMATCH);   /* 4 % 3 != 0 */
    EXPECT(b.o.seq = 39, BSK_ERR_SHAPE_MISMATCH);
    EXPECT(b.k.seq = 39; b.v.seq = 39, BSK_ERR_SHAPE_MISMATCH);      /* layout says 40 */
    EXPECT(b.q.stride_seq = -1, BSK_ERR_INVALID_ARGUMENT);
    EXPECT(b.o.stride_head = 0, BSK_ERR_INVALID_ARGUMENT);           /* O writes an element twice */
    EXPECT(b.causal = 2, BSK_ERR_INVALID_ARGUMENT);
    EXPECT(b.scale = NAN, BSK_ERR_INVALID_ARGUMENT);
    EXPECT(b.causal_offset = (int64_t)1 << 40, BSK_ERR_INVALID_ARGUMENT);
    EXPECT(b.q.data = (char *)P.q.host + 1, BSK_ERR_MISALIGNED);
    EXPECT(b.q.mem = BSK_MEM_DEVICE, BSK_ERR_WRONG_LOCATION);
    EXPECT(b.lse = (float *)P.o.host, BSK_ERR_INVALID_ARGUMENT);     /* lse overlaps O */
    int32_t lens[2] = {10, 41};
    EXPECT(b.kv_lens = lens, BSK_ERR_INVALID_ARGUMENT);
    bsk_attn_layout bad = P.layout;
    b = P.p;
    bad.batch = 3;
    b.layout = &bad;
    CHECK_STATUS(bsk_attention_forward(ctx, &b), BSK_ERR_SHAPE_MISMATCH);
    bad = P.layout;
    int32_t keep = bad.full_idx[1];
    bad.full_idx[1] = 99;
    CHECK_STATUS(bsk_attention_forward(ctx, &b), BSK_ERR_INVALID_BSR);
    bad.full_idx[1] = keep;
    CHECK(memcmp(before, P.o.host, ob) == 0);
    /* a CUDA-only context refuses host operands (when it can be created at all) */
    bsk_context *cu;
    if (bsk_create(&cu, BSK_BACKEND_CUDA) == BSK_SUCCESS) {
        CHECK_STATUS(bsk_attention_forward(cu, &P.p), BSK_ERR_WRONG_LOCATION);
        bsk_destroy(cu);
    }
#undef EXPECT
    free(before);
    problem_free(&P);
    bsk_destroy(ctx);
}

/* ------------------------------------------------------------------ gate */

typedef struct gate_case {
    int64_t B, H, HK, SQ, SK, D;
    int32_t bq, bk, top_k;
    int causal, keep_first, keep_diag, kv_lens, proj;
    bsk_dtype dt;
} gate_case;

/* Brute force from the definition in float64: pooled means, optional projections, scores; then check
   that `L` keeps exactly the forced candidates plus the best others (ties resolved either way within a
   hair), and classifies each kept tile by the mask rules. */
static void check_gate(bsk_test_ctx *t, const bsk_topk_params *p, const bsk_attn_layout *L)
{
    const bsk_attn_tensor *Q = &p->q, *K = &p->k;
    int64_t B = Q->batch, H = Q->heads, HK = K->heads, D = Q->dim, SQ = Q->seq, SK = K->seq;
    int64_t bq = L->block_q, bk = L->block_k, mq = bsk_attn_layout_mq(L), nb = bsk_attn_layout_nb(L);
    int64_t P = p->w_q ? p->w_q->cols : D;
    double *pq = (double *)malloc((size_t)P * 8), *pk = (double *)malloc((size_t)(nb * P + 1) * 8);
    double *mean = (double *)malloc((size_t)D * 8), *sc = (double *)malloc((size_t)(nb + 1) * 8);
    uint8_t *kept = (uint8_t *)malloc((size_t)nb + 1);
    int bad = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t kv_len = p->kv_lens ? p->kv_lens[b] : SK;
        for (int64_t h = 0; h < H; h++) {
            int64_t hk = h / (H / HK);
            for (int64_t j = 0; j < nb; j++) {
                int64_t k0 = j * bk, k1 = k0 + bk < kv_len ? k0 + bk : kv_len;
                for (int64_t d = 0; d < D; d++) {
                    double s = 0;
                    for (int64_t k = k0; k < k1; k++) s += bsk__load(K->data, K->dtype, attn_tidx(K, b, k, hk, d));
                    mean[d] = k1 > k0 ? s / (double)(k1 - k0) : 0;
                }
                for (int64_t e = 0; e < P; e++) {
                    double acc = 0;
                    if (!p->w_k) acc = mean[e];
                    else for (int64_t d = 0; d < D; d++) acc += mean[d] * bsk__load(p->w_k->data, p->w_k->dtype, d * p->w_k->ld + e);
                    pk[j * P + e] = acc;
                }
            }
            for (int64_t i = 0; i < mq; i++) {
                int64_t q0 = i * bq, q1 = q0 + bq < SQ ? q0 + bq : SQ, row = (b * H + h) * mq + i;
                for (int64_t d = 0; d < D; d++) {
                    double s = 0;
                    for (int64_t q = q0; q < q1; q++) s += bsk__load(Q->data, Q->dtype, attn_tidx(Q, b, q, h, d));
                    mean[d] = s / (double)(q1 - q0);
                }
                for (int64_t e = 0; e < P; e++) {
                    double acc = 0;
                    if (!p->w_q) acc = mean[e];
                    else for (int64_t d = 0; d < D; d++) acc += mean[d] * bsk__load(p->w_q->data, p->w_q->dtype, d * p->w_q->ld + e);
                    pq[e] = acc;
                }
                /* candidates and forced blocks straight from the documented rules */
                int64_t ncand = 0, qlast = q1 - 1;
                memset(kept, 0, (size_t)nb + 1);
                for (int64_t j = 0; j < nb; j++) {
                    int cand = j * bk < kv_len && (!p->causal || j * bk <= qlast + p->causal_offset);
                    sc[j] = NAN;
                    if (!cand) continue;
                    ncand++;
                    double acc = 0;
                    for (int64_t e = 0; e < P; e++) acc += pq[e] * pk[j * P + e];
                    sc[j] = acc;
                }
                int32_t nf = L->full_count[row], np = L->part_count[row];
                for (int list = 0; list < 2; list++) {
                    int32_t n = list ? np : nf;
                    const int32_t *idx = (list ? L->part_idx : L->full_idx) + row * L->capacity;
                    for (int32_t a = 0; a < n; a++) {
                        int64_t j = idx[a];
                        if (j < 0 || j >= nb || kept[j] || isnan(sc[j]) || (a > 0 && idx[a] <= idx[a - 1])) { bad++; continue; }
                        kept[j] = 1;
                        int need = (j + 1) * bk > kv_len || (p->causal && (j + 1) * bk - 1 > q0 + p->causal_offset);
                        if (need != list) bad++;
                    }
                }
                int64_t want = ncand < p->top_k ? ncand : p->top_k;
                if (nf + np != want) bad++;
                int64_t key = qlast + p->causal_offset < kv_len - 1 ? qlast + p->causal_offset : kv_len - 1;
                int64_t jd = key >= 0 ? key / bk : -1;
                if (p->keep_first && !isnan(sc[0]) && !kept[0]) bad++;
                if (p->keep_diagonal && jd >= 0 && !isnan(sc[jd]) && !kept[jd]) bad++;
                double min_kept = INFINITY, max_left = -INFINITY;
                for (int64_t j = 0; j < nb; j++) {
                    if (isnan(sc[j])) continue;
                    int forced = (p->keep_first && j == 0) || (p->keep_diagonal && j == jd);
                    if (forced) continue;
                    if (kept[j]) { if (sc[j] < min_kept) min_kept = sc[j]; }
                    else if (sc[j] > max_left) max_left = sc[j];
                }
                /* the gate pools in fp32, this reference in fp64: near-ties may go either way */
                if (min_kept < max_left - 1e-4 * (1 + fabs(max_left))) bad++;
            }
        }
    }
    if (bad) fprintf(stderr, "  gate: %d problems\n", bad);
    CHECK(bad == 0);
    free(pq); free(pk); free(mean); free(sc); free(kept);
}

typedef struct gate_problem {
    attn_tbuf q, k;
    bsk_dense wq, wk;
    int32_t *kv_lens;
    bsk_topk_params p;
} gate_problem;

static void gate_make(gate_problem *G, const gate_case *c, bsk_rng *r, int order)
{
    memset(G, 0, sizeof *G);
    G->q = attn_tensor_make(c->B, c->SQ, c->H, c->D, c->dt, order, 0, r, 0);
    G->k = attn_tensor_make(c->B, c->SK, c->HK, c->D, c->dt, order, 0, r, 0);
    G->p.q = G->q.t;
    G->p.k = G->k.t;
    G->p.top_k = c->top_k;
    G->p.causal = c->causal;
    G->p.keep_first = c->keep_first;
    G->p.keep_diagonal = c->keep_diag;
    if (c->kv_lens) {
        G->kv_lens = (int32_t *)malloc((size_t)c->B * 4);
        for (int64_t b = 0; b < c->B; b++) G->kv_lens[b] = (int32_t)bsk_rng_int(r, 1, c->SK);
        G->p.kv_lens = G->kv_lens;
    }
    if (c->proj) {
        G->wq = bsk_test_dense(c->D, 24, 3, BSK_F32, r);
        G->wk = bsk_test_dense(c->D, 24, 0, BSK_BF16, r);
        G->p.w_q = &G->wq;
        G->p.w_k = &G->wk;
    }
}

static void gate_free(gate_problem *G)
{
    free(G->q.host); free(G->k.host); free(G->kv_lens);
    if (G->p.w_q) { bsk_test_dense_free(&G->wq); bsk_test_dense_free(&G->wk); }
}

static const gate_case gate_cases[] = {
    {2, 4, 2, 200, 200, 64, 32, 32, 3, 0, 0, 0, 0, 0, BSK_F16},
    {2, 4, 2, 200, 200, 64, 32, 32, 3, 1, 1, 1, 0, 0, BSK_BF16},
    {1, 2, 1, 130, 300, 128, 64, 64, 2, 0, 1, 1, 1, 0, BSK_F16},
    {2, 2, 2, 257, 257, 64, 64, 32, 4, 1, 0, 1, 1, 1, BSK_BF16},
    {1, 3, 3, 100, 100, 32, 16, 16, 20, 1, 1, 0, 0, 1, BSK_F32},
};

BSK_TEST(attn_topk_cpu_vs_brute_force)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    for (size_t ci = 0; ci < sizeof gate_cases / sizeof gate_cases[0]; ci++) {
        const gate_case *c = &gate_cases[ci];
        gate_problem G;
        gate_make(&G, c, bsk_test_rng(), (int)(ci & 1));
        int64_t nb = (c->SK + c->bk - 1) / c->bk;
        bsk_attn_layout L;
        REQUIRE_OK(bsk_attn_layout_alloc(c->SQ, c->SK, c->bq, c->bk, (int32_t)c->B, (int32_t)c->H,
                                         (int32_t)(c->top_k < nb ? c->top_k : nb), BSK_MEM_HOST, &L));
        for (int64_t x = 0; x < bsk__attn_layout_rows(&L); x++) L.full_count[x] = L.part_count[x] = -7; /* poison */
        CHECK_STATUS(bsk_topk_block_layout(ctx, &G.p, &L), BSK_SUCCESS);
        CHECK_STATUS(bsk_attn_layout_validate(&L), BSK_SUCCESS);
        check_gate(t, &G.p, &L);
        /* errors leave the layout alone */
        bsk_topk_params bad = G.p;
        bad.top_k = 0;
        int32_t fc0 = L.full_count[0];
        CHECK_STATUS(bsk_topk_block_layout(ctx, &bad, &L), BSK_ERR_INVALID_ARGUMENT);
        bad = G.p;
        bad.keep_first = bad.keep_diagonal = 1;
        bad.top_k = 1;
        CHECK_STATUS(bsk_topk_block_layout(ctx, &bad, &L), BSK_ERR_INVALID_ARGUMENT);
        CHECK(L.full_count[0] == fc0);
        /* the gate's layout feeds the attention directly */
        if (ci == 1) {
            attn_tbuf v = attn_tensor_make(c->B, c->SK, c->HK, c->D, c->dt, 1, 0, bsk_test_rng(), 0);
            attn_tbuf o = attn_tensor_make(c->B, c->SQ, c->H, c->D, c->dt, 0, 0, bsk_test_rng(), 1);
            float *lse = lse_poison(c->B * c->H * c->SQ);
            bsk_attention_params ap;
            memset(&ap, 0, sizeof ap);
            ap.q = G.q.t; ap.k = G.k.t; ap.v = v.t; ap.o = o.t; ap.lse = lse; ap.layout = &L; ap.causal = c->causal;
            double *O = (double *)malloc((size_t)(c->B * c->SQ * c->H * c->D) * 8), *lr = (double *)malloc((size_t)(c->B * c->H * c->SQ) * 8);
            ref_attention(&ap, O, lr);
            CHECK_STATUS(bsk_attention_forward(ctx, &ap), BSK_SUCCESS);
            check_result(t, &o.t, lse, O, lr, tol_for(c->dt, 0), "gate -> attention");
            free(O); free(lr); free(lse); free(v.host); free(o.host);
        }
        bsk_attn_layout_free(&L);
        gate_free(&G);
    }
    bsk_destroy(ctx);
}

/* ------------------------------------------------------------------ GPU */

/* Run P on the device (uploading everything; O and lse start as NaN there too), copy O and lse back into
   P's host buffers. */
static bsk_status run_on_device(bsk_context *ctx, problem *P)
{
    size_t es = bsk_dtype_size(P->q.t.dtype);
    int64_t nl = P->q.t.batch * P->q.t.heads * P->q.t.seq;
    void *dq = attn_to_dev(P->q.host, (size_t)P->q.elems * es), *dk = attn_to_dev(P->k.host, (size_t)P->k.elems * es);
    void *dv = attn_to_dev(P->v.host, (size_t)P->v.elems * es), *dout = attn_to_dev(P->o.host, (size_t)P->o.elems * es);
    float *dl = (float *)attn_to_dev(P->lse, (size_t)nl * 4);
    int32_t *dlen = P->kv_lens ? (int32_t *)attn_to_dev(P->kv_lens, (size_t)P->q.t.batch * 4) : NULL;
    bsk_attn_layout DL;
    memset(&DL, 0, sizeof DL);
    bsk_status s = bsk_attn_layout_clone(&P->layout, BSK_MEM_DEVICE, &DL);
    if (!s && (!dq || !dk || !dv || !dout || !dl || (P->kv_lens && !dlen))) s = BSK_ERR_OUT_OF_MEMORY;
    if (!s) {
        bsk_attention_params d = P->p;
        d.q.data = dq; d.k.data = dk; d.v.data = dv; d.o.data = dout; d.lse = dl; d.kv_lens = dlen; d.layout = &DL;
        d.q.mem = d.k.mem = d.v.mem = d.o.mem = BSK_MEM_DEVICE;
        s = bsk_attention_forward(ctx, &d);
        if (!s) s = bsk_synchronize(ctx);
        if (!s) s = bsk_cuda_memcpy(P->o.host, dout, (size_t)P->o.elems * es, 0, 1);
        if (!s) s = bsk_cuda_memcpy(P->lse, dl, (size_t)nl * 4, 0, 1);
    }
    bsk_cuda_free(dq); bsk_cuda_free(dk); bsk_cuda_free(dv); bsk_cuda_free(dout); bsk_cuda_free(dl); bsk_cuda_free(dlen);
    bsk_attn_layout_free(&DL);
    return s;
}

static void gpu_spec(bsk_test_ctx *t, bsk_context *ctx, const spec *sp, int simt, const char *want_kernel, const char *what)
{
    problem P;
    bsk_status s = problem_make(&P, sp, bsk_test_rng());
    CHECK_STATUS(s, BSK_SUCCESS);
    /* 128-row query blocks have several builds of the tensor-core kernel: check each. Variant 3 is the default
       mma.sync build without the Hopper kernel in front, 4 asks for the Hopper kernel (attention_fwd.cu). */
    int is_mma = want_kernel && strcmp(want_kernel, "cuda-attention-mma") == 0;
    int is_hopper = want_kernel && strcmp(want_kernel, "hopper-attn-wgmma") == 0;
    int var_list[3] = {is_mma ? 3 : (is_hopper ? 4 : 0), 1, 2};
    int variants = is_mma && sp->bq == 128 ? 3 : 1;
    for (int vi = 0; vi < variants && !s; vi++) {
        int var = var_list[vi];
        for (int64_t x = 0; x < P.o.elems; x++) bsk__store(P.o.host, P.o.t.dtype, x, NAN);
        for (int64_t x = 0; x < sp->B * sp->H * sp->SQ; x++) P.lse[x] = NAN;
        bsk__attention_force_simt(simt);
        bsk__attn_variant = var;
        bsk_status rs = run_on_device(ctx, &P);
        bsk__attn_variant = 0;
        bsk__attention_force_simt(0);
        CHECK_STATUS(rs, BSK_SUCCESS);
        if (!rs) {
            char label[160];
            snprintf(label, sizeof label, "%s [%s variant %d]", what, bsk_last_kernel(ctx), var);
            check_result(t, &P.o.t, P.lse, P.O_ref, P.lse_ref, tol_for(sp->dt, 1), label);
            if (want_kernel && strcmp(bsk_last_kernel(ctx), want_kernel) != 0) {
                fprintf(stderr, "  [%s] ran %s, expected %s\n", what, bsk_last_kernel(ctx), want_kernel);
                CHECK(0);
            }
        }
    }
    problem_free(&P);
}

BSK_TEST(gpu_attn_mma_grid)
{
    bsk_context *ctx;
    if (!attn_gpu_ctx(&ctx)) SKIP("no CUDA device");
    /* every dtype x head dim (64, 128, 256) x query block x causal, with key block, order, layout kind, GQA,
       kv_lens and odd lengths varied across the grid. Head dim 256 needs (block_q + 256) x 512 bytes of shared
       memory: every cc >= 9.0 GPU has it, an A100 (cc 8.0, 163 KB) for 64-row blocks only; elsewhere the
       CUDA-core kernel must run. */
    bsk_device_info info;
    const int cc = bsk_device_query(&info) == BSK_SUCCESS ? 10 * info.cc_major + info.cc_minor : 0;
    int n = 0;
    for (int dt = 0; dt < 2; dt++)
        for (int D = 64; D <= 256; D *= 2)
            for (int bq = 64; bq <= 128; bq += 64)
                for (int causal = 0; causal < 2; causal++, n++) {
                    spec sp;
                    char what[96];
                    attn_grid_spec(n, dt, D, bq, causal, &sp, what, sizeof what);
                    const int mma = D < 256 || cc >= 90 || (cc == 80 && bq == 64);
                    gpu_spec(t, ctx, &sp, 0, mma ? "cuda-attention-mma" : "cuda-attention-simt", what);
                }
    bsk_destroy(ctx);
}

/* ------------------------------------------------------------------ GPU: the Hopper kernel (cc 9.0 only) */

static int hopper_device(void)
{
    bsk_device_info info;
    return bsk_device_query(&info) == BSK_SUCCESS && info.cc_major == 9 && info.cc_minor == 0;
}

/* Key/value rows at or past a batch entry's key length are memory the caller need not have initialised:
   fill them with NaN (after the reference was computed) — the result must not change. */
static void poison_kv_tails(problem *P)
{
    if (!P->kv_lens) return;
    const bsk_attn_tensor *ts[2] = {&P->k.t, &P->v.t};
    void *hs[2] = {P->k.host, P->v.host};
    for (int w = 0; w < 2; w++)
        for (int64_t b = 0; b < ts[w]->batch; b++)
            for (int64_t k = P->kv_lens[b]; k < ts[w]->seq; k++)
                for (int64_t h = 0; h < ts[w]->heads; h++)
                    for (int64_t d = 0; d < ts[w]->dim; d++) bsk__store(hs[w], ts[w]->dtype, attn_tidx(ts[w], b, k, h, d), NAN);
}

/* One problem through each build of the Hopper kernel (variant 4: the default options, 6: the default on 3
   CTAs — many items per CTA, both Q buffers and the rings carried across items —, 5, 7, 8: the builds kept for
   same-run A/B timings; attention_hopper.cu): every element of O and LSE against the float64 reference, O and LSE NaN-poisoned before
   each run, and the kernel that ran must be `want` (the Hopper kernel, or the mma.sync kernel for the cases
   the Hopper kernel declines). */
static void hopper_case(bsk_test_ctx *t, bsk_context *ctx, const spec *sp, float scale, const char *want, const char *what)
{
    problem P;
    bsk_status s = problem_make(&P, sp, bsk_test_rng());
    CHECK_STATUS(s, BSK_SUCCESS);
    if (s) { problem_free(&P); return; }
    if (scale != 0.0f) {
        P.p.scale = scale;
        ref_attention(&P.p, P.O_ref, P.lse_ref);
    }
    poison_kv_tails(&P);
    static const int vars[5] = {4, 5, 6, 7, 8};
    for (int vi = 0; vi < 5; vi++) {
        for (int64_t x = 0; x < P.o.elems; x++) bsk__store(P.o.host, P.o.t.dtype, x, NAN);
        for (int64_t x = 0; x < sp->B * sp->H * sp->SQ; x++) P.lse[x] = NAN;
        bsk__attn_variant = vars[vi];
        bsk_status rs = run_on_device(ctx, &P);
        bsk__attn_variant = 0;
        CHECK_STATUS(rs, BSK_SUCCESS);
        if (rs) break;
        char label[200];
        snprintf(label, sizeof label, "%s [%s variant %d]", what, bsk_last_kernel(ctx), vars[vi]);
        check_result(t, &P.o.t, P.lse, P.O_ref, P.lse_ref, tol_for(sp->dt, 1), label);
        if (strcmp(bsk_last_kernel(ctx), want) != 0) {
            fprintf(stderr, "  [%s] ran %s, expected %s\n", label, bsk_last_kernel(ctx), want);
            CHECK(0);
        }
    }
    problem_free(&P);
}

BSK_TEST(gpu_attn_hopper_grid)
{
    bsk_context *ctx;
    if (!attn_gpu_ctx(&ctx)) SKIP("no CUDA device");
    if (!hopper_device()) { bsk_destroy(ctx); SKIP("not an sm_90 device"); }
    /* dtype x head dim x causal x two layouts each: every layout kind, GQA / MQA, both orders (O in the other),
       odd lengths, seq_k != seq_q with a bottom-right causal offset, per-batch key lengths (with NaN past
       them, and a batch entry with none), padded rows, an empty query block */
    int n = 0;
    for (int dt = 0; dt < 2; dt++)
        for (int D = 64; D <= 128; D += 64)
            for (int causal = 0; causal < 2; causal++)
                for (int rep = 0; rep < 2; rep++, n++) {
                    spec sp;
                    memset(&sp, 0, sizeof sp);
                    sp.B = 2; sp.H = 4; sp.HK = n % 3 == 0 ? 1 : (n % 3 == 1 ? 2 : 4);
                    sp.SQ = 130 + 97 * (n % 5); sp.SK = n % 3 == 0 ? sp.SQ + 200 : sp.SQ;
                    sp.D = D; sp.bq = 128; sp.bk = 128;
                    sp.dt = dt ? BSK_BF16 : BSK_F16;
                    sp.order = (n >> 1) & 1; sp.causal = causal;
                    sp.off = sp.SK - sp.SQ;
                    sp.kind = causal ? (rep == 0 ? 1 : 2 + (n % 3)) : (rep == 0 ? 0 : 2 + (n % 3));
                    sp.kv_lens = n % 4 == 3 ? 2 : (n % 3 == 2 ? 1 : 0);
                    sp.pad = (n % 4 == 1) ? 8 : 0;
                    sp.empty_qb = 1;
                    char what[128];
                    snprintf(what, sizeof what, "%s D%d causal%d kind%d hk%lld sq%lld sk%lld order%d kvlens%d",
                             dt ? "bf16" : "f16", D, causal, sp.kind, (long long)sp.HK, (long long)sp.SQ,
                             (long long)sp.SK, sp.order, sp.kv_lens);
                    hopper_case(t, ctx, &sp, 0.0f, "hopper-attn-wgmma", what);
                }
    bsk_destroy(ctx);
}

BSK_TEST(gpu_attn_hopper_long_empty_declines)
{
    bsk_context *ctx;
    if (!attn_gpu_ctx(&ctx)) SKIP("no CUDA device");
    if (!hopper_device()) { bsk_destroy(ctx); SKIP("not an sm_90 device"); }
    /* long rows: the K/V rings wrap several times (12 tiles per query block at the end) */
    spec a = {.B = 1, .H = 2, .HK = 2, .SQ = 1500, .SK = 1500, .D = 64, .bq = 128, .bk = 128, .dt = BSK_F16,
              .order = BSHD, .causal = 1, .kind = 1, .empty_qb = -1};
    hopper_case(t, ctx, &a, 0.0f, "hopper-attn-wgmma", "long causal D64");
    spec b = {.B = 1, .H = 2, .HK = 1, .SQ = 300, .SK = 1200, .D = 128, .bq = 128, .bk = 128, .dt = BSK_BF16,
              .order = BHSD, .kind = 0, .kv_lens = 1, .empty_qb = -1};
    hopper_case(t, ctx, &b, 0.0f, "hopper-attn-wgmma", "long dense D128 kv_lens");
    /* D=64 long rows, every build: 11 tiles per query block (odd), then random key lengths (1..10 tiles) */
    spec a2 = {.B = 1, .H = 2, .HK = 2, .SQ = 260, .SK = 1290, .D = 64, .bq = 128, .bk = 128, .dt = BSK_BF16,
               .order = BHSD, .kind = 0, .empty_qb = -1};
    hopper_case(t, ctx, &a2, 0.0f, "hopper-attn-wgmma", "long dense D64 11 tiles");
    spec a3 = {.B = 3, .H = 2, .HK = 1, .SQ = 200, .SK = 1200, .D = 64, .bq = 128, .bk = 128, .dt = BSK_F16,
               .order = BSHD, .kind = 0, .kv_lens = 1, .empty_qb = -1};
    hopper_case(t, ctx, &a3, 0.0f, "hopper-attn-wgmma", "long dense D64 kv_lens");
    /* an explicit positive scale */
    spec c = {.B = 1, .H = 3, .HK = 3, .SQ = 257, .SK = 257, .D = 128, .bq = 128, .bk = 128, .dt = BSK_F16,
              .order = BSHD, .kind = 4, .empty_qb = 0};
    hopper_case(t, ctx, &c, 0.37f, "hopper-attn-wgmma", "scale 0.37");
    /* declined: a negative scale, 64-row blocks -> the mma.sync kernel, same results */
    hopper_case(t, ctx, &c, -0.2f, "cuda-attention-mma", "negative scale (declined)");
    spec d = {.B = 1, .H = 2, .HK = 2, .SQ = 200, .SK = 200, .D = 128, .bq = 64, .bk = 128, .dt = BSK_BF16,
              .order = BSHD, .kind = 0, .empty_qb = -1};
    hopper_case(t, ctx, &d, 0.0f, "cuda-attention-mma", "block_q 64 (declined)");
    /* no tiles at all: O = 0 and LSE = -inf everywhere, from the Hopper kernel */
    spec e = {.B = 2, .H = 2, .HK = 1, .SQ = 260, .SK = 260, .D = 128, .bq = 128, .bk = 128, .dt = BSK_BF16,
              .order = BSHD, .kind = 4, .empty_qb = 0};
    problem P;
    REQUIRE_OK(problem_make(&P, &e, bsk_test_rng()));
    for (int64_t x = 0; x < bsk__attn_layout_rows(&P.layout); x++) P.layout.full_count[x] = P.layout.part_count[x] = 0;
    ref_attention(&P.p, P.O_ref, P.lse_ref);
    for (int var = 4; var <= 8; var++) {
        for (int64_t x = 0; x < P.o.elems; x++) bsk__store(P.o.host, P.o.t.dtype, x, NAN);
        for (int64_t x = 0; x < e.B * e.H * e.SQ; x++) P.lse[x] = NAN;
        bsk__attn_variant = var;
        CHECK_STATUS(run_on_device(ctx, &P), BSK_SUCCESS);
        bsk__attn_variant = 0;
        check_result(t, &P.o.t, P.lse, P.O_ref, P.lse_ref, 1e-6, "no tiles (hopper)");
        CHECK(strcmp(bsk_last_kernel(ctx), "hopper-attn-wgmma") == 0);
    }
    problem_free(&P);
    bsk_destroy(ctx);
}

BSK_TEST(gpu_attn_simt_and_fallbacks)
{
    bsk_context *ctx;
    if (!attn_gpu_ctx(&ctx)) SKIP("no CUDA device");
    /* the CUDA-core kernel on a case the tensor cores also take */
    spec a = {.B = 2, .H = 4, .HK = 2, .SQ = 150, .SK = 190, .D = 128, .bq = 64, .bk = 64, .dt = BSK_BF16, .order = BSHD,
              .causal = 1, .off = 40, .kind = 3, .kv_lens = 1, .empty_qb = 1};
    gpu_spec(t, ctx, &a, 1, "cuda-attention-simt", "simt forced");
    /* cases only the CUDA-core kernel takes: odd dim, small blocks, f32, unaligned strides */
    spec b = {.B = 1, .H = 2, .HK = 1, .SQ = 77, .SK = 77, .D = 40, .bq = 16, .bk = 32, .dt = BSK_F16, .order = BHSD,
              .causal = 1, .kind = 1, .empty_qb = -1};
    gpu_spec(t, ctx, &b, 0, "cuda-attention-simt", "dim 40 blocks 16x32");
    spec c = {.B = 2, .H = 2, .HK = 2, .SQ = 60, .SK = 90, .D = 64, .bq = 32, .bk = 32, .dt = BSK_F32, .order = BSHD,
              .kind = 3, .kv_lens = 1, .empty_qb = 0};
    gpu_spec(t, ctx, &c, 0, "cuda-attention-simt", "f32");
    spec d = {.B = 1, .H = 2, .HK = 2, .SQ = 100, .SK = 100, .D = 64, .bq = 64, .bk = 64, .dt = BSK_F16, .order = BSHD,
              .kind = 0, .pad = 3, .empty_qb = -1};
    gpu_spec(t, ctx, &d, 0, "cuda-attention-simt", "stride not a multiple of 8");
    bsk_destroy(ctx);
}

BSK_TEST(gpu_attn_empty_and_sparse_extremes)
{
    bsk_context *ctx;
    if (!attn_gpu_ctx(&ctx)) SKIP("no CUDA device");
    /* a layout with no tiles at all: every row O = 0, lse = -inf */
    spec e = {.B = 1, .H = 2, .HK = 2, .SQ = 130, .SK = 130, .D = 64, .bq = 64, .bk = 64, .dt = BSK_F16, .order = BSHD,
              .kind = 4, .empty_qb = 0};
    problem P;
    REQUIRE_OK(problem_make(&P, &e, bsk_test_rng()));
    for (int64_t x = 0; x < bsk__attn_layout_rows(&P.layout); x++) P.layout.full_count[x] = P.layout.part_count[x] = 0;
    ref_attention(&P.p, P.O_ref, P.lse_ref);
    CHECK_STATUS(run_on_device(ctx, &P), BSK_SUCCESS);
    check_result(t, &P.o.t, P.lse, P.O_ref, P.lse_ref, 1e-6, "no tiles");
    problem_free(&P);
    /* kv_lens including 0 (batch 0) with a causal bottom-right layout */
    spec k = {.B = 3, .H = 2, .HK = 1, .SQ = 64, .SK = 300, .D = 128, .bq = 64, .bk = 128, .dt = BSK_BF16, .order = BHSD,
              .causal = 1, .off = 236, .kind = 1, .kv_lens = 2, .empty_qb = -1};
    gpu_spec(t, ctx, &k, 0, "cuda-attention-mma", "kv_lens with zero");
    bsk_destroy(ctx);
}

BSK_TEST(gpu_attn_validation)
{
    bsk_context *ctx;
    if (!attn_gpu_ctx(&ctx)) SKIP("no CUDA device");
    spec sp = {.B = 1, .H = 2, .HK = 2, .SQ = 64, .SK = 64, .D = 64, .bq = 64, .bk = 64, .dt = BSK_F16, .order = BSHD,
                .kind = 0, .empty_qb = -1};
    problem P;
    REQUIRE_OK(problem_make(&P, &sp, bsk_test_rng()));
    void *dq = attn_to_dev(P.q.host, (size_t)P.q.elems * 2);
    bsk_attention_params b = P.p;
    b.q.data = dq;
    b.q.mem = BSK_MEM_DEVICE;
    CHECK_STATUS(bsk_attention_forward(ctx, &b), BSK_ERR_WRONG_LOCATION); /* mixed sides */
    b = P.p;
    b.q.data = dq; /* device pointer described as host */
    CHECK_STATUS(bsk_attention_forward(ctx, &b), BSK_ERR_WRONG_LOCATION);
    bsk_cuda_free(dq);
    problem_free(&P);
    bsk_destroy(ctx);
}

BSK_TEST(gpu_attn_topk_matches_cpu)
{
    bsk_context *ctx, *cpu;
    if (!attn_gpu_ctx(&ctx)) SKIP("no CUDA device");
    REQUIRE_OK(bsk_create(&cpu, BSK_BACKEND_CPU));
    for (size_t ci = 0; ci < sizeof gate_cases / sizeof gate_cases[0]; ci++) {
        const gate_case *c = &gate_cases[ci];
        gate_problem G;
        gate_make(&G, c, bsk_test_rng(), (int)(ci & 1));
        int64_t nb = (c->SK + c->bk - 1) / c->bk, cap = c->top_k < nb ? c->top_k : nb;
        bsk_attn_layout H, D, back;
        REQUIRE_OK(bsk_attn_layout_alloc(c->SQ, c->SK, c->bq, c->bk, (int32_t)c->B, (int32_t)c->H, (int32_t)cap, BSK_MEM_HOST, &H));
        REQUIRE_OK(bsk_attn_layout_alloc(c->SQ, c->SK, c->bq, c->bk, (int32_t)c->B, (int32_t)c->H, (int32_t)cap, BSK_MEM_DEVICE, &D));
        CHECK_STATUS(bsk_topk_block_layout(cpu, &G.p, &H), BSK_SUCCESS);
        size_t es = bsk_dtype_size(c->dt);
        bsk_topk_params dp = G.p;
        dp.q.data = attn_to_dev(G.q.host, (size_t)G.q.elems * es);
        dp.k.data = attn_to_dev(G.k.host, (size_t)G.k.elems * es);
        dp.q.mem = dp.k.mem = BSK_MEM_DEVICE;
        dp.kv_lens = G.kv_lens ? (const int32_t *)attn_to_dev(G.kv_lens, (size_t)c->B * 4) : NULL;
        bsk_dense wq = G.wq, wk = G.wk;
        if (G.p.w_q) {
            wq.data = attn_to_dev(G.wq.data, (size_t)(wq.rows * wq.ld) * bsk_dtype_size(wq.dtype));
            wk.data = attn_to_dev(G.wk.data, (size_t)(wk.rows * wk.ld) * bsk_dtype_size(wk.dtype));
            wq.mem = wk.mem = BSK_MEM_DEVICE;
            dp.w_q = &wq;
            dp.w_k = &wk;
        }
        CHECK_STATUS(bsk_topk_block_layout(ctx, &dp, &D), BSK_SUCCESS);
        CHECK(strcmp(bsk_last_kernel(ctx), "cuda-topk") == 0);
        CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
        REQUIRE_OK(bsk_attn_layout_clone(&D, BSK_MEM_HOST, &back));
        int64_t rows = bsk__attn_layout_rows(&H), diff = 0;
        for (int64_t r = 0; r < rows; r++) {
            if (H.full_count[r] != back.full_count[r] || H.part_count[r] != back.part_count[r]) { diff++; continue; }
            for (int32_t a = 0; a < H.full_count[r]; a++) diff += H.full_idx[r * cap + a] != back.full_idx[r * cap + a];
            for (int32_t a = 0; a < H.part_count[r]; a++) diff += H.part_idx[r * cap + a] != back.part_idx[r * cap + a];
        }
        if (diff) fprintf(stderr, "  gate case %zu: %lld differences GPU vs CPU\n", ci, (long long)diff);
        CHECK(diff == 0);
        check_gate(t, &G.p, &back);
        bsk_cuda_free(dp.q.data); bsk_cuda_free(dp.k.data); bsk_cuda_free((void *)dp.kv_lens);
        if (G.p.w_q) { bsk_cuda_free(wq.data); bsk_cuda_free(wk.data); }
        bsk_attn_layout_free(&H); bsk_attn_layout_free(&D); bsk_attn_layout_free(&back);
        gate_free(&G);
    }
    bsk_destroy(cpu);
    bsk_destroy(ctx);
}

/* topk.cu's test hook (tests/test_topk_gpu.c holds a weak definition for builds without CUDA); the layout
   comparison of tests/test_topk.c (counts and the entries they cover). */
extern int bsk__topk_variant;
int64_t topk_test_layout_diff(const bsk_attn_layout *A, const bsk_attn_layout *B);

/* The real sequence on one stream, nothing in between: the device gate on pre-pooled rows writes a layout, the
   attention reads it (on an sm_90 device the Hopper kernel, a programmatic dependent launch of the gate, which
   lets its dependents launch at its start). Two rounds back to back without a synchronisation, both into the same
   device layout (poisoned first with a valid, different layout): gate A -> attention A -> gate B -> attention B.
   Each output (NaN-poisoned) against the float64 reference on the CPU gate's layout of its round: attention A
   must read gate A's layout (not the poison), gate B must not overwrite it before attention A has read it.
   Fresh random Q, K, V and pooled rows; one case with the exact-path-everywhere gate (bsk__topk_variant 1024,
   several times slower: a long window for an early read), one with key lengths. */
BSK_TEST(gpu_attn_topk_then_attention)
{
    bsk_context *ctx, *cpu;
    if (!attn_gpu_ctx(&ctx)) SKIP("no CUDA device");
    REQUIRE_OK(bsk_create(&cpu, BSK_BACKEND_CPU));
    typedef struct { int64_t B, H, HK, SQ, SK, D; bsk_dtype dt; int causal, kv_lens, top_k, gate_variant; } seq_case;
    static const seq_case cases[] = {
        {2, 4, 2, 1100, 1100, 128, BSK_BF16, 1, 0, 4, 0},
        {2, 4, 4, 900, 1300, 64, BSK_F16, 0, 1, 3, 1024},
        {1, 4, 4, 1800, 2000, 64, BSK_BF16, 1, 0, 5, 0},
        {1, 4, 2, 1000, 1000, 128, BSK_F16, 0, 0, 4, 1024},
    };
    const int hopper = hopper_device();
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const seq_case *c = &cases[ci];
        bsk_rng *r = bsk_test_rng();
        const int64_t mq = (c->SQ + 127) / 128, nb = (c->SK + 127) / 128, cap = c->top_k < nb ? c->top_k : nb;
        const size_t es = bsk_dtype_size(c->dt);
        attn_tbuf q = attn_tensor_make(c->B, c->SQ, c->H, c->D, c->dt, BSHD, 0, r, 0);
        attn_tbuf k = attn_tensor_make(c->B, c->SK, c->HK, c->D, c->dt, BSHD, 0, r, 0);
        attn_tbuf v = attn_tensor_make(c->B, c->SK, c->HK, c->D, c->dt, BSHD, 0, r, 0);
        int32_t *lens = NULL;
        if (c->kv_lens) {
            lens = (int32_t *)malloc((size_t)c->B * 4);
            for (int64_t b = 0; b < c->B; b++) lens[b] = (int32_t)bsk_rng_int(r, 1, (int)c->SK);
        }
        void *dq = attn_to_dev(q.host, (size_t)q.elems * es), *dk = attn_to_dev(k.host, (size_t)k.elems * es);
        void *dv = attn_to_dev(v.host, (size_t)v.elems * es);
        int32_t *dlens = lens ? (int32_t *)attn_to_dev(lens, (size_t)c->B * 4) : NULL;
        REQUIRE(dq && dk && dv && (!lens || dlens));
        /* the device layout both rounds write, poisoned with a valid other layout: every row keeps the last block */
        bsk_attn_layout D, poison;
        REQUIRE_OK(bsk_attn_layout_alloc(c->SQ, c->SK, 128, 128, (int32_t)c->B, (int32_t)c->H, (int32_t)cap, BSK_MEM_DEVICE, &D));
        REQUIRE_OK(bsk_attn_layout_alloc(c->SQ, c->SK, 128, 128, (int32_t)c->B, (int32_t)c->H, (int32_t)cap, BSK_MEM_HOST, &poison));
        const int64_t rows = bsk__attn_layout_rows(&poison);
        for (int64_t x = 0; x < rows; x++) {
            poison.full_count[x] = 1;
            poison.part_count[x] = 0;
            for (int64_t a = 0; a < cap; a++) poison.full_idx[x * cap + a] = poison.part_idx[x * cap + a] = (int32_t)(nb - 1);
        }
        CHECK_STATUS(bsk_cuda_memcpy(D.full_count, poison.full_count, (size_t)rows * 4, 1, 0), BSK_SUCCESS);
        CHECK_STATUS(bsk_cuda_memcpy(D.part_count, poison.part_count, (size_t)rows * 4, 1, 0), BSK_SUCCESS);
        CHECK_STATUS(bsk_cuda_memcpy(D.full_idx, poison.full_idx, (size_t)(rows * cap) * 4, 1, 0), BSK_SUCCESS);
        CHECK_STATUS(bsk_cuda_memcpy(D.part_idx, poison.part_idx, (size_t)(rows * cap) * 4, 1, 0), BSK_SUCCESS);
        /* per round: pooled rows, the CPU gate's layout, the reference on it, device operands */
        attn_tbuf pq[2], pk[2], o[2];
        bsk_attn_layout H[2];
        bsk_topk_params gp[2];
        bsk_attention_params ap[2];
        double *O_ref[2], *lse_ref[2];
        float *lse[2], *dlse[2];
        void *dpq[2], *dpk[2], *dout[2];
        const int64_t nl = c->B * c->H * c->SQ;
        for (int x = 0; x < 2; x++) {
            pq[x] = attn_tensor_make(c->B, mq, c->H, c->D, c->dt, BSHD, 0, r, 0);
            pk[x] = attn_tensor_make(c->B, nb, c->HK, c->D, c->dt, BSHD, 0, r, 0);
            memset(&gp[x], 0, sizeof gp[x]);
            gp[x].q = pq[x].t; gp[x].k = pk[x].t; gp[x].pooled = 1; gp[x].kv_lens = lens;
            gp[x].top_k = c->top_k; gp[x].causal = c->causal; gp[x].causal_offset = c->causal ? c->SK - c->SQ : 0;
            gp[x].keep_first = 1; gp[x].keep_diagonal = 1;
            REQUIRE_OK(bsk_attn_layout_alloc(c->SQ, c->SK, 128, 128, (int32_t)c->B, (int32_t)c->H, (int32_t)cap, BSK_MEM_HOST, &H[x]));
            CHECK_STATUS(bsk_topk_block_layout(cpu, &gp[x], &H[x]), BSK_SUCCESS);
            o[x] = attn_tensor_make(c->B, c->SQ, c->H, c->D, c->dt, BSHD, 0, r, 1);
            lse[x] = lse_poison(nl);
            memset(&ap[x], 0, sizeof ap[x]);
            ap[x].q = q.t; ap[x].k = k.t; ap[x].v = v.t; ap[x].o = o[x].t; ap[x].lse = lse[x]; ap[x].layout = &H[x];
            ap[x].kv_lens = lens; ap[x].causal = c->causal; ap[x].causal_offset = gp[x].causal_offset;
            O_ref[x] = (double *)malloc((size_t)(c->B * c->SQ * c->H * c->D) * sizeof(double));
            lse_ref[x] = (double *)malloc((size_t)nl * sizeof(double));
            ref_attention(&ap[x], O_ref[x], lse_ref[x]);
            dpq[x] = attn_to_dev(pq[x].host, (size_t)pq[x].elems * es);
            dpk[x] = attn_to_dev(pk[x].host, (size_t)pk[x].elems * es);
            dout[x] = attn_to_dev(o[x].host, (size_t)o[x].elems * es);
            dlse[x] = (float *)attn_to_dev(lse[x], (size_t)nl * 4);
            REQUIRE(dpq[x] && dpk[x] && dout[x] && dlse[x]);
            gp[x].q.data = dpq[x]; gp[x].k.data = dpk[x]; gp[x].q.mem = gp[x].k.mem = BSK_MEM_DEVICE; gp[x].kv_lens = dlens;
            ap[x].q.data = dq; ap[x].k.data = dk; ap[x].v.data = dv; ap[x].o.data = dout[x]; ap[x].lse = dlse[x];
            ap[x].q.mem = ap[x].k.mem = ap[x].v.mem = ap[x].o.mem = BSK_MEM_DEVICE;
            ap[x].kv_lens = dlens; ap[x].layout = &D;
        }
        /* the sequence: no synchronisation until the end */
        for (int x = 0; x < 2; x++) {
            bsk__topk_variant = c->gate_variant;
            CHECK_STATUS(bsk_topk_block_layout(ctx, &gp[x], &D), BSK_SUCCESS);
            bsk__topk_variant = 0;
            CHECK(strcmp(bsk_last_kernel(ctx), "cuda-topk") == 0);
            CHECK_STATUS(bsk_attention_forward(ctx, &ap[x]), BSK_SUCCESS);
            if (hopper && strcmp(bsk_last_kernel(ctx), "hopper-attn-wgmma") != 0) {
                fprintf(stderr, "  gate -> attention case %zu: ran %s\n", ci, bsk_last_kernel(ctx));
                CHECK(0);
            }
        }
        CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
        for (int x = 0; x < 2; x++) {
            CHECK_STATUS(bsk_cuda_memcpy(o[x].host, dout[x], (size_t)o[x].elems * es, 0, 1), BSK_SUCCESS);
            CHECK_STATUS(bsk_cuda_memcpy(lse[x], dlse[x], (size_t)nl * 4, 0, 1), BSK_SUCCESS);
            char what[120];
            snprintf(what, sizeof what, "gate -> attention case %zu round %d (%s D%lld causal%d)", ci, x,
                     c->dt == BSK_BF16 ? "bf16" : "f16", (long long)c->D, c->causal);
            check_result(t, &o[x].t, lse[x], O_ref[x], lse_ref[x], tol_for(c->dt, 1), what);
        }
        bsk_attn_layout back;
        if (bsk_attn_layout_clone(&D, BSK_MEM_HOST, &back) == BSK_SUCCESS) { /* round B's layout, the CPU gate's */
            const int64_t diff = topk_test_layout_diff(&H[1], &back);
            if (diff) fprintf(stderr, "  gate -> attention case %zu: %lld layout differences GPU vs CPU\n", ci, (long long)diff);
            CHECK(diff == 0);
            bsk_attn_layout_free(&back);
        } else CHECK(0);
        for (int x = 0; x < 2; x++) {
            bsk_cuda_free(dpq[x]); bsk_cuda_free(dpk[x]); bsk_cuda_free(dout[x]); bsk_cuda_free(dlse[x]);
            free(pq[x].host); free(pk[x].host); free(o[x].host); free(lse[x]); free(O_ref[x]); free(lse_ref[x]);
            bsk_attn_layout_free(&H[x]);
        }
        bsk_cuda_free(dq); bsk_cuda_free(dk); bsk_cuda_free(dv); bsk_cuda_free(dlens);
        free(q.host); free(k.host); free(v.host); free(lens);
        bsk_attn_layout_free(&D); bsk_attn_layout_free(&poison);
    }
    bsk_destroy(cpu);
    bsk_destroy(ctx);
}

/* Random problems through the default dispatch (the Hopper kernel where it applies) and, for some, a forced
   build (variant 3: mma.sync only, 7: the Hopper kernel without options) or the CUDA-core kernel: any dtype, head dim,
   block sizes, GQA, orders, odd lengths, causal offsets, key lengths, padded or odd-strided rows, every layout
   kind, scales of either sign. Every element of O and lse against the float64 reference (both NaN-poisoned
   before the run). BSK_STRESS_SCALE multiplies the count (the long tier, TESTING.md). */
BSK_TEST(gpu_attn_stress_random)
{
    bsk_context *ctx;
    if (!attn_gpu_ctx(&ctx)) SKIP("no CUDA device");
    int n = 60 * bsk_test_stress_scale(), passed = 0, fails = 0, hopper = 0;
    bsk_rng *r = bsk_test_rng();
    static const int32_t blocks[] = {16, 32, 64, 128, 128, 64, 128};
    static const int64_t dims[] = {64, 128, 64, 128, 32, 80};
    for (int i = 0; i < n && fails < 8; i++) {
        spec sp;
        memset(&sp, 0, sizeof sp);
        sp.B = bsk_rng_int(r, 1, 3);
        sp.H = (int64_t)1 << bsk_rng_int(r, 0, 2);
        sp.HK = (int64_t)1 << bsk_rng_int(r, 0, (int)(sp.H == 4 ? 2 : sp.H == 2 ? 1 : 0));
        sp.SQ = bsk_rng_int(r, 1, 384);
        sp.SK = bsk_rng_uniform(r) < 0.5 ? sp.SQ : bsk_rng_int(r, 1, 384);
        sp.D = dims[bsk_rng_int(r, 0, 5)];
        sp.bq = blocks[bsk_rng_int(r, 0, 6)];
        sp.bk = bsk_rng_uniform(r) < 0.7 ? (sp.bq < 64 ? 64 : sp.bq) : blocks[bsk_rng_int(r, 0, 6)];
        double u = bsk_rng_uniform(r);
        sp.dt = u < 0.45 ? BSK_F16 : u < 0.9 ? BSK_BF16 : BSK_F32;
        sp.order = bsk_rng_int(r, 0, 1);
        sp.causal = bsk_rng_int(r, 0, 1);
        sp.off = bsk_rng_uniform(r) < 0.6 ? sp.SK - sp.SQ : bsk_rng_int(r, -sp.SQ, sp.SK);
        sp.kind = bsk_rng_int(r, 0, 4);
        sp.kv_lens = bsk_rng_int(r, 0, 2);
        sp.pad = bsk_rng_uniform(r) < 0.7 ? 0 : bsk_rng_uniform(r) < 0.5 ? 8 : bsk_rng_int(r, 1, 7);
        sp.empty_qb = bsk_rng_uniform(r) < 0.3 ? bsk_rng_int(r, 0, (sp.SQ - 1) / sp.bq) : -1;
        sp.scale = bsk_rng_uniform(r) < 0.6 ? 0.0f : (float)(bsk_rng_uniform(r) < 0.8 ? 0.02 + 0.2 * bsk_rng_uniform(r) : -0.1);
        problem P;
        bsk_status s = problem_make(&P, &sp, r);
        CHECK_STATUS(s, BSK_SUCCESS);
        if (s) { problem_free(&P); fails++; continue; }
        u = bsk_rng_uniform(r);
        int var = u < 0.7 ? 0 : u < 0.85 ? 3 : 7, simt = bsk_rng_uniform(r) < 0.1;
        bsk__attn_variant = var;
        bsk__attention_force_simt(simt);
        bsk_status rs = run_on_device(ctx, &P);
        bsk__attn_variant = 0;
        bsk__attention_force_simt(0);
        int before = t->failed;
        CHECK_STATUS(rs, BSK_SUCCESS);
        if (!rs) {
            char label[200];
            snprintf(label, sizeof label, "stress %d: B%lld H%lld/%lld SQ%lld SK%lld D%lld bq%d bk%d %s order%d causal%d off%lld "
                     "kind%d kv_lens%d pad%lld empty%lld scale%g var%d simt%d [%s]", i, (long long)sp.B, (long long)sp.H,
                     (long long)sp.HK, (long long)sp.SQ, (long long)sp.SK, (long long)sp.D, sp.bq, sp.bk,
                     sp.dt == BSK_F16 ? "f16" : sp.dt == BSK_BF16 ? "bf16" : "f32", sp.order, sp.causal, (long long)sp.off,
                     sp.kind, sp.kv_lens, (long long)sp.pad, (long long)sp.empty_qb, sp.scale, var, simt, bsk_last_kernel(ctx));
            check_result(t, &P.o.t, P.lse, P.O_ref, P.lse_ref, tol_for(sp.dt, 1), label);
            if (t->failed != before) fprintf(stderr, "  ^ %s\n", label);
            hopper += strcmp(bsk_last_kernel(ctx), "hopper-attn-wgmma") == 0;
        }
        if (t->failed == before) passed++;
        else fails++;
        problem_free(&P);
    }
    printf("  gpu attention stress: %d/%d random problems passed (%d on the Hopper kernel)\n", passed, n, hopper);
    if (hopper_device()) CHECK(hopper > 0);
    bsk_destroy(ctx);
}

/* O or lse over the layout's arrays (read while O is written): refused, nothing written */
BSK_TEST(attn_o_over_layout_refused)
{
    enum { S = 64 };
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    float *q = (float *)calloc(S, 4), *k = (float *)calloc(S, 4), *v = (float *)malloc(S * 4);
    for (int i = 0; i < S; i++) v[i] = 1e9f;
    bsk_attn_layout D;
    REQUIRE_OK(bsk_attn_layout_dense(S, S, 1, 1, &D));
    int32_t *fc = (int32_t *)calloc(S + 1, 4);
    memcpy(fc, D.full_count, S * 4);
    bsk_attn_layout L = D;
    L.full_count = fc;
    REQUIRE_OK(bsk_attn_layout_validate(&L));
    bsk_attn_tensor Q = bsk_attn_tensor_bshd(q, 1, S, 1, 1, BSK_F32, BSK_MEM_HOST);
    bsk_attn_tensor K = bsk_attn_tensor_bshd(k, 1, S, 1, 1, BSK_F32, BSK_MEM_HOST);
    bsk_attn_tensor V = bsk_attn_tensor_bshd(v, 1, S, 1, 1, BSK_F32, BSK_MEM_HOST);
    bsk_attn_tensor O = bsk_attn_tensor_bshd(fc + 1, 1, S, 1, 1, BSK_F32, BSK_MEM_HOST);
    bsk_attention_params p = {Q, K, V, O, NULL, &L, NULL, 0.0f, 0, 0};
    int32_t before[S + 1];
    memcpy(before, fc, sizeof before);
    CHECK_STATUS(bsk_attention_forward(ctx, &p), BSK_ERR_INVALID_ARGUMENT);
    CHECK(memcmp(before, fc, sizeof before) == 0);
    /* lse over the layout's part_count */
    float *o = (float *)calloc(S, 4);
    p.o = bsk_attn_tensor_bshd(o, 1, S, 1, 1, BSK_F32, BSK_MEM_HOST);
    p.layout = &D;
    p.lse = (float *)D.part_count;
    CHECK_STATUS(bsk_attention_forward(ctx, &p), BSK_ERR_INVALID_ARGUMENT);
    free(q); free(k); free(v); free(o); free(fc);
    bsk_attn_layout_free(&D);
    bsk_destroy(ctx);
}

/* Strides whose products each pass but whose sum passes INT64_MAX: the span check must say OVERFLOW.
   Before the fix: signed overflow at attention.c:51 (UBSan), the wrapped sum passes, and the forward reads
   q[-1] (heap-buffer-overflow) and returns success. */

/* strides whose products each fit but whose sum passes INT64_MAX: a size overflow, not a wrapped offset */
BSK_TEST(attn_stride_sum_overflow)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    float *q = (float *)calloc(64, 4), *k = (float *)calloc(64, 4), *v = (float *)calloc(64, 4), *o = (float *)calloc(64, 4);
    const int64_t big = ((int64_t)1 << 62) - 1;
    bsk_attn_tensor Q = {2, 2, 2, 1, big, big, big, BSK_F32, BSK_MEM_HOST, q};
    bsk_attn_tensor K = bsk_attn_tensor_bshd(k, 2, 2, 2, 1, BSK_F32, BSK_MEM_HOST);
    bsk_attn_tensor V = bsk_attn_tensor_bshd(v, 2, 2, 2, 1, BSK_F32, BSK_MEM_HOST);
    bsk_attn_tensor O = bsk_attn_tensor_bshd(o, 2, 2, 2, 1, BSK_F32, BSK_MEM_HOST);
    bsk_attn_layout L;
    REQUIRE_OK(bsk_attn_layout_dense(2, 2, 1, 1, &L));
    bsk_attention_params p = {Q, K, V, O, NULL, &L, NULL, 0.0f, 0, 0};
    CHECK_STATUS(bsk_attention_forward(ctx, &p), BSK_ERR_OVERFLOW);
    bsk_attn_layout Lo;
    REQUIRE_OK(bsk_attn_layout_alloc(2, 2, 1, 1, 2, 2, 2, BSK_MEM_HOST, &Lo));
    bsk_topk_params tp;
    memset(&tp, 0, sizeof tp);
    tp.q = Q; tp.k = K; tp.top_k = 1;
    CHECK_STATUS(bsk_topk_block_layout(ctx, &tp, &Lo), BSK_ERR_OVERFLOW);
    free(q); free(k); free(v); free(o);
    bsk_attn_layout_free(&L);
    bsk_attn_layout_free(&Lo);
    bsk_destroy(ctx);
}

/* Backward on broadcast (stride-0) inputs of 2^62 - 2^32 rows: lse_bytes = rows * 4 must not overflow
   (UBSan: attention_bwd.c:40). The dq view writes one element many times: INVALID_ARGUMENT. */

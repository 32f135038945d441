/* test_attention_bwd.c — block-sparse attention backward (bsk_attention_backward) against a float64
   reference of the gradients of dense masked attention written from the definition (the mask expanded
   element by element from the layout's lists, kv_len and the causal rule; P, dP and dS recomputed in
   double, independent of the library's O and lse), a finite-difference check of the CPU backward, and
   the validation rules. CPU tests: attn_bwd_*; GPU tests: gpu_attn_bwd_* (they SKIP without a device).
   Outputs start as NaN and every element is checked; rows that take part in nothing must be exactly 0. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "attn_util.h"
#include "../src/internal.h"
#include "../src/attention/attention_internal.h"

/* ------------------------------------------------------------------ problem */

typedef attn_spec bspec; /* the problem shape and mask rules (attn_util.h) */

typedef struct bprob {
    attn_tbuf q, k, v, o, g, dq, dk, dv;
    float *lse, *dlse;
    bsk_attn_layout layout;
    int32_t *kv_lens;
    bsk_attention_params f;
    bsk_attention_bwd_params p;
    double *dQ, *dK, *dV;     /* reference, packed [b][s][h][d] */
    uint8_t *q_act, *k_act;   /* a query row with something to attend to / a key some query attends to */
} bprob;

/* float64 gradients from the definition (see the file comment). */
static void ref_backward(bprob *P)
{
    const bsk_attention_bwd_params *p = &P->p;
    const bsk_attn_layout *L = p->layout;
    const bsk_attn_tensor *Q = &p->q, *K = &p->k, *V = &p->v, *G = &p->d_o;
    int64_t B = Q->batch, H = Q->heads, HK = K->heads, SQ = Q->seq, SK = K->seq, D = Q->dim;
    double scale = p->scale != 0.0f ? p->scale : 1.0 / sqrt((double)D);
    memset(P->dQ, 0, (size_t)(B * SQ * H * D + 1) * sizeof(double));
    memset(P->dK, 0, (size_t)(B * SK * HK * D + 1) * sizeof(double));
    memset(P->dV, 0, (size_t)(B * SK * HK * D + 1) * sizeof(double));
    memset(P->q_act, 0, (size_t)(B * SQ * H + 1));
    memset(P->k_act, 0, (size_t)(B * SK * HK + 1));
    uint8_t *allowed = (uint8_t *)malloc((size_t)SK + 1);
    double *s = (double *)malloc((size_t)(SK + 1) * sizeof(double)), *dp = (double *)malloc((size_t)(SK + 1) * sizeof(double));
    double *qd = (double *)malloc((size_t)D * sizeof(double)), *gd = (double *)malloc((size_t)D * sizeof(double));
    double *kd = (double *)malloc((size_t)(SK * D + 1) * sizeof(double)), *vd = (double *)malloc((size_t)(SK * D + 1) * sizeof(double));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            int64_t hk = h / (H / HK), kv_len = p->kv_lens ? p->kv_lens[b] : SK;
            attn_load_rows(K, b, hk, SK, kd);
            attn_load_rows(V, b, hk, SK, vd);
            for (int64_t q = 0; q < SQ; q++) {
                for (int64_t d = 0; d < D; d++) {
                    qd[d] = bsk__load(Q->data, Q->dtype, attn_tidx(Q, b, q, h, d));
                    gd[d] = bsk__load(G->data, G->dtype, attn_tidx(G, b, q, h, d));
                }
                attn_allowed_keys(L, b, h, q, SK, kv_len, p->causal, p->causal_offset, allowed);
                double mx = -INFINITY;
                for (int64_t k = 0; k < SK; k++) {
                    if (!allowed[k]) continue;
                    double acc = 0, acc2 = 0;
                    for (int64_t d = 0; d < D; d++) {
                        acc += qd[d] * kd[k * D + d];
                        acc2 += gd[d] * vd[k * D + d];
                    }
                    s[k] = acc * scale;
                    dp[k] = acc2;
                    if (s[k] > mx) mx = s[k];
                }
                if (mx == -INFINITY) continue; /* an empty row: no gradient anywhere */
                P->q_act[(b * SQ + q) * H + h] = 1;
                /* dlse/ds_k = P_k: a loss term on lse adds d_lse · P to dS */
                double sum = 0, delta = p->d_lse ? -(double)p->d_lse[(b * H + h) * SQ + q] : 0.0;
                for (int64_t k = 0; k < SK; k++)
                    if (allowed[k]) sum += exp(s[k] - mx);
                for (int64_t k = 0; k < SK; k++)
                    if (allowed[k]) { s[k] = exp(s[k] - mx) / sum; delta += s[k] * dp[k]; } /* s becomes P */
                double *dq = P->dQ + ((b * SQ + q) * H + h) * D;
                for (int64_t k = 0; k < SK; k++) {
                    if (!allowed[k]) continue;
                    double ds = s[k] * (dp[k] - delta);
                    double *dk = P->dK + ((b * SK + k) * HK + hk) * D, *dv = P->dV + ((b * SK + k) * HK + hk) * D;
                    P->k_act[(b * SK + k) * HK + hk] = 1;
                    for (int64_t d = 0; d < D; d++) {
                        dq[d] += scale * ds * kd[k * D + d];
                        dk[d] += scale * ds * qd[d];
                        dv[d] += s[k] * gd[d];
                    }
                }
            }
        }
    free(allowed); free(s); free(dp); free(qd); free(gd); free(kd); free(vd);
}

static bsk_status prob_make(bprob *P, const bspec *sp, bsk_rng *r)
{
    memset(P, 0, sizeof *P);
    int o1 = sp->order, o2 = sp->order ^ 1;
    P->q = attn_tensor_make(sp->B, sp->SQ, sp->H, sp->D, sp->dt, o1, sp->pad, r, 0);
    P->k = attn_tensor_make(sp->B, sp->SK, sp->HK, sp->D, sp->dt, o1, sp->pad, r, 0);
    P->v = attn_tensor_make(sp->B, sp->SK, sp->HK, sp->D, sp->dt, o1, sp->pad, r, 0);
    P->g = attn_tensor_make(sp->B, sp->SQ, sp->H, sp->D, sp->dt, o2, sp->pad, r, 0);
    P->o = attn_tensor_make(sp->B, sp->SQ, sp->H, sp->D, sp->dt, o2, sp->pad, r, 1);
    P->dq = attn_tensor_make(sp->B, sp->SQ, sp->H, sp->D, sp->dt, o2, sp->pad, r, 1); /* outputs in the other order */
    P->dk = attn_tensor_make(sp->B, sp->SK, sp->HK, sp->D, sp->dt, o2, sp->pad, r, 1);
    P->dv = attn_tensor_make(sp->B, sp->SK, sp->HK, sp->D, sp->dt, o1, sp->pad, r, 1);
    P->lse = (float *)malloc((size_t)(sp->B * sp->H * sp->SQ + 1) * sizeof(float));
    for (int64_t x = 0; x <= sp->B * sp->H * sp->SQ; x++) P->lse[x] = NAN;
    if (sp->dlse) {
        P->dlse = (float *)malloc((size_t)(sp->B * sp->H * sp->SQ + 1) * sizeof(float));
        for (int64_t x = 0; x <= sp->B * sp->H * sp->SQ; x++) P->dlse[x] = bsk_rng_sym(r);
    }
    bsk_status s = attn_spec_layout(sp, r, &P->layout);
    if (s) return s;
    P->kv_lens = attn_spec_kv_lens(sp, r);
    P->f.q = P->q.t; P->f.k = P->k.t; P->f.v = P->v.t; P->f.o = P->o.t; P->f.lse = P->lse;
    P->f.layout = &P->layout; P->f.kv_lens = P->kv_lens; P->f.scale = sp->scale;
    P->f.causal = sp->causal; P->f.causal_offset = sp->off;
    P->p.q = P->q.t; P->p.k = P->k.t; P->p.v = P->v.t; P->p.o = P->o.t; P->p.d_o = P->g.t; P->p.lse = P->lse; P->p.d_lse = P->dlse;
    P->p.dq = P->dq.t; P->p.dk = P->dk.t; P->p.dv = P->dv.t;
    P->p.layout = &P->layout; P->p.kv_lens = P->kv_lens; P->p.scale = sp->scale;
    P->p.causal = sp->causal; P->p.causal_offset = sp->off;
    P->dQ = (double *)malloc((size_t)(sp->B * sp->SQ * sp->H * sp->D + 1) * sizeof(double));
    P->dK = (double *)malloc((size_t)(sp->B * sp->SK * sp->HK * sp->D + 1) * sizeof(double));
    P->dV = (double *)malloc((size_t)(sp->B * sp->SK * sp->HK * sp->D + 1) * sizeof(double));
    P->q_act = (uint8_t *)malloc((size_t)(sp->B * sp->SQ * sp->H + 1));
    P->k_act = (uint8_t *)malloc((size_t)(sp->B * sp->SK * sp->HK + 1));
    ref_backward(P);
    return BSK_SUCCESS;
}

static void prob_free(bprob *P)
{
    attn_tbuf *all[8] = {&P->q, &P->k, &P->v, &P->o, &P->g, &P->dq, &P->dk, &P->dv};
    for (int i = 0; i < 8; i++) free(all[i]->host);
    free(P->lse); free(P->dlse); free(P->kv_lens); free(P->dQ); free(P->dK); free(P->dV); free(P->q_act); free(P->k_act);
    bsk_attn_layout_free(&P->layout);
}

/* Every element of `got` against ref; inactive rows must be exactly 0. Returns the relative error. */
static double check_grad(bsk_test_ctx *t, const bsk_attn_tensor *got, const double *ref, const uint8_t *act, double tol,
                         const char *what, const char *name)
{
    int64_t B = got->batch, S = got->seq, H = got->heads, D = got->dim, bad_zero = 0;
    double num = 0, den = 0;
    int nonfinite = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t d = 0; d < D; d++) {
                    double g = bsk__load(got->data, got->dtype, attn_tidx(got, b, s, h, d)), r = ref[((b * S + s) * H + h) * D + d];
                    if (!isfinite(g)) nonfinite = 1;
                    if (!act[(b * S + s) * H + h] && g != 0.0) bad_zero++;
                    num += (g - r) * (g - r);
                    den += r * r;
                }
    double err = nonfinite ? NAN : (den > 0 ? sqrt(num / den) : sqrt(num));
    if (!(err <= tol) || bad_zero || getenv("BSK_TEST_VERBOSE"))
        fprintf(stderr, "  [%s] %s: rel err %.3e (tol %.1e), %lld non-zero elements in rows that take part in nothing\n",
                what, name, err, tol, (long long)bad_zero);
    CHECK_REL(err, tol);
    CHECK(bad_zero == 0);
    return err;
}

static void check_all(bsk_test_ctx *t, const bprob *P, double tol, const char *what)
{
    check_grad(t, &P->dq.t, P->dQ, P->q_act, tol, what, "dQ");
    check_grad(t, &P->dk.t, P->dK, P->k_act, tol, what, "dK");
    check_grad(t, &P->dv.t, P->dV, P->k_act, tol, what, "dV");
}

static double tol_for(bsk_dtype dt)
{
    /* O is stored in the input dtype before D = rowsum(dO∘O); the GPU also rounds P and dS for the products */
    /* measured, CPU and GPU alike: f32 3e-7, f16 2e-4 .. 3.2e-4, bf16 1.6e-3 .. 2.6e-3 */
    return dt == BSK_F32 ? 1e-5 : dt == BSK_F16 ? 3e-3 : 1.5e-2;
}

static void run_cpu_spec(bsk_test_ctx *t, const bspec *sp, const char *what)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    bprob P;
    bsk_status s = prob_make(&P, sp, bsk_test_rng());
    CHECK_STATUS(s, BSK_SUCCESS);
    if (!s) {
        CHECK_STATUS(bsk_attention_forward(ctx, &P.f), BSK_SUCCESS);
        CHECK_STATUS(bsk_attention_backward(ctx, &P.p), BSK_SUCCESS);
        CHECK(strcmp(bsk_last_kernel(ctx), "cpu-attention-bwd") == 0);
        check_all(t, &P, tol_for(sp->dt), what);
        /* deterministic: a second run gives the same bits */
        size_t nb = (size_t)P.dk.elems * bsk_dtype_size(sp->dt);
        void *first = malloc(nb);
        memcpy(first, P.dk.host, nb);
        attn_tensor_poison(&P.dk);
        CHECK_STATUS(bsk_attention_backward(ctx, &P.p), BSK_SUCCESS);
        CHECK(memcmp(first, P.dk.host, nb) == 0);
        free(first);
    }
    prob_free(&P);
    bsk_destroy(ctx);
}

/* ------------------------------------------------------------------ CPU tests */

BSK_TEST(attn_bwd_dense_bshd_f16_odd_length)
{
    bspec sp = {.B = 2, .H = 3, .HK = 3, .SQ = 100, .SK = 90, .D = 64, .bq = 32, .bk = 32, .dt = BSK_F16, .order = BSHD,
                .kind = 0, .empty_qb = -1};
    run_cpu_spec(t, &sp, "dense bshd f16");
}

BSK_TEST(attn_bwd_causal_bhsd_bf16_d128)
{
    bspec sp = {.B = 1, .H = 2, .HK = 2, .SQ = 77, .SK = 77, .D = 128, .bq = 16, .bk = 32, .dt = BSK_BF16, .order = BHSD,
                .causal = 1, .kind = 1, .pad = 8, .empty_qb = -1};
    run_cpu_spec(t, &sp, "causal bhsd bf16 d128");
}

BSK_TEST(attn_bwd_causal_bottom_right_gqa)
{
    bspec sp = {.B = 2, .H = 4, .HK = 2, .SQ = 40, .SK = 100, .D = 64, .bq = 16, .bk = 16, .dt = BSK_F16, .order = BSHD,
                .causal = 1, .off = 60, .kind = 1, .empty_qb = -1, .dlse = 1};
    run_cpu_spec(t, &sp, "causal offset gqa");
}

BSK_TEST(attn_bwd_local_global)
{
    bspec sp = {.B = 1, .H = 2, .HK = 1, .SQ = 150, .SK = 150, .D = 64, .bq = 16, .bk = 16, .dt = BSK_BF16, .order = BSHD,
                .kind = 2, .empty_qb = -1};
    run_cpu_spec(t, &sp, "local+global");
    bspec sc = sp;
    sc.causal = 1;
    sc.order = BHSD;
    run_cpu_spec(t, &sc, "local+global causal");
}

BSK_TEST(attn_bwd_from_mask_empty_rows_kvlens)
{
    bspec sp = {.B = 2, .H = 4, .HK = 2, .SQ = 90, .SK = 130, .D = 64, .bq = 16, .bk = 32, .dt = BSK_F16, .order = BHSD,
                .kind = 3, .kv_lens = 2, .pad = 8, .empty_qb = 2, .dlse = 1};
    run_cpu_spec(t, &sp, "random per head, kv_lens with 0, empty query block, d_lse");
    bspec sc = {.B = 2, .H = 4, .HK = 1, .SQ = 90, .SK = 90, .D = 64, .bq = 32, .bk = 16, .dt = BSK_BF16, .order = BSHD,
                .causal = 1, .kind = 4, .kv_lens = 1, .empty_qb = 1};
    run_cpu_spec(t, &sc, "random shared causal mqa");
}

BSK_TEST(attn_bwd_f32_scale_dim40)
{
    bspec sp = {.B = 1, .H = 2, .HK = 2, .SQ = 50, .SK = 70, .D = 40, .bq = 16, .bk = 16, .dt = BSK_F32, .order = BSHD,
                .kind = 4, .empty_qb = -1, .scale = 0.37f};
    run_cpu_spec(t, &sp, "f32 scale");
}

/* Finite differences of the library's own (fp32, CPU) forward: L = sum(O ∘ W) + sum(lse ∘ w), dO = W,
   d_lse = w. */
BSK_TEST(attn_bwd_finite_differences)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    bspec sp = {.B = 1, .H = 2, .HK = 1, .SQ = 10, .SK = 12, .D = 4, .bq = 4, .bk = 4, .dt = BSK_F32, .order = BSHD,
                .causal = 1, .off = 2, .kind = 1, .kv_lens = 1, .empty_qb = -1, .scale = 0.8f, .dlse = 1};
    bprob P;
    REQUIRE_OK(prob_make(&P, &sp, bsk_test_rng()));
    P.kv_lens[0] = 11;
    REQUIRE_OK(bsk_attention_forward(ctx, &P.f));
    REQUIRE_OK(bsk_attention_backward(ctx, &P.p));
    attn_tbuf *in[3] = {&P.q, &P.k, &P.v}, *gr[3] = {&P.dq, &P.dk, &P.dv};
    const double eps = 1e-2;
    for (int x = 0; x < 3; x++) {
        const bsk_attn_tensor *T = &in[x]->t;
        double num = 0, den = 0;
        for (int64_t s = 0; s < T->seq; s++)
            for (int64_t h = 0; h < T->heads; h++)
                for (int64_t d = 0; d < T->dim; d++) {
                    float *e = (float *)in[x]->host + attn_tidx(T, 0, s, h, d), keep = *e;
                    double Lpm[2];
                    for (int side = 0; side < 2; side++) {
                        *e = keep + (float)(side ? -eps : eps);
                        REQUIRE_OK(bsk_attention_forward(ctx, &P.f));
                        double acc = 0;
                        for (int64_t q = 0; q < sp.SQ; q++)
                            for (int64_t hh = 0; hh < sp.H; hh++)
                                for (int64_t c = 0; c < sp.D; c++)
                                    acc += (double)((float *)P.o.host)[attn_tidx(&P.o.t, 0, q, hh, c)] *
                                           ((float *)P.g.host)[attn_tidx(&P.g.t, 0, q, hh, c)];
                        for (int64_t x = 0; x < sp.H * sp.SQ; x++) acc += (double)P.lse[x] * P.dlse[x];
                        Lpm[side] = acc;
                    }
                    *e = keep;
                    double fd = (Lpm[0] - Lpm[1]) / (2 * eps), an = ((float *)gr[x]->host)[attn_tidx(&gr[x]->t, 0, s, h, d)];
                    num += (fd - an) * (fd - an);
                    den += fd * fd;
                }
        double err = sqrt(num / (den > 0 ? den : 1));
        if (!(err <= 5e-4) || getenv("BSK_TEST_VERBOSE")) fprintf(stderr, "  finite differences: d%c rel err %.3e\n", "qkv"[x], err);
        CHECK_REL(err, 5e-4); /* measured: 1e-5 .. 4e-5 */
        CHECK(den > 0);
    }
    prob_free(&P);
    bsk_destroy(ctx);
}

BSK_TEST(attn_bwd_validation_outputs_untouched)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    bspec sp = {.B = 2, .H = 4, .HK = 2, .SQ = 40, .SK = 40, .D = 64, .bq = 16, .bk = 16, .dt = BSK_F16, .order = BSHD,
                .kind = 0, .empty_qb = -1};
    bprob P;
    REQUIRE_OK(prob_make(&P, &sp, bsk_test_rng()));
    REQUIRE_OK(bsk_attention_forward(ctx, &P.f));
    attn_tbuf *outs[3] = {&P.dq, &P.dk, &P.dv};
    void *before[3];
    for (int i = 0; i < 3; i++) {
        before[i] = malloc((size_t)outs[i]->elems * 2);
        memcpy(before[i], outs[i]->host, (size_t)outs[i]->elems * 2);
    }
    bsk_attention_bwd_params b;
#define UNTOUCHED() (memcmp(before[0], P.dq.host, (size_t)P.dq.elems * 2) == 0 && \
                     memcmp(before[1], P.dk.host, (size_t)P.dk.elems * 2) == 0 && \
                     memcmp(before[2], P.dv.host, (size_t)P.dv.elems * 2) == 0)
#define EXPECT(mod, want)                                                                                  \
    do { b = P.p; mod; CHECK_STATUS(bsk_attention_backward(ctx, &b), want); CHECK(UNTOUCHED()); } while (0)
    CHECK_STATUS(bsk_attention_backward(ctx, NULL), BSK_ERR_NULL_POINTER);
    CHECK_STATUS(bsk_attention_backward(NULL, &P.p), BSK_ERR_NULL_POINTER);
    EXPECT(b.layout = NULL, BSK_ERR_NULL_POINTER);
    EXPECT(b.lse = NULL, BSK_ERR_NULL_POINTER);
    EXPECT(b.d_o.data = NULL, BSK_ERR_NULL_POINTER);
    EXPECT(b.dk.data = NULL, BSK_ERR_NULL_POINTER);
    EXPECT(b.dq.dtype = (bsk_dtype)9, BSK_ERR_INVALID_ARGUMENT);
    EXPECT(b.d_o.dtype = BSK_BF16, BSK_ERR_UNSUPPORTED);
    EXPECT(b.dv.dtype = BSK_F32, BSK_ERR_UNSUPPORTED);
    EXPECT(b.dq.seq = 39, BSK_ERR_SHAPE_MISMATCH);
    EXPECT(b.d_o.heads = 2, BSK_ERR_SHAPE_MISMATCH);
    EXPECT(b.dk.heads = 4, BSK_ERR_SHAPE_MISMATCH);
    EXPECT(b.dv.dim = 32, BSK_ERR_SHAPE_MISMATCH);
    EXPECT(b.k.heads = 3; b.v.heads = 3; b.dk.heads = 3; b.dv.heads = 3, BSK_ERR_SHAPE_MISMATCH); /* 4 % 3 */
    EXPECT(b.causal = 2, BSK_ERR_INVALID_ARGUMENT);
    EXPECT(b.scale = INFINITY, BSK_ERR_INVALID_ARGUMENT);
    EXPECT(b.dq.stride_seq = -1, BSK_ERR_INVALID_ARGUMENT);
    EXPECT(b.dv.stride_head = 0, BSK_ERR_INVALID_ARGUMENT);                 /* writes an element twice */
    EXPECT(b.dq.data = P.q.host, BSK_ERR_INVALID_ARGUMENT);                 /* output over an input */
    EXPECT(b.dk.data = P.g.host, BSK_ERR_INVALID_ARGUMENT);
    EXPECT(b.dv = b.dk, BSK_ERR_INVALID_ARGUMENT);                          /* two outputs in one place */
    EXPECT(b.dq.data = (void *)P.lse, BSK_ERR_INVALID_ARGUMENT);            /* over lse */
    EXPECT(b.dq.data = (char *)P.dq.host + 1, BSK_ERR_MISALIGNED);
    EXPECT(b.dk.mem = BSK_MEM_DEVICE, BSK_ERR_WRONG_LOCATION);
    EXPECT(b.d_lse = (const float *)((char *)P.lse + 2), BSK_ERR_MISALIGNED);
    EXPECT(b.d_lse = (const float *)P.dv.host, BSK_ERR_INVALID_ARGUMENT);   /* an output over d_lse */
    int32_t lens[2] = {10, 41};
    EXPECT(b.kv_lens = lens, BSK_ERR_INVALID_ARGUMENT);
    bsk_attn_layout bad = P.layout;
    bad.full_idx[1] = 99;
    EXPECT(b.layout = &bad, BSK_ERR_INVALID_BSR);
    bad.full_idx[1] = 1;
    bad.heads = 3;
    EXPECT(b.layout = &bad, BSK_ERR_SHAPE_MISMATCH);
    /* o and lse are inputs: an o that overlaps q is accepted (the forward would refuse it as an output) */
    b = P.p;
    b.o = b.q;
    CHECK_STATUS(bsk_attention_backward(ctx, &b), BSK_SUCCESS);
    bsk_context *cu;
    if (bsk_create(&cu, BSK_BACKEND_CUDA) == BSK_SUCCESS) {
        CHECK_STATUS(bsk_attention_backward(cu, &P.p), BSK_ERR_WRONG_LOCATION);
        bsk_destroy(cu);
    }
#undef EXPECT
#undef UNTOUCHED
    for (int i = 0; i < 3; i++) free(before[i]);
    prob_free(&P);
    bsk_destroy(ctx);
}

/* Degenerate sizes: no queries (dK = dV = 0 must still be written), no keys (dQ = 0). */
BSK_TEST(attn_bwd_empty_sides)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    for (int side = 0; side < 2; side++) {
        bspec sp = {.B = 1, .H = 2, .HK = 1, .SQ = side ? 20 : 0, .SK = side ? 0 : 20, .D = 8, .bq = 8, .bk = 8,
                    .dt = BSK_F16, .order = BSHD, .kind = 0, .empty_qb = -1};
        bprob P;
        REQUIRE_OK(prob_make(&P, &sp, bsk_test_rng()));
        CHECK_STATUS(bsk_attention_forward(ctx, &P.f), BSK_SUCCESS);
        CHECK_STATUS(bsk_attention_backward(ctx, &P.p), BSK_SUCCESS);
        check_all(t, &P, 0.0, side ? "no keys" : "no queries");
        prob_free(&P);
    }
    bsk_destroy(ctx);
}

/* ------------------------------------------------------------------ GPU */

/* Forward then backward on the device (everything uploaded; o, lse, dq, dk, dv start as NaN there), twice:
   the second run's bits must equal the first's. dq, dk, dv come back into P's host buffers. */
static bsk_status run_on_device(bsk_context *ctx, bprob *P, int *same_bits)
{
    size_t es = bsk_dtype_size(P->q.t.dtype);
    int64_t nl = P->q.t.batch * P->q.t.heads * P->q.t.seq;
    attn_tbuf *all[8] = {&P->q, &P->k, &P->v, &P->o, &P->g, &P->dq, &P->dk, &P->dv};
    void *dev[8];
    bsk_status s = BSK_SUCCESS;
    for (int i = 0; i < 8; i++) {
        dev[i] = attn_to_dev(all[i]->host, (size_t)all[i]->elems * es);
        if (!dev[i]) s = BSK_ERR_OUT_OF_MEMORY;
    }
    float *dl = (float *)attn_to_dev(P->lse, (size_t)(nl + 1) * 4);
    float *ddl = P->dlse ? (float *)attn_to_dev(P->dlse, (size_t)(nl + 1) * 4) : NULL;
    int32_t *dlen = P->kv_lens ? (int32_t *)attn_to_dev(P->kv_lens, (size_t)P->q.t.batch * 4) : NULL;
    bsk_attn_layout DL;
    memset(&DL, 0, sizeof DL);
    if (!s) s = bsk_attn_layout_clone(&P->layout, BSK_MEM_DEVICE, &DL);
    if (!s && (!dl || (P->kv_lens && !dlen) || (P->dlse && !ddl))) s = BSK_ERR_OUT_OF_MEMORY;
    void *first[3] = {NULL, NULL, NULL};
    *same_bits = 1;
    if (!s) {
        bsk_attention_params f = P->f;
        f.q.data = dev[0]; f.k.data = dev[1]; f.v.data = dev[2]; f.o.data = dev[3];
        f.q.mem = f.k.mem = f.v.mem = f.o.mem = BSK_MEM_DEVICE;
        f.lse = dl; f.kv_lens = dlen; f.layout = &DL;
        bsk_attention_bwd_params b = P->p;
        b.q = f.q; b.k = f.k; b.v = f.v; b.o = f.o;
        b.d_o.data = dev[4]; b.dq.data = dev[5]; b.dk.data = dev[6]; b.dv.data = dev[7];
        b.d_o.mem = b.dq.mem = b.dk.mem = b.dv.mem = BSK_MEM_DEVICE;
        b.lse = dl; b.d_lse = ddl; b.kv_lens = dlen; b.layout = &DL;
        s = bsk_attention_forward(ctx, &f);
        for (int run = 0; run < 2 && !s; run++) {
            s = bsk_attention_backward(ctx, &b);
            if (!s) s = bsk_synchronize(ctx);
            for (int i = 0; i < 3 && !s; i++) {
                size_t nbytes = (size_t)all[5 + i]->elems * es;
                s = bsk_cuda_memcpy(all[5 + i]->host, dev[5 + i], nbytes, 0, 1);
                if (s) break;
                if (run == 0) {
                    /* keep the bits, then poison the device copy again before the second run */
                    first[i] = malloc(nbytes);
                    memcpy(first[i], all[5 + i]->host, nbytes);
                    attn_tensor_poison(all[5 + i]);
                    s = bsk_cuda_memcpy(dev[5 + i], all[5 + i]->host, nbytes, 1, 0);
                } else if (memcmp(first[i], all[5 + i]->host, nbytes) != 0) {
                    *same_bits = 0;
                }
            }
        }
    }
    for (int i = 0; i < 3; i++) free(first[i]);
    for (int i = 0; i < 8; i++) bsk_cuda_free(dev[i]);
    bsk_cuda_free(dl); bsk_cuda_free(ddl); bsk_cuda_free(dlen);
    bsk_attn_layout_free(&DL);
    return s;
}

static void gpu_spec(bsk_test_ctx *t, bsk_context *ctx, const bspec *sp, int simt, const char *want_kernel, const char *what)
{
    bprob P;
    bsk_status s = prob_make(&P, sp, bsk_test_rng());
    CHECK_STATUS(s, BSK_SUCCESS);
    if (!s) {
        int same = 0;
        bsk__attention_force_simt(simt);
        bsk_status rs = run_on_device(ctx, &P, &same);
        bsk__attention_force_simt(0);
        CHECK_STATUS(rs, BSK_SUCCESS);
        if (!rs) {
            char label[200];
            snprintf(label, sizeof label, "%s [%s]", what, bsk_last_kernel(ctx));
            check_all(t, &P, tol_for(sp->dt), label);
            if (!same) fprintf(stderr, "  [%s] two runs gave different bits\n", label);
            CHECK(same);
            if (want_kernel && strcmp(bsk_last_kernel(ctx), want_kernel) != 0) {
                fprintf(stderr, "  [%s] ran %s, expected %s\n", what, bsk_last_kernel(ctx), want_kernel);
                CHECK(0);
            }
        }
    }
    prob_free(&P);
}

BSK_TEST(gpu_attn_bwd_mma_grid)
{
    bsk_context *ctx;
    if (!attn_gpu_ctx(&ctx)) SKIP("no CUDA device");
    /* every dtype x head dim x query block x causal; key block, orders, layout kind, GQA, kv_lens, odd lengths
       and row padding varied across the grid */
    int n = 0;
    for (int dt = 0; dt < 2; dt++)
        for (int D = 64; D <= 128; D += 64)
            for (int bq = 64; bq <= 128; bq += 64)
                for (int causal = 0; causal < 2; causal++, n++) {
                    bspec sp;
                    char what[128];
                    attn_grid_spec(n, dt, D, bq, causal, &sp, what, sizeof what);
                    sp.dlse = n % 4 == 2;
                    gpu_spec(t, ctx, &sp, 0, "cuda-attention-bwd-mma", what);
                }
    bsk_destroy(ctx);
}

BSK_TEST(gpu_attn_bwd_simt_and_fallbacks)
{
    bsk_context *ctx;
    if (!attn_gpu_ctx(&ctx)) SKIP("no CUDA device");
    bspec a = {.B = 2, .H = 4, .HK = 2, .SQ = 150, .SK = 190, .D = 128, .bq = 64, .bk = 64, .dt = BSK_BF16, .order = BSHD,
               .causal = 1, .off = 40, .kind = 3, .kv_lens = 1, .empty_qb = 1, .dlse = 1};
    gpu_spec(t, ctx, &a, 1, "cuda-attention-bwd-simt", "simt forced");
    bspec b = {.B = 1, .H = 2, .HK = 1, .SQ = 77, .SK = 77, .D = 40, .bq = 16, .bk = 32, .dt = BSK_F16, .order = BHSD,
               .causal = 1, .kind = 1, .empty_qb = -1};
    gpu_spec(t, ctx, &b, 0, "cuda-attention-bwd-simt", "dim 40 blocks 16x32");
    bspec c = {.B = 2, .H = 2, .HK = 2, .SQ = 60, .SK = 90, .D = 64, .bq = 32, .bk = 32, .dt = BSK_F32, .order = BSHD,
               .kind = 3, .kv_lens = 1, .empty_qb = 0, .scale = 0.3f};
    gpu_spec(t, ctx, &c, 0, "cuda-attention-bwd-simt", "f32");
    bspec d = {.B = 1, .H = 2, .HK = 2, .SQ = 100, .SK = 100, .D = 64, .bq = 64, .bk = 64, .dt = BSK_F16, .order = BSHD,
               .kind = 0, .pad = 3, .empty_qb = -1};
    gpu_spec(t, ctx, &d, 0, "cuda-attention-bwd-simt", "stride not a multiple of 8");
    bsk_destroy(ctx);
}

BSK_TEST(gpu_attn_bwd_empty_and_extremes)
{
    bsk_context *ctx;
    if (!attn_gpu_ctx(&ctx)) SKIP("no CUDA device");
    /* a layout with no tiles: every gradient 0 */
    bspec e = {.B = 1, .H = 2, .HK = 2, .SQ = 130, .SK = 130, .D = 64, .bq = 64, .bk = 64, .dt = BSK_F16, .order = BSHD,
               .kind = 4, .empty_qb = 0};
    bprob P;
    REQUIRE_OK(prob_make(&P, &e, bsk_test_rng()));
    for (int64_t x = 0; x < bsk__attn_layout_rows(&P.layout); x++) P.layout.full_count[x] = P.layout.part_count[x] = 0;
    ref_backward(&P);
    int same = 0;
    CHECK_STATUS(run_on_device(ctx, &P, &same), BSK_SUCCESS);
    check_all(t, &P, 0.0, "no tiles");
    prob_free(&P);
    /* kv_lens including 0 with a causal bottom-right layout, 128-key blocks, MQA */
    bspec k = {.B = 3, .H = 2, .HK = 1, .SQ = 64, .SK = 300, .D = 128, .bq = 64, .bk = 128, .dt = BSK_BF16, .order = BHSD,
               .causal = 1, .off = 236, .kind = 1, .kv_lens = 2, .empty_qb = -1};
    gpu_spec(t, ctx, &k, 0, "cuda-attention-bwd-mma", "kv_lens with zero");
    /* a 256-row query block (several 64-row pieces per block) */
    bspec w = {.B = 1, .H = 2, .HK = 1, .SQ = 300, .SK = 300, .D = 64, .bq = 256, .bk = 64, .dt = BSK_F16, .order = BSHD,
               .causal = 1, .kind = 2, .empty_qb = -1};
    gpu_spec(t, ctx, &w, 0, "cuda-attention-bwd-mma", "block_q 256");
    bsk_destroy(ctx);
}

/* broadcast views with ~2^62 rows: the lse byte count saturates instead of overflowing (UBSan) */
BSK_TEST(attn_bwd_lse_bytes_overflow)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    static float buf[16], lse[16], dq[16];
    const int64_t S = INT32_MAX;
    bsk_attn_tensor Q = {S, S, 1, 1, 0, 0, 0, BSK_F32, BSK_MEM_HOST, buf};
    bsk_attn_tensor K = {S, 1, 1, 1, 0, 0, 0, BSK_F32, BSK_MEM_HOST, buf};
    bsk_attn_tensor DQ = {S, S, 1, 1, 0, 0, 0, BSK_F32, BSK_MEM_HOST, dq};
    bsk_attn_layout L;
    REQUIRE_OK(bsk_attn_layout_alloc(S, 1, 1024, 1, 1, 1, 1, BSK_MEM_HOST, &L));
    bsk_attention_bwd_params p = {Q, K, K, Q, Q, lse, NULL, DQ, K, K, &L, NULL, 0.0f, 0, 0};
    CHECK_STATUS(bsk_attention_backward(ctx, &p), BSK_ERR_INVALID_ARGUMENT);
    bsk_attn_layout_free(&L);
    bsk_destroy(ctx);
}

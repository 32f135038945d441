/* topk_cpu.c — the CPU backend of the top-k block gate. Every sum runs in the same fixed order as in the
   CUDA gate (src/cuda/attention/topk.cu): pooled means in fp32 (8 interleaved partial sums, fixed tree),
   projections and scores in fp64 with explicit fma, so both select the same tiles bit for bit. Pre-pooled input
   (p->pooled) skips the pooling: each row is read as the block's fp32 mean. */
#include <math.h>
#include <stdlib.h>
#include "attention_internal.h"

/* Mean of rows [r0, r1) of head h of batch b, dimension by dimension (0 for an empty range): 8 partial
   sums p[g] over rows r0+g, r0+g+8, ... in ascending order, combined as ((p0+p1)+(p2+p3))+((p4+p5)+(p6+p7))
   — exactly the order of the CUDA pool kernel. */
static void pool(const bsk_attn_tensor *t, int64_t b, int64_t h, int64_t r0, int64_t r1, float *out)
{
    for (int64_t c = 0; c < t->dim; c++) {
        float p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t r = r0; r < r1; r++)
            p[(r - r0) & 7] += bsk__load(t->data, t->dtype, b * t->stride_batch + r * t->stride_seq + h * t->stride_head + c);
        float sum = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
        out[c] = r1 > r0 ? sum / (float)(r1 - r0) : 0.0f;
    }
}

/* Pre-pooled input (p->pooled): row `row` of head h of batch b as it is, converted to fp32 (the type the
   pooled means of pool() have, so the same means score the same on both input forms). */
static void pooled_row(const bsk_attn_tensor *t, int64_t b, int64_t h, int64_t row, float *out)
{
    for (int64_t c = 0; c < t->dim; c++)
        out[c] = bsk__load(t->data, t->dtype, b * t->stride_batch + row * t->stride_seq + h * t->stride_head + c);
}

/* out[e] = sum_d x[d] * W[d][e] in fp64, d in order. */
static void project(const float *x, const bsk_dense *W, double *out)
{
    for (int64_t e = 0; e < W->cols; e++) {
        double acc = 0.0;
        for (int64_t d = 0; d < W->rows; d++)
            acc = fma((double)x[d], (double)bsk__load(W->data, W->dtype, d * W->ld + e), acc);
        out[e] = acc;
    }
}

bsk_status bsk_cpu_topk_block_layout(const bsk_topk_params *p, const bsk__attn_dims *d, bsk_attn_layout *out)
{
    int64_t B = d->batch, H = d->heads, HK = d->kv_heads, D = d->dim, mq = d->mq, nb = d->nb;
    int64_t bq = out->block_q, bk = out->block_k, cap = out->capacity, off = p->causal_offset;
    int64_t P = p->w_q ? p->w_q->cols : D;
    /* Pooled (and projected) vectors, all as fp64 for the score: qv[(b*H + h)*mq + i][P], kv likewise. */
    double *qv = (double *)malloc((size_t)(B * H * mq * P + 1) * sizeof(double));
    double *kv = (double *)malloc((size_t)(B * HK * nb * P + 1) * sizeof(double));
    float *tmp = (float *)malloc((size_t)D * sizeof(float));
    double *score = (double *)malloc((size_t)(nb + 1) * sizeof(double));
    uint8_t *state = (uint8_t *)malloc((size_t)(nb + 1));
    if (!qv || !kv || !tmp || !score || !state) {
        free(qv); free(kv); free(tmp); free(score); free(state);
        return BSK_ERR_OUT_OF_MEMORY;
    }
    for (int64_t b = 0; b < B; b++) {
        int64_t kv_len = p->kv_lens ? p->kv_lens[b] : d->seq_k;
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < mq; i++) {
                int64_t q1 = (i + 1) * bq < d->seq_q ? (i + 1) * bq : d->seq_q;
                double *dst = qv + ((b * H + h) * mq + i) * P;
                if (p->pooled) pooled_row(&p->q, b, h, i, tmp);
                else pool(&p->q, b, h, i * bq, q1, tmp);
                if (p->w_q) project(tmp, p->w_q, dst);
                else for (int64_t c = 0; c < D; c++) dst[c] = tmp[c];
            }
        for (int64_t h = 0; h < HK; h++)
            for (int64_t j = 0; j < nb; j++) {
                int64_t k0 = j * bk, k1 = k0 + bk < kv_len ? k0 + bk : kv_len;
                double *dst = kv + ((b * HK + h) * nb + j) * P;
                if (p->pooled) pooled_row(&p->k, b, h, j, tmp);
                else pool(&p->k, b, h, k0, k1 > k0 ? k1 : k0, tmp);
                if (p->w_k) project(tmp, p->w_k, dst);
                else for (int64_t c = 0; c < D; c++) dst[c] = tmp[c];
            }
    }

    /* state: 0 not a candidate, 1 candidate, 2 forced, 3 selected */
    for (int64_t b = 0; b < B; b++) {
        int64_t kv_len = p->kv_lens ? p->kv_lens[b] : d->seq_k;
        for (int64_t h = 0; h < H; h++) {
            int64_t hk = h / (H / HK);
            for (int64_t i = 0; i < mq; i++) {
                int64_t q0 = i * bq, q1 = q0 + bq < d->seq_q ? q0 + bq : d->seq_q, row = (b * H + h) * mq + i;
                const double *a = qv + row * P;
                int64_t forced = 0;
                for (int64_t j = 0; j < nb; j++) {
                    state[j] = (uint8_t)bsk__topk_candidate(j, bk, q1, kv_len, p->causal, off);
                    if (!state[j]) continue;
                    const double *c = kv + ((b * HK + hk) * nb + j) * P;
                    double acc = 0.0;
                    for (int64_t e = 0; e < P; e++) acc = fma(a[e], c[e], acc);
                    score[j] = isnan(acc) ? -INFINITY : acc; /* NaN would break the strict order */
                }
                if (p->keep_first && nb > 0 && state[0]) { state[0] = 2; forced++; }
                int64_t jd = p->keep_diagonal ? bsk__topk_diagonal(bk, q1, kv_len, p->causal, off) : -1;
                if (jd >= 0 && state[jd] == 1) { state[jd] = 2; forced++; }
                int64_t room = p->top_k - forced;
                /* rank among the unforced candidates: higher score first, ties to the lower block */
                for (int64_t j = 0; j < nb; j++) {
                    if (state[j] != 1) continue;
                    int64_t rank = 0;
                    for (int64_t j2 = 0; j2 < nb && rank < room; j2++)
                        if ((state[j2] == 1 || state[j2] == 3) && j2 != j &&
                            (score[j2] > score[j] || (score[j2] == score[j] && j2 < j)))
                            rank++;
                    if (rank < room) state[j] = 3;
                }
                int32_t nf = 0, np = 0;
                for (int64_t j = 0; j < nb; j++) {
                    if (state[j] < 2) continue;
                    int cls = bsk__attn_tile_class(q0, q1, j * bk, (j + 1) * bk, kv_len, p->causal, off);
                    if (cls == 0) out->full_idx[row * cap + nf++] = (int32_t)j;
                    else out->part_idx[row * cap + np++] = (int32_t)j;
                }
                out->full_count[row] = nf;
                out->part_count[row] = np;
            }
        }
    }
    free(qv); free(kv); free(tmp); free(score); free(state);
    return BSK_SUCCESS;
}

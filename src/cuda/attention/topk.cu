/* topk.cu — the top-k block gate on the GPU, stream-ordered with no host synchronisation:
     1. pool: mean of each query block / key block per head (fp32, 8 interleaved partial sums combined
        in a fixed tree, as the CPU gate);
     2. project (optional): pooled · W in fp64 with fma, d in order;
     3. select: one CTA per (batch, head, query block) scores every candidate key block (fp64 fma in
        order), ranks them (higher first, ties to the lower block), and a warp compacts the kept blocks in
        ascending order into the full / partial lists of the layout.
   The fixed summation orders make the result identical to the CPU gate (src/attention/topk_cpu.c). */
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include "../cuda_internal.h"
#include "../../attention/attention_internal.h"

namespace {

__device__ __forceinline__ float ldf(const void *p, int dtype, int64_t i)
{
    if (dtype == BSK_F32) return reinterpret_cast<const float *>(p)[i];
    if (dtype == BSK_F16) return __half2float(reinterpret_cast<const __half *>(p)[i]);
    return __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(p)[i]);
}

struct PoolArgs {
    const void *x;
    int dtype;
    int64_t sb, ss, sh, seq;
    const int32_t *lens; /* per-batch valid rows (clamped to seq), or NULL: seq */
    int heads, nblk, bs, dim;
    int64_t n; /* vectors: batch * heads * nblk */
    double *out;
};

/* One CTA per pooled vector: 8 row groups x ceil(dim/8) dim groups. Row group g sums rows r0+g, r0+g+8, ...
   in ascending order (16-byte loads where aligned); the 8 partial sums are combined in the fixed tree
   ((p0+p1)+(p2+p3))+((p4+p5)+(p6+p7)) — the order topk_cpu.c follows, so both agree bit for bit. */
__global__ void __launch_bounds__(512) pool_kernel(const PoolArgs a, int vec16)
{
    __shared__ float part[8][512];
    const int ng = (a.dim + 7) / 8, dg = threadIdx.x % ng, rg = threadIdx.x / ng;
    for (int64_t v = blockIdx.x; v < a.n; v += gridDim.x) {
        int64_t blk = v % a.nblk, bh = v / a.nblk, h = bh % a.heads, b = bh / a.heads;
        int64_t len = a.seq;
        if (a.lens) { int64_t t = a.lens[b]; len = t < 0 ? 0 : (t > a.seq ? a.seq : t); }
        int64_t r0 = blk * a.bs, r1 = min(r0 + a.bs, len);
        const int64_t base = b * a.sb + h * a.sh;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t r = r0 + rg; r < r1; r += 8) {
            const int64_t at = base + r * a.ss + dg * 8;
            if (vec16) {
                uint4 raw = *reinterpret_cast<const uint4 *>(reinterpret_cast<const uint16_t *>(a.x) + at);
                const uint16_t *e = reinterpret_cast<const uint16_t *>(&raw);
#pragma unroll
                for (int u = 0; u < 8; u++) {
                    __half_raw hr;
                    hr.x = e[u];
                    float f;
                    if (a.dtype == BSK_F16) f = __half2float(__half(hr));
                    else f = __uint_as_float((uint32_t)e[u] << 16);
                    acc[u] += f;
                }
            } else {
#pragma unroll
                for (int u = 0; u < 8; u++)
                    if (dg * 8 + u < a.dim) acc[u] += ldf(a.x, a.dtype, at + u);
            }
        }
        __syncthreads(); /* the previous vector's combine is done with `part` */
#pragma unroll
        for (int u = 0; u < 8; u++)
            if (dg * 8 + u < a.dim) part[rg][dg * 8 + u] = acc[u];
        __syncthreads();
        const int c = threadIdx.x;
        if (c < a.dim) {
            float sum = ((part[0][c] + part[1][c]) + (part[2][c] + part[3][c])) +
                        ((part[4][c] + part[5][c]) + (part[6][c] + part[7][c]));
            a.out[v * a.dim + c] = r1 > r0 ? (double)(sum / (float)(r1 - r0)) : 0.0;
        }
    }
}

__global__ void project_kernel(const double *in, int64_t n, int dim, const void *w, int wdtype, int64_t ld, int P,
                               double *out)
{
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n * P) return;
    int64_t v = t / P;
    int e = (int)(t % P);
    double acc = 0.0;
    for (int d = 0; d < dim; d++) acc = fma(in[v * dim + d], (double)ldf(w, wdtype, (int64_t)d * ld + e), acc);
    out[t] = acc;
}

struct SelArgs {
    const double *qv, *kv;
    int P, heads, kv_heads, group, mq, nb, bq, bk, causal, top_k, keep_first, keep_diag, cap;
    int64_t seq_q, seq_k, off;
    const int32_t *kv_lens;
    int32_t *fc, *fi, *pc, *pi;
};

__global__ void __launch_bounds__(128) select_kernel(const SelArgs a)
{
    extern __shared__ double sc[];                         /* nb scores */
    unsigned char *st = reinterpret_cast<unsigned char *>(sc + a.nb); /* 0 no, 1 candidate, 2 forced */
    unsigned char *sel = st + a.nb;                        /* kept */
    __shared__ int forced_s;
    const int64_t row = blockIdx.x;
    const int64_t i = row % a.mq, bh = row / a.mq, h = bh % a.heads, b = bh / a.heads, hk = h / a.group;
    int64_t kv_len = a.seq_k;
    if (a.kv_lens) { int64_t t = a.kv_lens[b]; kv_len = t < 0 ? 0 : (t > a.seq_k ? a.seq_k : t); }
    const int64_t q0 = i * a.bq, q1 = min(q0 + a.bq, a.seq_q);
    const double *qa = a.qv + row * a.P;
    for (int j = threadIdx.x; j < a.nb; j += blockDim.x) {
        int cand = bsk__topk_candidate(j, a.bk, q1, kv_len, a.causal, a.off);
        st[j] = (unsigned char)cand;
        sc[j] = -INFINITY;
        if (cand) {
            const double *kb = a.kv + ((b * a.kv_heads + hk) * a.nb + j) * a.P;
            double acc = 0.0;
            for (int e = 0; e < a.P; e++) acc = fma(qa[e], kb[e], acc);
            sc[j] = isnan(acc) ? -INFINITY : acc;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int forced = 0;
        if (a.keep_first && a.nb > 0 && st[0] == 1) { st[0] = 2; forced++; }
        int64_t jd = a.keep_diag ? bsk__topk_diagonal(a.bk, q1, kv_len, a.causal, a.off) : -1;
        if (jd >= 0 && jd < a.nb && st[jd] == 1) { st[jd] = 2; forced++; }
        forced_s = forced;
    }
    __syncthreads();
    const int room = a.top_k - forced_s;
    for (int j = threadIdx.x; j < a.nb; j += blockDim.x) {
        unsigned char keep = st[j] == 2;
        if (st[j] == 1) {
            int rank = 0;
            const double sj = sc[j];
            for (int j2 = 0; j2 < a.nb && rank < room; j2++)
                if (st[j2] == 1 && j2 != j && (sc[j2] > sj || (sc[j2] == sj && j2 < j))) rank++;
            keep = rank < room;
        }
        sel[j] = keep;
    }
    __syncthreads();
    if (threadIdx.x >= 32) return;
    const int lane = threadIdx.x;
    int nf = 0, np = 0;
    for (int base = 0; base < a.nb; base += 32) {
        int j = base + lane;
        int keep = j < a.nb && sel[j];
        int cls = keep ? bsk__attn_tile_class(q0, q1, (int64_t)j * a.bk, (int64_t)(j + 1) * a.bk, kv_len, a.causal, a.off) : -1;
        unsigned bf = __ballot_sync(0xffffffffu, cls == 0), bp = __ballot_sync(0xffffffffu, cls == 1 || cls == 2);
        unsigned lower = (1u << lane) - 1u;
        if (cls == 0) { int at = nf + __popc(bf & lower); if (at < a.cap) a.fi[row * a.cap + at] = j; }
        if (cls == 1 || cls == 2) { int at = np + __popc(bp & lower); if (at < a.cap) a.pi[row * a.cap + at] = j; }
        nf += __popc(bf);
        np += __popc(bp);
    }
    if (lane == 0) {
        a.fc[row] = min(nf, a.cap);
        a.pc[row] = min(np, a.cap);
    }
}

/* 16-byte loads of 8 elements: a 16-bit dtype, dim a multiple of 8, rows 16-byte aligned. */
int vec16_ok(const bsk_attn_tensor *t)
{
    return t->dtype != BSK_F32 && t->dim % 8 == 0 && ((uintptr_t)t->data & 15u) == 0 && t->stride_batch % 8 == 0 &&
           t->stride_seq % 8 == 0 && t->stride_head % 8 == 0;
}

unsigned grid_for(int64_t n, int64_t per)
{
    int64_t g = (n + per - 1) / per;
    return (unsigned)(g < 1 ? 1 : (g > (1 << 30) ? (1 << 30) : g));
}

} // namespace

extern "C" bsk_status bsk_cuda_topk_block_layout(bsk_context *ctx, const bsk_topk_params *p, const bsk__attn_dims *d,
                                                 bsk_attn_layout *out)
{
    if (!bsk_cuda_state_get(ctx)) return BSK_ERR_OUT_OF_MEMORY;
    if (d->nb > 8192 || d->batch * d->heads * d->mq > INT32_MAX) return BSK_ERR_UNSUPPORTED;
    cudaStream_t stream = (cudaStream_t)ctx->stream;
    const int64_t D = d->dim, P = p->w_q ? p->w_q->cols : D;
    const int64_t nq = d->batch * d->heads * d->mq, nk = d->batch * d->kv_heads * d->nb;
    size_t bytes = (size_t)(nq + nk) * (size_t)D * 8;
    if (p->w_q) bytes += (size_t)(nq + nk) * (size_t)P * 8;
    void *ws = NULL;
    bsk_status s = bsk_cuda_workspace(ctx, bytes, &ws);
    if (s) return s;
    double *qv = (double *)ws, *kv = qv + nq * D, *qp = kv + nk * D, *kp = qp + nq * P;

    PoolArgs pa;
    pa.x = p->q.data; pa.dtype = p->q.dtype; pa.sb = p->q.stride_batch; pa.ss = p->q.stride_seq; pa.sh = p->q.stride_head;
    pa.seq = d->seq_q; pa.lens = NULL; pa.heads = (int)d->heads; pa.nblk = (int)d->mq; pa.bs = out->block_q;
    pa.dim = (int)D; pa.n = nq; pa.out = qv;
    const int pool_threads = 8 * (int)((D + 7) / 8);
    pool_kernel<<<grid_for(nq, 1), pool_threads, 0, stream>>>(pa, vec16_ok(&p->q));
    if ((s = BSK_CUDA_LAUNCH_CHECK())) return s;
    pa.x = p->k.data; pa.sb = p->k.stride_batch; pa.ss = p->k.stride_seq; pa.sh = p->k.stride_head;
    pa.seq = d->seq_k; pa.lens = p->kv_lens; pa.heads = (int)d->kv_heads; pa.nblk = (int)d->nb; pa.bs = out->block_k;
    pa.n = nk; pa.out = kv;
    if (nk > 0) {
        pool_kernel<<<grid_for(nk, 1), pool_threads, 0, stream>>>(pa, vec16_ok(&p->k));
        if ((s = BSK_CUDA_LAUNCH_CHECK())) return s;
    }
    if (p->w_q) {
        project_kernel<<<grid_for(nq * P, 256), 256, 0, stream>>>(qv, nq, (int)D, p->w_q->data, p->w_q->dtype,
                                                                p->w_q->ld, (int)P, qp);
        if ((s = BSK_CUDA_LAUNCH_CHECK())) return s;
        if (nk > 0) {
            project_kernel<<<grid_for(nk * P, 256), 256, 0, stream>>>(kv, nk, (int)D, p->w_k->data, p->w_k->dtype,
                                                                    p->w_k->ld, (int)P, kp);
            if ((s = BSK_CUDA_LAUNCH_CHECK())) return s;
        }
        qv = qp;
        kv = kp;
    }
    SelArgs sa;
    sa.qv = qv; sa.kv = kv; sa.P = (int)P; sa.heads = (int)d->heads; sa.kv_heads = (int)d->kv_heads;
    sa.group = (int)(d->heads / d->kv_heads); sa.mq = (int)d->mq; sa.nb = (int)d->nb; sa.bq = out->block_q;
    sa.bk = out->block_k; sa.causal = p->causal; sa.top_k = p->top_k; sa.keep_first = p->keep_first;
    sa.keep_diag = p->keep_diagonal; sa.cap = out->capacity; sa.seq_q = d->seq_q; sa.seq_k = d->seq_k;
    sa.off = p->causal_offset; sa.kv_lens = p->kv_lens;
    sa.fc = out->full_count; sa.fi = out->full_idx; sa.pc = out->part_count; sa.pi = out->part_idx;
    int smem = (int)(d->nb * 10);
    if (smem > 48 * 1024) {
        cudaError_t e = cudaFuncSetAttribute(select_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess) return bsk_cuda_status(e);
    }
    select_kernel<<<(unsigned)nq, 128, smem, stream>>>(sa);
    ctx->last_kernel = "cuda-topk";
    return BSK_CUDA_LAUNCH_CHECK();
}

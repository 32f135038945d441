/* attention_fwd.cu — block-sparse attention forward on the GPU.
   - attn_mma: FlashAttention-2 structure on mma.sync m16n8k16 (sm_80+). One CTA per (batch, head, query
     block) of 64 or 128 rows, each warp owning 16 or 32 query rows. The CTA walks its query block's full list then
     its partial list; each key tile is cut into 64-key chunks that stream through a two-stage cp.async
     ring (K and V of chunk n+1 load while chunk n computes). S = Q·Kᵀ and O += P·V use ldmatrix from
     XOR-swizzled shared memory; P stays in registers as the A operand; online softmax in base 2.
   - attn_simt: one warp per query row on CUDA cores: any dtype, dim, block size and stride. The fallback
     for what the tensor-core kernel does not take, and a second opinion for tests.
   Malformed device layouts never cause out-of-bounds access: counts are clamped to the capacity and
   out-of-range key blocks skipped. */
#include "attention_common.cuh"

namespace {

struct AttnArgs {
    const void *q, *k, *v;
    void *o;
    float *lse;
    int64_t q_sb, q_ss, q_sh, k_sb, k_ss, k_sh, v_sb, v_ss, v_sh, o_sb, o_ss, o_sh;
    int64_t seq_q, seq_k, off;
    int batch, heads, group; /* group = heads / kv_heads */
    int dim, mq, nb, block_q, block_k, cap, lay_b, lay_h, causal;
    const int32_t *full_count, *full_idx, *part_count, *part_idx, *kv_lens;
    float scale_log2; /* scale · log2(e): softmax in base 2 */
};

/* The work item of CTA/warp `idx`: causal runs the longest query blocks first (they sit at the end). */
__device__ __forceinline__ void decode_item(const AttnArgs &a, int64_t idx, int &b, int &h, int &i)
{
    int64_t bh_count = (int64_t)a.batch * a.heads;
    int64_t bh;
    if (a.causal) {
        i = a.mq - 1 - (int)(idx / bh_count);
        bh = idx % bh_count;
    } else {
        i = (int)(idx % a.mq);
        bh = idx / a.mq;
    }
    h = (int)(bh % a.heads);
    b = (int)(bh / a.heads);
}

/* WARPS warps, each owning MT m16 tiles (16·MT consecutive query rows): BQ = 16·MT·WARPS. MT = 2 lets a
   warp reuse every K and V fragment it reads from shared memory for two row tiles, halving the shared
   memory traffic per flop (the FA2 arrangement), at the price of twice the accumulator registers. */
template <typename T, int D, int WARPS, int MT, int MINB>
__global__ void __launch_bounds__(WARPS * 32, MINB) attn_mma(const AttnArgs a)
{
    constexpr int BQ = 16 * MT * WARPS, KC = 64, NT = WARPS * 32, CH = D / 8;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    T *sQ = reinterpret_cast<T *>(smem_raw);
    const uint32_t sQa = bsk_smem_u32(sQ);
    const uint32_t sKa = sQa + BQ * D * 2, sVa = sKa + 2 * KC * D * 2; /* two stages each */
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;

    int b, h, i;
    decode_item(a, blockIdx.x, b, h, i);
    const int hk = h / a.group;
    const int64_t q0 = (int64_t)i * BQ, q_last = min(q0 + BQ, a.seq_q) - 1, kv_len = kv_len_of(a, b);
    const Lists L = lists_row(a, layout_of(a, b, h) * a.mq + i);
    const int cpt = a.block_k / KC, nchunks = (L.nf + L.np) * cpt;

    const T *qg = reinterpret_cast<const T *>(a.q) + b * a.q_sb + h * a.q_sh;
    const T *kg = reinterpret_cast<const T *>(a.k) + b * a.k_sb + hk * a.k_sh;
    const T *vg = reinterpret_cast<const T *>(a.v) + b * a.v_sb + hk * a.v_sh;

    /* Q tile; rows past seq_q are zeros (their results are never stored) */
    for (int x = tid; x < BQ * CH; x += NT) {
        int r = x / CH, c = x % CH;
        bool ok = q0 + r <= q_last;
        bsk_cp_async16(sQa + swz<D>(r, c) * 2, ok ? (const void *)(qg + (q0 + r) * a.q_ss + c * 8) : a.q, ok ? 16 : 0);
    }
    /* K and V chunk at key k0 into `stage`; keys at or past kv_len are zeros, never read */
    auto load_kv = [&](int stage, int64_t k0) {
        for (int x = tid; x < KC * CH; x += NT) {
            int r = x / CH, c = x % CH;
            bool ok = k0 + r < kv_len;
            uint32_t so = (stage * KC * D + swz<D>(r, c)) * 2;
            bsk_cp_async16(sKa + so, ok ? (const void *)(kg + (k0 + r) * a.k_ss + c * 8) : a.k, ok ? 16 : 0);
            bsk_cp_async16(sVa + so, ok ? (const void *)(vg + (k0 + r) * a.v_ss + c * 8) : a.v, ok ? 16 : 0);
        }
    };

    float o[MT][D / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int d = 0; d < D / 8; d++) o[mt][d][0] = o[mt][d][1] = o[mt][d][2] = o[mt][d][3] = 0.0f;
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;

    int64_t k0 = 0;
    int c = next_chunk(a, L, -1, nchunks, cpt, q_last, kv_len, k0);
    if (c < nchunks) load_kv(0, k0);
    bsk_cp_async_commit();
    int stage = 0;
    const int wrow = warp * 16 * MT;

    while (c < nchunks) {
        int64_t k0n = 0;
        int cn = next_chunk(a, L, c, nchunks, cpt, q_last, kv_len, k0n);
        if (cn < nchunks) load_kv(stage ^ 1, k0n);
        bsk_cp_async_commit();
        bsk_cp_async_wait<1>(); /* everything but the chunk just issued has landed */
        __syncthreads();

        const uint32_t sK = sKa + stage * KC * D * 2, sV = sVa + stage * KC * D * 2;
        float s[MT][8][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int n = 0; n < 8; n++) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            uint32_t qa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
                bsk_ldsm_x4(qa[mt], sQa + swz<D>(wrow + mt * 16 + (lane & 15), kk * 2 + (lane >> 4)) * 2);
#pragma unroll
            for (int np = 0; np < 4; np++) {
                uint32_t kb[4];
                bsk_ldsm_x4(kb, sK + swz<D>(np * 16 + ((lane >> 4) << 3) + (lane & 7), kk * 2 + ((lane >> 3) & 1)) * 2);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    mma<T>(s[mt][2 * np], qa[mt], kb[0], kb[1]);
                    mma<T>(s[mt][2 * np + 1], qa[mt], kb[2], kb[3]);
                }
            }
        }

        /* scale into base 2; mask only chunks that cross kv_len or the causal diagonal */
        const bool need_mask = k0 + KC > kv_len || (a.causal && k0 + KC - 1 > q0 + a.off);
        const int kv_lim = (int)min((int64_t)KC, kv_len - k0); /* keys [0, kv_lim) of the chunk exist */
        /* causal: key k0+x visible to row q0+y iff x <= y + diag (clamped: only the sign range matters) */
        const int diag = (int)max(min(q0 + a.off - k0, (int64_t)1024), (int64_t)-1024);
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int n = 0; n < 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float val = s[mt][n][e] * a.scale_log2;
                    if (need_mask) {
                        int x = n * 8 + tq * 2 + (e & 1), y = wrow + mt * 16 + g + (e >> 1) * 8;
                        if (x >= kv_lim || (a.causal && x > y + diag)) val = -INFINITY;
                    }
                    s[mt][n][e] = val;
                }

        /* online softmax for the thread's rows (g and g+8 of each m tile); a quad shares a row */
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int rr = 0; rr < 2; rr++) {
                float mx = -INFINITY;
#pragma unroll
                for (int n = 0; n < 8; n++) mx = fmaxf(mx, fmaxf(s[mt][n][2 * rr], s[mt][n][2 * rr + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                float mnew = fmaxf(m[mt][rr], mx);
                float muse = mnew == -INFINITY ? 0.0f : mnew; /* a row with nothing visible yet stays at 0 */
                float alpha = fast_exp2(m[mt][rr] - muse);
                m[mt][rr] = mnew;
                float rs = 0.0f;
#pragma unroll
                for (int n = 0; n < 8; n++) {
                    float p0 = fast_exp2(s[mt][n][2 * rr] - muse), p1 = fast_exp2(s[mt][n][2 * rr + 1] - muse);
                    s[mt][n][2 * rr] = p0;
                    s[mt][n][2 * rr + 1] = p1;
                    rs += p0 + p1;
                }
                l[mt][rr] = l[mt][rr] * alpha + rs; /* the thread's partial row sum; the quad adds up at the end */
#pragma unroll
                for (int d = 0; d < D / 8; d++) {
                    o[mt][d][2 * rr] *= alpha;
                    o[mt][d][2 * rr + 1] *= alpha;
                }
            }

        /* O += P·V: the S accumulators of key columns 16kk..16kk+15 are exactly P's A fragment */
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            uint32_t pa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) acc_to_a<T>(pa[mt], s[mt] + 2 * kk);
#pragma unroll
            for (int dp = 0; dp < D / 16; dp++) {
                uint32_t vb[4];
                bsk_ldsm_x4_t(vb, sV + swz<D>(kk * 16 + (((lane >> 3) & 1) << 3) + (lane & 7), dp * 2 + (lane >> 4)) * 2);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    mma<T>(o[mt][2 * dp], pa[mt], vb[0], vb[1]);
                    mma<T>(o[mt][2 * dp + 1], pa[mt], vb[2], vb[3]);
                }
            }
        }
        __syncthreads(); /* every warp is done with `stage` before the next iteration refills it */
        c = cn;
        k0 = k0n;
        stage ^= 1;
    }
    bsk_cp_async_wait<0>();
    __syncthreads(); /* the Q tile may still be landing when there was no chunk; sQ is reused below */

    /* normalise; stage the warp's rows in its own part of sQ, then store 16-byte pieces */
    uint32_t *sQw = reinterpret_cast<uint32_t *>(sQ);
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        float inv[2];
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
            l[mt][rr] += __shfl_xor_sync(0xffffffffu, l[mt][rr], 1);
            l[mt][rr] += __shfl_xor_sync(0xffffffffu, l[mt][rr], 2);
            inv[rr] = l[mt][rr] > 0.0f ? 1.0f / l[mt][rr] : 0.0f;
        }
        const int r0 = wrow + mt * 16 + g;
#pragma unroll
        for (int d = 0; d < D / 8; d++) {
            sQw[(swz<D>(r0, d) + tq * 2) >> 1] = pack2<T>(o[mt][d][0] * inv[0], o[mt][d][1] * inv[0]);
            sQw[(swz<D>(r0 + 8, d) + tq * 2) >> 1] = pack2<T>(o[mt][d][2] * inv[1], o[mt][d][3] * inv[1]);
        }
        if (a.lse && tq == 0)
#pragma unroll
            for (int rr = 0; rr < 2; rr++) {
                int64_t q = q0 + r0 + rr * 8;
                if (q <= q_last)
                    a.lse[((int64_t)b * a.heads + h) * a.seq_q + q] =
                        l[mt][rr] > 0.0f ? (m[mt][rr] + __log2f(l[mt][rr])) * 0.69314718055994531f : -INFINITY;
            }
    }
    __syncwarp();
    T *og = reinterpret_cast<T *>(a.o) + b * a.o_sb + h * a.o_sh;
    for (int x = lane; x < 16 * MT * CH; x += 32) {
        int r = x / CH, cc = x % CH;
        int64_t q = q0 + wrow + r;
        if (q <= q_last)
            *reinterpret_cast<uint4 *>(og + q * a.o_ss + cc * 8) = *reinterpret_cast<const uint4 *>(sQ + swz<D>(wrow + r, cc));
    }
}

/* One warp per query row; each lane holds dims lane, lane+32, ... (dim <= 512). */
template <typename T>
__global__ void __launch_bounds__(128) attn_simt(const AttnArgs a, int64_t rows)
{
    constexpr int PER = 16;
    const int lane = threadIdx.x & 31;
    for (int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < rows;
         w += ((int64_t)gridDim.x * blockDim.x) >> 5) {
        const int64_t qpos = w % a.seq_q, bh = w / a.seq_q;
        const int h = (int)(bh % a.heads), b = (int)(bh / a.heads), hk = h / a.group;
        const int i = (int)(qpos / a.block_q);
        const int64_t kv_len = kv_len_of(a, b);
        const Lists L = lists_row(a, layout_of(a, b, h) * a.mq + i);
        const T *qg = reinterpret_cast<const T *>(a.q) + b * a.q_sb + qpos * a.q_ss + h * a.q_sh;
        const T *kg = reinterpret_cast<const T *>(a.k) + b * a.k_sb + hk * a.k_sh;
        const T *vg = reinterpret_cast<const T *>(a.v) + b * a.v_sb + hk * a.v_sh;
        float qv[PER], ov[PER];
#pragma unroll
        for (int u = 0; u < PER; u++) {
            int d = lane + 32 * u;
            qv[u] = d < a.dim ? bsk_tof(qg[d]) : 0.0f;
            ov[u] = 0.0f;
        }
        float m = -INFINITY, l = 0.0f;
        int64_t kmax = kv_len - 1;
        if (a.causal && qpos + a.off < kmax) kmax = qpos + a.off;
        for (int t = 0; t < L.nf + L.np; t++) {
            int j = t < L.nf ? L.f[t] : L.p[t - L.nf];
            if (j < 0 || j >= a.nb) continue;
            int64_t kb0 = (int64_t)j * a.block_k, kb1 = min(kb0 + a.block_k - 1, kmax);
            for (int64_t key = kb0; key <= kb1; key++) {
                const T *kr = kg + key * a.k_ss, *vr = vg + key * a.v_ss;
                float part = 0.0f;
#pragma unroll
                for (int u = 0; u < PER; u++) {
                    int d = lane + 32 * u;
                    if (d < a.dim) part += qv[u] * bsk_tof(kr[d]);
                }
#pragma unroll
                for (int x = 16; x > 0; x >>= 1) part += __shfl_xor_sync(0xffffffffu, part, x);
                float sv = part * a.scale_log2, mnew = fmaxf(m, sv);
                float alpha = exp2f(m - mnew), p = exp2f(sv - mnew);
                l = l * alpha + p;
                m = mnew;
#pragma unroll
                for (int u = 0; u < PER; u++) {
                    int d = lane + 32 * u;
                    if (d < a.dim) ov[u] = ov[u] * alpha + p * bsk_tof(vr[d]);
                }
            }
        }
        float inv = l > 0.0f ? 1.0f / l : 0.0f;
        T *og = reinterpret_cast<T *>(a.o) + b * a.o_sb + qpos * a.o_ss + h * a.o_sh;
#pragma unroll
        for (int u = 0; u < PER; u++) {
            int d = lane + 32 * u;
            if (d < a.dim) st_el(og + d, ov[u] * inv);
        }
        if (a.lse && lane == 0)
            a.lse[((int64_t)b * a.heads + h) * a.seq_q + qpos] = l > 0.0f ? (m + log2f(l)) * 0.69314718055994531f : -INFINITY;
    }
}

/* dynamic shared memory of attn_mma: the Q tile (rows = 16 * MT * WARPS query rows) + two K and two V stages of 64
   keys, 2-byte elements */
constexpr size_t mma_smem(int rows, int D) { return (size_t)(rows + 4 * 64) * D * 2; }

template <typename T, int D, int WARPS, int MT, int MINB>
bsk_status launch_mma(const AttnArgs &a, int64_t ctas, cudaStream_t stream)
{
    const int smem = (int)mma_smem(16 * MT * WARPS, D);
    static int opted_in = 0; /* once per instantiation (one process, one device in practice) */
    if (!opted_in) {
        bsk_status s = opt_in(attn_mma<T, D, WARPS, MT, MINB>, smem);
        if (s) return s;
        opted_in = 1;
    }
    attn_mma<T, D, WARPS, MT, MINB><<<(unsigned)ctas, WARPS * 32, smem, stream>>>(a);
    return BSK_CUDA_LAUNCH_CHECK();
}

/* Builds of the 128-row kernel (bsk__attn_variant; `bsk attention --variants` times them all):
     0: 4 warps x 32 rows, two CTAs per SM (default: K/V fragments reused for two row tiles; 3 is the same
        build, never preceded by the Hopper kernel; 4..8 ask for the Hopper kernel: see below)
     1: 8 warps x 16 rows, squeezed to 128 registers for two CTAs per SM (a few bytes of spill)
     2: 8 warps x 16 rows, one CTA per SM
   The 64-row kernel is 4 warps x 16 rows. */
template <typename T, int D>
bsk_status launch_mma_bq(const AttnArgs &a, int64_t ctas, cudaStream_t stream)
{
    if (a.block_q == 64) return launch_mma<T, D, 4, 1, 1>(a, ctas, stream);
    if (bsk__attn_variant == 1) return launch_mma<T, D, 8, 1, 2>(a, ctas, stream);
    if (bsk__attn_variant == 2) return launch_mma<T, D, 8, 1, 1>(a, ctas, stream);
    return launch_mma<T, D, 4, 2, 2>(a, ctas, stream);
}

/* Head dim 256 (session 10): one build per query block, 16 rows per warp (MT = 1: the O accumulators alone are 128
   registers per thread), one CTA per SM; shared memory (block_q + 256) x 256 x 2 bytes: 160 KB at block_q 64, 192 KB
   at 128 (mma_smem; the launcher declines to the CUDA-core kernel where the GPU has less). */
template <typename T>
bsk_status launch_mma_d(const AttnArgs &a, int64_t ctas, cudaStream_t stream)
{
    if (a.dim == 256)
        return a.block_q == 64 ? launch_mma<T, 256, 4, 1, 1>(a, ctas, stream) : launch_mma<T, 256, 8, 1, 1>(a, ctas, stream);
    return a.dim == 64 ? launch_mma_bq<T, 64>(a, ctas, stream) : launch_mma_bq<T, 128>(a, ctas, stream);
}

} // namespace

extern "C" bsk_status bsk_cuda_attention_forward(bsk_context *ctx, const bsk_attention_params *p, const bsk__attn_dims *d)
{
    struct bsk_cuda_state *st = bsk_cuda_state_get(ctx);
    if (!st) return BSK_ERR_OUT_OF_MEMORY;
    const bsk_attn_layout *L = p->layout;
    if (d->batch > INT32_MAX || d->heads > INT32_MAX || d->mq > INT32_MAX || d->nb > INT32_MAX) return BSK_ERR_UNSUPPORTED;
    AttnArgs a;
    attn_args_fill(a, p, d);
    a.lse = p->lse;
    cudaStream_t stream = (cudaStream_t)ctx->stream;

    const bsk_attn_tensor *ts[4] = {&p->q, &p->k, &p->v, &p->o};
    int vec_ok = 1;
    for (int t = 0; t < 4; t++) vec_ok &= row_ok(ts[t]);
    int64_t ctas = d->batch * d->heads * d->mq;
    int mma_ok = !bsk__attn_simt_forced && st->cc_major >= 8 && p->q.dtype != BSK_F32 &&
                 (d->dim == 64 || d->dim == 128 || (d->dim == 256 && mma_smem(L->block_q, 256) <= st->smem_optin)) &&
                 (L->block_q == 64 || L->block_q == 128) && L->block_k % 64 == 0 && vec_ok && ctas <= INT32_MAX;
    /* Hopper (cc 9.0): the TMA + wgmma kernel first (src/cuda/hopper/attention_hopper.cu; it declines what it does
       not take: block sizes other than 128, negative scales, strides TMA cannot express). bsk__attn_variant 0
       takes it when HOPPER_DEFAULT says so (1 since it was measured correct and 2.2-2.9x faster on an H100,
       docs/attention-notes.md), 4..8 ask for it (5..8 pick its build options: attention_hopper.cu), 1..3 keep the
       mma.sync kernel (3: its default build; tests and benchmarks compare the two). */
    static const int HOPPER_DEFAULT = 1;
    const int hv = bsk__attn_variant;
    if (mma_ok && ((hv >= 4 && hv <= 8) || (hv == 0 && HOPPER_DEFAULT)) && st->cc_major == 9 && st->cc_minor == 0) {
        bsk_status hs = bsk_hopper_attention_forward(ctx, p, d);
        if (hs != BSK_ERR_UNSUPPORTED) return hs;
    }
    if (mma_ok) {
        ctx->last_kernel = "cuda-attention-mma";
        return p->q.dtype == BSK_F16 ? launch_mma_d<__half>(a, ctas, stream) : launch_mma_d<__nv_bfloat16>(a, ctas, stream);
    }
    int64_t rows = d->batch * d->heads * d->seq_q, blocks = (rows + 3) / 4;
    if (blocks > (1 << 20)) blocks = 1 << 20; /* grid-stride beyond */
    ctx->last_kernel = "cuda-attention-simt";
    if (p->q.dtype == BSK_F16) attn_simt<__half><<<(unsigned)blocks, 128, 0, stream>>>(a, rows);
    else if (p->q.dtype == BSK_BF16) attn_simt<__nv_bfloat16><<<(unsigned)blocks, 128, 0, stream>>>(a, rows);
    else attn_simt<float><<<(unsigned)blocks, 128, 0, stream>>>(a, rows);
    return BSK_CUDA_LAUNCH_CHECK();
}

/* attention_bwd.cu — block-sparse attention backward on the GPU (bsk_attention_backward).

   All on ctx->stream, no host synchronisation, workspace from the context:
   1. bwd_prep: per query row, D = rowsum(dO ∘ O) − d_lse and nl2 = -lse·log2(e) (-inf for an empty row, so that
      P = exp2(s·scale·log2(e) + nl2) is 0 there).
   2. The transposed layout — per (layout, key block j), the query blocks i keeping tile (i, j), ascending:
      bwd_tcount counts them per column (one thread per column walks the query blocks, a binary search in
      each sorted list), the transpose index's one-CTA scan (pattern_cache.cu) turns counts into offsets,
      bwd_tfill writes them in the same walk. No atomics: the order, and every sum over it, is fixed.
   3. dK, dV: one CTA per (batch, kv head, 64-key chunk), 4 warps of 16 keys; over the heads of the GQA group
      and the query blocks keeping the chunk's key block (64-row query chunks streaming through a two-stage
      cp.async ring with their dO rows, nl2 and D), Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ on mma.sync, Pᵀ and dSᵀ in
      registers become the A operands of dV += Pᵀ·dO and dK += dSᵀ·Q; dK and dV stay in registers to the end.
   4. dQ: one CTA per (batch, head, 64-row query chunk), walking its query block's lists as the forward does
      (64-key chunks, two-stage ring): S = Q·Kᵀ and dP = dO·Vᵀ recomputed, dS in registers, dQ += dS·K.
      Recomputing S and dP costs 3/7 more tensor work than FA2's atomic dQ, but every dQ element is summed
      in one fixed order: results are bitwise deterministic.
   Each of 3 and 4 has a CUDA-core twin (one warp per key row / query row) for what the tensor-core kernels
   do not take (fp32, other dims, block sizes not multiples of 64, unaligned rows), forced by
   bsk__attention_force_simt for tests. Malformed device layouts never cause out-of-bounds access: counts
   are clamped to the capacity, out-of-range key blocks never match, every index into the transposed
   layout is clamped. */
#include "attention_common.cuh"

namespace {

struct BwdArgs {
    const void *q, *k, *v, *o, *g; /* g = dO */
    void *dq, *dk, *dv;
    const float *lse, *d_lse;
    float *nl2, *delta;            /* workspace, [batch*heads*seq_q] each */
    const int32_t *t_ptr, *t_idx;  /* transposed layout: column l*nb + j */
    int64_t t_total;               /* entries t_idx holds */
    int64_t q_sb, q_ss, q_sh, k_sb, k_ss, k_sh, v_sb, v_ss, v_sh, o_sb, o_ss, o_sh, g_sb, g_ss, g_sh;
    int64_t dq_sb, dq_ss, dq_sh, dk_sb, dk_ss, dk_sh, dv_sb, dv_ss, dv_sh;
    int64_t seq_q, seq_k, off;
    int batch, heads, kv_heads, group;
    int dim, mq, nb, block_q, block_k, cap, lay_b, lay_h, causal;
    const int32_t *full_count, *full_idx, *part_count, *part_idx, *kv_lens;
    float scale, scale_log2;
};

/* 4 bytes global -> shared; src_bytes 0 writes zeros and reads nothing. */
__device__ __forceinline__ void cp_async4(uint32_t saddr, const void *g, int src_bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(saddr), "l"(g), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ bool sorted_has(const int32_t *x, int n, int j)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) >> 1, v = x[mid];
        if (v == j) return true;
        if (v < j) lo = mid + 1;
        else hi = mid - 1;
    }
    return false;
}

__device__ __forceinline__ bool tile_kept(const BwdArgs &a, int64_t row, int j)
{
    Lists L = lists_row(a, row);
    return sorted_has(L.f, L.nf, j) || sorted_has(L.p, L.np, j);
}

/* [lo, hi) of transposed column col, clamped into the array. */
__device__ __forceinline__ void t_range(const BwdArgs &a, int64_t col, int64_t &lo, int64_t &hi)
{
    lo = a.t_ptr[col];
    hi = a.t_ptr[col + 1];
    lo = lo < 0 ? 0 : (lo > a.t_total ? a.t_total : lo);
    hi = hi < lo ? lo : (hi > a.t_total ? a.t_total : hi);
}

__device__ __forceinline__ int t_at(const BwdArgs &a, int64_t e)
{
    int i = a.t_idx[e];
    return i < 0 ? 0 : (i >= a.mq ? a.mq - 1 : i);
}

/* s = A·Bᵀ and dp = A2·B2ᵀ over D for the warp's 16 rows (from row r0 of the swizzled tiles at a, a2) and 64
   columns (rows 0..63 of the swizzled tiles at b, b2): the two products each mma.sync kernel starts a step
   with (dK/dV: Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ; dQ: S = Q·Kᵀ, dP = dO·Vᵀ), their fragments loaded in lockstep. */
template <typename T, int D>
__device__ __forceinline__ void mma_pair(float (&s)[8][4], float (&dp)[8][4], uint32_t a, uint32_t a2, int r0, uint32_t b,
                                         uint32_t b2, int lane)
{
#pragma unroll
    for (int n = 0; n < 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = dp[n][0] = dp[n][1] = dp[n][2] = dp[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        uint32_t fa[4], fa2[4];
        bsk_ldsm_x4(fa, a + swz<D>(r0 + (lane & 15), kk * 2 + (lane >> 4)) * 2);
        bsk_ldsm_x4(fa2, a2 + swz<D>(r0 + (lane & 15), kk * 2 + (lane >> 4)) * 2);
#pragma unroll
        for (int np = 0; np < 4; np++) {
            const int off = swz<D>(np * 16 + ((lane >> 4) << 3) + (lane & 7), kk * 2 + ((lane >> 3) & 1)) * 2;
            uint32_t fb[4], fb2[4];
            bsk_ldsm_x4(fb, b + off);
            mma<T>(s[2 * np], fa, fb[0], fb[1]);
            mma<T>(s[2 * np + 1], fa, fb[2], fb[3]);
            bsk_ldsm_x4(fb2, b2 + off);
            mma<T>(dp[2 * np], fa2, fb2[0], fb2[1]);
            mma<T>(dp[2 * np + 1], fa2, fb2[2], fb2[3]);
        }
    }
}

/* ---- 1. D and nl2, one warp per query row */
template <typename T>
__global__ void __launch_bounds__(256) bwd_prep(const BwdArgs a, int64_t rows)
{
    const int lane = threadIdx.x & 31;
    for (int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < rows;
         w += ((int64_t)gridDim.x * blockDim.x) >> 5) {
        const int64_t q = w % a.seq_q, bh = w / a.seq_q, h = bh % a.heads, b = bh / a.heads;
        const T *o = reinterpret_cast<const T *>(a.o) + b * a.o_sb + q * a.o_ss + h * a.o_sh;
        const T *g = reinterpret_cast<const T *>(a.g) + b * a.g_sb + q * a.g_ss + h * a.g_sh;
        float acc = 0.0f;
        for (int d = lane; d < a.dim; d += 32) acc += bsk_tof(o[d]) * bsk_tof(g[d]);
#pragma unroll
        for (int x = 16; x > 0; x >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, x);
        if (lane == 0) {
            float l = a.lse[w];
            a.delta[w] = a.d_lse ? acc - a.d_lse[w] : acc; /* dlse/dS = P: it folds into D */
            a.nl2[w] = l == -INFINITY ? -INFINITY : -l * LOG2E;
        }
    }
}

/* ---- 2. transposed layout: one thread per column (layout l, key block j) */
__global__ void bwd_tcount(const BwdArgs a, int64_t cols, int32_t *cnt)
{
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (int64_t)gridDim.x * blockDim.x) {
        const int64_t l = c / a.nb;
        const int j = (int)(c % a.nb);
        int n = 0;
        for (int i = 0; i < a.mq; i++) n += tile_kept(a, l * a.mq + i, j);
        cnt[c] = n;
    }
}

__global__ void bwd_tfill(const BwdArgs a, int64_t cols, int32_t *t_idx)
{
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (int64_t)gridDim.x * blockDim.x) {
        const int64_t l = c / a.nb;
        const int j = (int)(c % a.nb);
        int64_t n, end;
        t_range(a, c, n, end);
        for (int i = 0; i < a.mq && n < end; i++)
            if (tile_kept(a, l * a.mq + i, j)) t_idx[n++] = i;
    }
}

/* ---- 3. dK, dV on tensor cores */

/* The next (head of the group, query block, 64-row piece) whose rows can see the key chunk at k0. */
struct It {
    int hh, sub;
    int64_t t, te, q0;
};

__device__ __forceinline__ bool it_next(const BwdArgs &a, It &it, int b, int hk, int j, int64_t k0, int cpq)
{
    for (;;) {
        if (++it.sub >= cpq) {
            it.sub = 0;
            it.t++;
        }
        while (it.t >= it.te) {
            if (++it.hh >= a.group) return false;
            t_range(a, layout_of(a, b, (int64_t)hk * a.group + it.hh) * a.nb + j, it.t, it.te);
            it.sub = 0;
        }
        const int64_t q0 = (int64_t)t_at(a, it.t) * a.block_q + it.sub * 64;
        if (q0 >= a.seq_q) {
            it.sub = cpq - 1; /* the block's later pieces are past the end too */
            continue;
        }
        const int64_t q_last = min(q0 + 63, a.seq_q - 1);
        if (a.causal && k0 > q_last + a.off) continue;
        it.q0 = q0;
        return true;
    }
}

template <typename T, int D>
__global__ void __launch_bounds__(128, 2) bwd_dkdv_mma(const BwdArgs a)
{
    constexpr int QC = 64, KC = 64, NT = 128, CH = D / 8;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    const uint32_t sKa = bsk_smem_u32(smem_raw), sVa = sKa + KC * D * 2, sQ0 = sVa + KC * D * 2;
    /* stage s: Q at sQ0 + s*STG, dO at sQ0 + s*STG + QC*D*2; then nl2 / D rows, [2 stages][2][QC] floats */
    constexpr uint32_t STG = 2 * QC * D * 2;
    float *sLD = reinterpret_cast<float *>(smem_raw + 2 * KC * D * 2 + 2 * STG);
    const uint32_t sLDa = bsk_smem_u32(sLD);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;

    const int64_t nbh = (int64_t)a.batch * a.kv_heads;
    const int64_t kc = blockIdx.x / nbh, bhk = blockIdx.x % nbh;
    const int b = (int)(bhk / a.kv_heads), hk = (int)(bhk % a.kv_heads);
    const int64_t k0 = kc * KC, kv_len = kv_len_of(a, b);
    const int j = (int)(k0 / a.block_k), cpq = a.block_q / QC;

    const T *kg = reinterpret_cast<const T *>(a.k) + b * a.k_sb + hk * a.k_sh;
    const T *vg = reinterpret_cast<const T *>(a.v) + b * a.v_sb + hk * a.v_sh;
    /* keys at or past kv_len are zeros (never visible; their gradients are 0) */
    for (int x = tid; x < KC * CH; x += NT) {
        int r = x / CH, c = x % CH;
        bool ok = k0 + r < kv_len;
        uint32_t so = swz<D>(r, c) * 2;
        bsk_cp_async16(sKa + so, ok ? (const void *)(kg + (k0 + r) * a.k_ss + c * 8) : (const void *)&bsk_zero16, ok ? 16 : 0);
        bsk_cp_async16(sVa + so, ok ? (const void *)(vg + (k0 + r) * a.v_ss + c * 8) : (const void *)&bsk_zero16, ok ? 16 : 0);
    }
    /* query rows past seq_q are zeros, nl2 = D = 0 there: P = 1 but dO = 0 and dS = 0, so they add nothing */
    auto load_q = [&](int stage, const It &it) {
        const int64_t h = (int64_t)hk * a.group + it.hh;
        const T *qg = reinterpret_cast<const T *>(a.q) + b * a.q_sb + h * a.q_sh;
        const T *gg = reinterpret_cast<const T *>(a.g) + b * a.g_sb + h * a.g_sh;
        const uint32_t sq = sQ0 + stage * STG, sg = sq + QC * D * 2;
        for (int x = tid; x < QC * CH; x += NT) {
            int r = x / CH, c = x % CH;
            bool ok = it.q0 + r < a.seq_q;
            uint32_t so = swz<D>(r, c) * 2;
            bsk_cp_async16(sq + so, ok ? (const void *)(qg + (it.q0 + r) * a.q_ss + c * 8) : (const void *)&bsk_zero16, ok ? 16 : 0);
            bsk_cp_async16(sg + so, ok ? (const void *)(gg + (it.q0 + r) * a.g_ss + c * 8) : (const void *)&bsk_zero16, ok ? 16 : 0);
        }
        const int r = tid & 63;
        const bool ok = it.q0 + r < a.seq_q;
        const int64_t row = ((int64_t)b * a.heads + h) * a.seq_q + it.q0 + r;
        const float *src = tid < 64 ? a.nl2 : a.delta;
        cp_async4(sLDa + ((stage * 2 + (tid >> 6)) * QC + r) * 4, ok ? (const void *)(src + row) : (const void *)&bsk_zero16,
                  ok ? 4 : 0);
    };

    float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
    for (int d = 0; d < D / 8; d++) dk[d][0] = dk[d][1] = dk[d][2] = dk[d][3] = dv[d][0] = dv[d][1] = dv[d][2] = dv[d][3] = 0.0f;

    It cur;
    cur.hh = -1; cur.sub = cpq - 1; cur.t = 0; cur.te = 0; cur.q0 = 0;
    bool has = k0 < kv_len && it_next(a, cur, b, hk, j, k0, cpq);
    if (has) load_q(0, cur);
    bsk_cp_async_commit();
    int stage = 0;
    const int wk = warp * 16;
    while (has) {
        It nxt = cur;
        const bool hasn = it_next(a, nxt, b, hk, j, k0, cpq);
        if (hasn) load_q(stage ^ 1, nxt);
        bsk_cp_async_commit();
        bsk_cp_async_wait<1>();
        __syncthreads();

        const uint32_t sQ = sQ0 + stage * STG, sG = sQ + QC * D * 2;
        const float *sL = sLD + stage * 2 * QC, *sD = sL + QC;
        /* Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ for the warp's 16 keys x 64 queries */
        float s[8][4], dp[8][4];
        mma_pair<T, D>(s, dp, sKa, sVa, wk, sQ, sG, lane);
        /* Pᵀ and dSᵀ; element (key y, query x); mask only pieces crossing kv_len or the causal diagonal */
        const int64_t q0 = cur.q0;
        const bool need_mask = k0 + KC > kv_len || (a.causal && k0 + KC - 1 > q0 + a.off);
        const int kv_lim = (int)min((int64_t)KC, kv_len - k0);
        const int diag = (int)max(min(q0 + a.off - k0, (int64_t)1024), (int64_t)-1024); /* key y sees query x iff y <= x + diag */
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int x = n * 8 + tq * 2 + (e & 1), y = wk + g + (e >> 1) * 8;
                float pv = fast_exp2(s[n][e] * a.scale_log2 + sL[x]);
                if (need_mask && (y >= kv_lim || (a.causal && y > x + diag))) pv = 0.0f;
                s[n][e] = pv;
                dp[n][e] = pv * (dp[n][e] - sD[x]);
            }
        /* dV += Pᵀ·dO, dK += dSᵀ·Q: the accumulators of query columns 16kk..16kk+15 are the A fragments */
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            uint32_t pa[4], da[4];
            acc_to_a<T>(pa, s + 2 * kk);
            acc_to_a<T>(da, dp + 2 * kk);
#pragma unroll
            for (int dd = 0; dd < D / 16; dd++) {
                const int off = swz<D>(kk * 16 + (((lane >> 3) & 1) << 3) + (lane & 7), dd * 2 + (lane >> 4)) * 2;
                uint32_t gb[4], qb[4];
                bsk_ldsm_x4_t(gb, sG + off);
                mma<T>(dv[2 * dd], pa, gb[0], gb[1]);
                mma<T>(dv[2 * dd + 1], pa, gb[2], gb[3]);
                bsk_ldsm_x4_t(qb, sQ + off);
                mma<T>(dk[2 * dd], da, qb[0], qb[1]);
                mma<T>(dk[2 * dd + 1], da, qb[2], qb[3]);
            }
        }
        __syncthreads(); /* every warp is done with `stage` before the next iteration refills it */
        cur = nxt;
        has = hasn;
        stage ^= 1;
    }
    bsk_cp_async_wait<0>();
    __syncthreads(); /* K and V may still be landing when there was no item; sK / sV are reused below */

    /* stage the warp's 16 rows of dK (in sK) and dV (in sV), then store 16-byte pieces */
    T *sK = reinterpret_cast<T *>(smem_raw), *sV = sK + KC * D;
    uint32_t *sKw = reinterpret_cast<uint32_t *>(sK), *sVw = reinterpret_cast<uint32_t *>(sV);
    const int r0 = wk + g;
#pragma unroll
    for (int d = 0; d < D / 8; d++) {
        sKw[(swz<D>(r0, d) + tq * 2) >> 1] = pack2<T>(dk[d][0] * a.scale, dk[d][1] * a.scale);
        sKw[(swz<D>(r0 + 8, d) + tq * 2) >> 1] = pack2<T>(dk[d][2] * a.scale, dk[d][3] * a.scale);
        sVw[(swz<D>(r0, d) + tq * 2) >> 1] = pack2<T>(dv[d][0], dv[d][1]);
        sVw[(swz<D>(r0 + 8, d) + tq * 2) >> 1] = pack2<T>(dv[d][2], dv[d][3]);
    }
    __syncwarp();
    T *dkg = reinterpret_cast<T *>(a.dk) + b * a.dk_sb + hk * a.dk_sh;
    T *dvg = reinterpret_cast<T *>(a.dv) + b * a.dv_sb + hk * a.dv_sh;
    for (int x = lane; x < 16 * CH; x += 32) {
        const int r = x / CH, cc = x % CH;
        const int64_t key = k0 + wk + r;
        if (key < a.seq_k) {
            *reinterpret_cast<uint4 *>(dkg + key * a.dk_ss + cc * 8) = *reinterpret_cast<const uint4 *>(sK + swz<D>(wk + r, cc));
            *reinterpret_cast<uint4 *>(dvg + key * a.dv_ss + cc * 8) = *reinterpret_cast<const uint4 *>(sV + swz<D>(wk + r, cc));
        }
    }
}

/* ---- 4. dQ on tensor cores */

template <typename T, int D>
__global__ void __launch_bounds__(128, 2) bwd_dq_mma(const BwdArgs a, int nqc)
{
    constexpr int QC = 64, KC = 64, NT = 128, CH = D / 8;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    const uint32_t sQa = bsk_smem_u32(smem_raw), sGa = sQa + QC * D * 2, sKa = sGa + QC * D * 2, sVa = sKa + 2 * KC * D * 2;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;

    /* causal: the longest query chunks (at the end) first */
    const int64_t nbh = (int64_t)a.batch * a.heads;
    int64_t qc, bh;
    if (a.causal) {
        qc = nqc - 1 - blockIdx.x / nbh;
        bh = blockIdx.x % nbh;
    } else {
        qc = blockIdx.x % nqc;
        bh = blockIdx.x / nqc;
    }
    const int h = (int)(bh % a.heads), b = (int)(bh / a.heads), hk = h / a.group;
    const int64_t q0 = qc * QC, q_last = min(q0 + QC, a.seq_q) - 1, kv_len = kv_len_of(a, b);
    const int i = (int)(q0 / a.block_q);
    const Lists L = lists_row(a, layout_of(a, b, h) * a.mq + i);
    const int cpt = a.block_k / KC, nchunks = (L.nf + L.np) * cpt;

    const T *qg = reinterpret_cast<const T *>(a.q) + b * a.q_sb + h * a.q_sh;
    const T *gg = reinterpret_cast<const T *>(a.g) + b * a.g_sb + h * a.g_sh;
    const T *kg = reinterpret_cast<const T *>(a.k) + b * a.k_sb + hk * a.k_sh;
    const T *vg = reinterpret_cast<const T *>(a.v) + b * a.v_sb + hk * a.v_sh;
    for (int x = tid; x < QC * CH; x += NT) {
        int r = x / CH, c = x % CH;
        bool ok = q0 + r <= q_last;
        uint32_t so = swz<D>(r, c) * 2;
        bsk_cp_async16(sQa + so, ok ? (const void *)(qg + (q0 + r) * a.q_ss + c * 8) : (const void *)&bsk_zero16, ok ? 16 : 0);
        bsk_cp_async16(sGa + so, ok ? (const void *)(gg + (q0 + r) * a.g_ss + c * 8) : (const void *)&bsk_zero16, ok ? 16 : 0);
    }
    auto load_kv = [&](int stage, int64_t k0) {
        for (int x = tid; x < KC * CH; x += NT) {
            int r = x / CH, c = x % CH;
            bool ok = k0 + r < kv_len;
            uint32_t so = (stage * KC * D + swz<D>(r, c)) * 2;
            bsk_cp_async16(sKa + so, ok ? (const void *)(kg + (k0 + r) * a.k_ss + c * 8) : (const void *)&bsk_zero16, ok ? 16 : 0);
            bsk_cp_async16(sVa + so, ok ? (const void *)(vg + (k0 + r) * a.v_ss + c * 8) : (const void *)&bsk_zero16, ok ? 16 : 0);
        }
    };

    const int wq = warp * 16;
    float nl[2], dl[2];
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        const int64_t q = q0 + wq + g + rr * 8;
        const int64_t row = ((int64_t)b * a.heads + h) * a.seq_q + q;
        nl[rr] = q <= q_last ? a.nl2[row] : -INFINITY;
        dl[rr] = q <= q_last ? a.delta[row] : 0.0f;
    }
    float dq[D / 8][4];
#pragma unroll
    for (int d = 0; d < D / 8; d++) dq[d][0] = dq[d][1] = dq[d][2] = dq[d][3] = 0.0f;

    int64_t k0 = 0;
    int c = next_chunk(a, L, -1, nchunks, cpt, q_last, kv_len, k0);
    if (c < nchunks) load_kv(0, k0);
    bsk_cp_async_commit();
    int stage = 0;
    while (c < nchunks) {
        int64_t k0n = 0;
        const int cn = next_chunk(a, L, c, nchunks, cpt, q_last, kv_len, k0n);
        if (cn < nchunks) load_kv(stage ^ 1, k0n);
        bsk_cp_async_commit();
        bsk_cp_async_wait<1>();
        __syncthreads();

        const uint32_t sK = sKa + stage * KC * D * 2, sV = sVa + stage * KC * D * 2;
        float s[8][4], dp[8][4];
        mma_pair<T, D>(s, dp, sQa, sGa, wq, sK, sV, lane);
        const bool need_mask = k0 + KC > kv_len || (a.causal && k0 + KC - 1 > q0 + a.off);
        const int kv_lim = (int)min((int64_t)KC, kv_len - k0);
        const int diag = (int)max(min(q0 + a.off - k0, (int64_t)1024), (int64_t)-1024); /* key x visible to row y iff x <= y + diag */
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int x = n * 8 + tq * 2 + (e & 1), y = wq + g + (e >> 1) * 8, rr = e >> 1;
                float pv = fast_exp2(s[n][e] * a.scale_log2 + nl[rr]);
                if (need_mask && (x >= kv_lim || (a.causal && x > y + diag))) pv = 0.0f;
                dp[n][e] = pv * (dp[n][e] - dl[rr]);
            }
        /* dQ += dS·K */
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            uint32_t da[4];
            acc_to_a<T>(da, dp + 2 * kk);
#pragma unroll
            for (int dd = 0; dd < D / 16; dd++) {
                uint32_t kb[4];
                bsk_ldsm_x4_t(kb, sK + swz<D>(kk * 16 + (((lane >> 3) & 1) << 3) + (lane & 7), dd * 2 + (lane >> 4)) * 2);
                mma<T>(dq[2 * dd], da, kb[0], kb[1]);
                mma<T>(dq[2 * dd + 1], da, kb[2], kb[3]);
            }
        }
        __syncthreads();
        c = cn;
        k0 = k0n;
        stage ^= 1;
    }
    bsk_cp_async_wait<0>();
    __syncthreads(); /* the Q tile may still be landing when there was no chunk; sQ is reused below */

    T *sQ = reinterpret_cast<T *>(smem_raw);
    uint32_t *sQw = reinterpret_cast<uint32_t *>(sQ);
    const int r0 = wq + g;
#pragma unroll
    for (int d = 0; d < D / 8; d++) {
        sQw[(swz<D>(r0, d) + tq * 2) >> 1] = pack2<T>(dq[d][0] * a.scale, dq[d][1] * a.scale);
        sQw[(swz<D>(r0 + 8, d) + tq * 2) >> 1] = pack2<T>(dq[d][2] * a.scale, dq[d][3] * a.scale);
    }
    __syncwarp();
    T *dqg = reinterpret_cast<T *>(a.dq) + b * a.dq_sb + h * a.dq_sh;
    for (int x = lane; x < 16 * CH; x += 32) {
        const int r = x / CH, cc = x % CH;
        const int64_t q = q0 + wq + r;
        if (q <= q_last)
            *reinterpret_cast<uint4 *>(dqg + q * a.dq_ss + cc * 8) = *reinterpret_cast<const uint4 *>(sQ + swz<D>(wq + r, cc));
    }
}

/* ---- 3 and 4 on CUDA cores: one warp per row; each lane holds dims lane, lane+32, ... (dim <= 512) */
constexpr int PER = 16;

template <typename T>
__global__ void __launch_bounds__(128) bwd_dq_simt(const BwdArgs a, int64_t rows)
{
    const int lane = threadIdx.x & 31;
    for (int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < rows;
         w += ((int64_t)gridDim.x * blockDim.x) >> 5) {
        const int64_t q = w % a.seq_q, bh = w / a.seq_q;
        const int h = (int)(bh % a.heads), b = (int)(bh / a.heads), hk = h / a.group;
        const int64_t kv_len = kv_len_of(a, b);
        const Lists L = lists_row(a, layout_of(a, b, h) * a.mq + q / a.block_q);
        const T *qr = reinterpret_cast<const T *>(a.q) + b * a.q_sb + q * a.q_ss + h * a.q_sh;
        const T *gr = reinterpret_cast<const T *>(a.g) + b * a.g_sb + q * a.g_ss + h * a.g_sh;
        const T *kg = reinterpret_cast<const T *>(a.k) + b * a.k_sb + hk * a.k_sh;
        const T *vg = reinterpret_cast<const T *>(a.v) + b * a.v_sb + hk * a.v_sh;
        float qv[PER], gv[PER], acc[PER];
#pragma unroll
        for (int u = 0; u < PER; u++) {
            const int d = lane + 32 * u;
            qv[u] = d < a.dim ? bsk_tof(qr[d]) : 0.0f;
            gv[u] = d < a.dim ? bsk_tof(gr[d]) : 0.0f;
            acc[u] = 0.0f;
        }
        const float nl = a.nl2[w], dl = a.delta[w];
        int64_t kmax = kv_len - 1;
        if (a.causal && q + a.off < kmax) kmax = q + a.off;
        for (int t = 0; t < L.nf + L.np && nl != -INFINITY; t++) {
            const int j = t < L.nf ? L.f[t] : L.p[t - L.nf];
            if (j < 0 || j >= a.nb) continue;
            const int64_t kb0 = (int64_t)j * a.block_k, kb1 = min(kb0 + a.block_k - 1, kmax);
            for (int64_t key = kb0; key <= kb1; key++) {
                const T *kr = kg + key * a.k_ss, *vr = vg + key * a.v_ss;
                float sp = 0.0f, dpp = 0.0f;
#pragma unroll
                for (int u = 0; u < PER; u++) {
                    const int d = lane + 32 * u;
                    if (d < a.dim) {
                        sp += qv[u] * bsk_tof(kr[d]);
                        dpp += gv[u] * bsk_tof(vr[d]);
                    }
                }
#pragma unroll
                for (int x = 16; x > 0; x >>= 1) {
                    sp += __shfl_xor_sync(0xffffffffu, sp, x);
                    dpp += __shfl_xor_sync(0xffffffffu, dpp, x);
                }
                const float ds = exp2f(sp * a.scale_log2 + nl) * (dpp - dl);
#pragma unroll
                for (int u = 0; u < PER; u++) {
                    const int d = lane + 32 * u;
                    if (d < a.dim) acc[u] += ds * bsk_tof(kr[d]);
                }
            }
        }
        T *out = reinterpret_cast<T *>(a.dq) + b * a.dq_sb + q * a.dq_ss + h * a.dq_sh;
#pragma unroll
        for (int u = 0; u < PER; u++) {
            const int d = lane + 32 * u;
            if (d < a.dim) st_el(out + d, acc[u] * a.scale);
        }
    }
}

template <typename T>
__global__ void __launch_bounds__(128, 1) bwd_dkdv_simt(const BwdArgs a, int64_t rows)
{
    const int lane = threadIdx.x & 31;
    for (int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < rows;
         w += ((int64_t)gridDim.x * blockDim.x) >> 5) {
        const int64_t key = w % a.seq_k, bh = w / a.seq_k;
        const int hk = (int)(bh % a.kv_heads), b = (int)(bh / a.kv_heads), j = (int)(key / a.block_k);
        const int64_t kv_len = kv_len_of(a, b);
        const T *kr = reinterpret_cast<const T *>(a.k) + b * a.k_sb + key * a.k_ss + hk * a.k_sh;
        const T *vr = reinterpret_cast<const T *>(a.v) + b * a.v_sb + key * a.v_ss + hk * a.v_sh;
        float kv[PER], vv[PER], dk[PER], dv[PER];
#pragma unroll
        for (int u = 0; u < PER; u++) {
            const int d = lane + 32 * u;
            kv[u] = d < a.dim ? bsk_tof(kr[d]) : 0.0f;
            vv[u] = d < a.dim ? bsk_tof(vr[d]) : 0.0f;
            dk[u] = dv[u] = 0.0f;
        }
        for (int hh = 0; hh < a.group && key < kv_len; hh++) {
            const int64_t h = (int64_t)hk * a.group + hh;
            const T *qg = reinterpret_cast<const T *>(a.q) + b * a.q_sb + h * a.q_sh;
            const T *gg = reinterpret_cast<const T *>(a.g) + b * a.g_sb + h * a.g_sh;
            int64_t e0, e1;
            t_range(a, layout_of(a, b, h) * a.nb + j, e0, e1);
            for (int64_t e = e0; e < e1; e++) {
                const int64_t qb0 = (int64_t)t_at(a, e) * a.block_q, qb1 = min(qb0 + a.block_q, a.seq_q);
                const int64_t qs = a.causal ? max(qb0, key - a.off) : qb0; /* q sees key iff key <= q + off */
                for (int64_t q = qs; q < qb1; q++) {
                    const int64_t row = ((int64_t)b * a.heads + h) * a.seq_q + q;
                    const float nl = a.nl2[row];
                    if (nl == -INFINITY) continue;
                    const T *qr = qg + q * a.q_ss, *gr = gg + q * a.g_ss;
                    float sp = 0.0f, dpp = 0.0f;
#pragma unroll
                    for (int u = 0; u < PER; u++) {
                        const int d = lane + 32 * u;
                        if (d < a.dim) {
                            sp += kv[u] * bsk_tof(qr[d]);
                            dpp += vv[u] * bsk_tof(gr[d]);
                        }
                    }
#pragma unroll
                    for (int x = 16; x > 0; x >>= 1) {
                        sp += __shfl_xor_sync(0xffffffffu, sp, x);
                        dpp += __shfl_xor_sync(0xffffffffu, dpp, x);
                    }
                    const float pv = exp2f(sp * a.scale_log2 + nl), ds = pv * (dpp - a.delta[row]);
#pragma unroll
                    for (int u = 0; u < PER; u++) {
                        const int d = lane + 32 * u;
                        if (d < a.dim) {
                            dv[u] += pv * bsk_tof(gr[d]);
                            dk[u] += ds * bsk_tof(qr[d]);
                        }
                    }
                }
            }
        }
        T *dko = reinterpret_cast<T *>(a.dk) + b * a.dk_sb + key * a.dk_ss + hk * a.dk_sh;
        T *dvo = reinterpret_cast<T *>(a.dv) + b * a.dv_sb + key * a.dv_ss + hk * a.dv_sh;
#pragma unroll
        for (int u = 0; u < PER; u++) {
            const int d = lane + 32 * u;
            if (d < a.dim) {
                st_el(dko + d, dk[u] * a.scale);
                st_el(dvo + d, dv[u]);
            }
        }
    }
}

/* ---- launches */
template <typename T, int D>
bsk_status launch_mma(const BwdArgs &a, int64_t nqc, int64_t nkc, cudaStream_t stream)
{
    const int smem_kv = (2 * 64 * D + 4 * 64 * D) * 2 + 4 * 64 * 4, smem_q = (2 * 64 * D + 4 * 64 * D) * 2;
    static int opted = 0; /* once per instantiation (one process, one device in practice) */
    if (!opted) {
        bsk_status s = opt_in(bwd_dkdv_mma<T, D>, smem_kv);
        if (!s) s = opt_in(bwd_dq_mma<T, D>, smem_q);
        if (s) return s;
        opted = 1;
    }
    int64_t n_kv = (int64_t)a.batch * a.kv_heads * nkc, n_q = (int64_t)a.batch * a.heads * nqc;
    if (n_kv > 0) bwd_dkdv_mma<T, D><<<(unsigned)n_kv, 128, smem_kv, stream>>>(a);
    if (n_q > 0) bwd_dq_mma<T, D><<<(unsigned)n_q, 128, smem_q, stream>>>(a, (int)nqc);
    return BSK_CUDA_LAUNCH_CHECK();
}

template <typename T>
bsk_status launch_simt(const BwdArgs &a, cudaStream_t stream)
{
    int64_t rq = (int64_t)a.batch * a.heads * a.seq_q, rk = (int64_t)a.batch * a.kv_heads * a.seq_k;
    int64_t bq = (rq + 3) / 4, bk = (rk + 3) / 4;
    if (bq > (1 << 20)) bq = 1 << 20; /* grid-stride beyond */
    if (bk > (1 << 20)) bk = 1 << 20;
    if (rk > 0) bwd_dkdv_simt<T><<<(unsigned)bk, 128, 0, stream>>>(a, rk);
    if (rq > 0) bwd_dq_simt<T><<<(unsigned)bq, 128, 0, stream>>>(a, rq);
    return BSK_CUDA_LAUNCH_CHECK();
}

template <typename T>
void launch_prep(const BwdArgs &a, int64_t rows, cudaStream_t stream)
{
    int64_t blocks = (rows + 7) / 8;
    if (blocks > (1 << 20)) blocks = 1 << 20;
    bwd_prep<T><<<(unsigned)blocks, 256, 0, stream>>>(a, rows);
}

size_t up16(size_t x) { return (x + 15) & ~(size_t)15; }

} // namespace

extern "C" bsk_status bsk_cuda_attention_backward(bsk_context *ctx, const bsk_attention_bwd_params *p, const bsk__attn_dims *d)
{
    struct bsk_cuda_state *st = bsk_cuda_state_get(ctx);
    if (!st) return BSK_ERR_OUT_OF_MEMORY;
    const bsk_attn_layout *L = p->layout;
    if (d->batch > INT32_MAX || d->heads > INT32_MAX || d->kv_heads > INT32_MAX || d->mq > INT32_MAX || d->nb > INT32_MAX)
        return BSK_ERR_UNSUPPORTED;
    const int64_t lrows = (int64_t)L->batch * L->heads, cols = lrows * d->nb, nrows = d->batch * d->heads * d->seq_q;
    /* entries of the transposed layout: at most one per kept tile, and at most mq per column */
    int64_t t_total = lrows * d->mq * (d->nb < 2 * (int64_t)L->capacity ? d->nb : 2 * (int64_t)L->capacity);
    if (t_total > INT32_MAX || cols + 1 > INT32_MAX) return BSK_ERR_UNSUPPORTED;

    BwdArgs a;
    attn_args_fill(a, p, d);
    a.g = p->d_o.data;
    a.dq = p->dq.data; a.dk = p->dk.data; a.dv = p->dv.data; a.lse = p->lse; a.d_lse = p->d_lse;
    a.g_sb = p->d_o.stride_batch; a.g_ss = p->d_o.stride_seq; a.g_sh = p->d_o.stride_head;
    a.dq_sb = p->dq.stride_batch; a.dq_ss = p->dq.stride_seq; a.dq_sh = p->dq.stride_head;
    a.dk_sb = p->dk.stride_batch; a.dk_ss = p->dk.stride_seq; a.dk_sh = p->dk.stride_head;
    a.dv_sb = p->dv.stride_batch; a.dv_ss = p->dv.stride_seq; a.dv_sh = p->dv.stride_head;
    a.kv_heads = (int)d->kv_heads;
    a.scale = d->scale;
    a.t_total = t_total;
    cudaStream_t stream = (cudaStream_t)ctx->stream;

    /* workspace: nl2 | delta | counts (cols+1) | t_ptr (cols+1) | t_idx */
    const size_t fbytes = up16((size_t)(nrows + 1) * sizeof(float)), cbytes = up16((size_t)(cols + 1) * sizeof(int32_t));
    const size_t bytes = 2 * fbytes + 2 * cbytes + up16((size_t)(t_total + 1) * sizeof(int32_t));
    void *ws = NULL;
    bsk_status s = bsk_cuda_workspace(ctx, bytes, &ws);
    if (s) return s;
    char *w = (char *)ws;
    a.nl2 = (float *)w;
    a.delta = (float *)(w + fbytes);
    int32_t *cnt = (int32_t *)(w + 2 * fbytes), *t_ptr = (int32_t *)(w + 2 * fbytes + cbytes);
    int32_t *t_idx = (int32_t *)(w + 2 * fbytes + 2 * cbytes);
    a.t_ptr = t_ptr;
    a.t_idx = t_idx;

    if (nrows > 0) {
        if (p->q.dtype == BSK_F16) launch_prep<__half>(a, nrows, stream);
        else if (p->q.dtype == BSK_BF16) launch_prep<__nv_bfloat16>(a, nrows, stream);
        else launch_prep<float>(a, nrows, stream);
    }
    if (cols > 0) {
        unsigned g = (unsigned)((cols + 127) / 128);
        bwd_tcount<<<g, 128, 0, stream>>>(a, cols, cnt);
        if ((s = BSK_CUDA_LAUNCH_CHECK())) return s;
        if ((s = bsk_cuda_exclusive_scan_i32(cnt, t_ptr, cols, stream))) return s;
        bwd_tfill<<<g, 128, 0, stream>>>(a, cols, t_idx);
    }
    if ((s = BSK_CUDA_LAUNCH_CHECK())) return s;

    const bsk_attn_tensor *ts[7] = {&p->q, &p->k, &p->v, &p->d_o, &p->dq, &p->dk, &p->dv};
    int vec_ok = 1;
    for (int t = 0; t < 7; t++) vec_ok &= row_ok(ts[t]);
    const int64_t nqc = (d->seq_q + 63) / 64, nkc = (d->seq_k + 63) / 64;
    const int mma_ok = !bsk__attn_simt_forced && st->cc_major >= 8 && p->q.dtype != BSK_F32 &&
                       (d->dim == 64 || d->dim == 128) && L->block_q % 64 == 0 && L->block_k % 64 == 0 && vec_ok &&
                       d->batch * d->heads * nqc <= INT32_MAX && d->batch * d->kv_heads * nkc <= INT32_MAX;
    if (mma_ok) {
        ctx->last_kernel = "cuda-attention-bwd-mma";
        if (p->q.dtype == BSK_F16)
            return d->dim == 64 ? launch_mma<__half, 64>(a, nqc, nkc, stream) : launch_mma<__half, 128>(a, nqc, nkc, stream);
        return d->dim == 64 ? launch_mma<__nv_bfloat16, 64>(a, nqc, nkc, stream)
                            : launch_mma<__nv_bfloat16, 128>(a, nqc, nkc, stream);
    }
    ctx->last_kernel = "cuda-attention-bwd-simt";
    if (p->q.dtype == BSK_F16) return launch_simt<__half>(a, stream);
    if (p->q.dtype == BSK_BF16) return launch_simt<__nv_bfloat16>(a, stream);
    return launch_simt<float>(a, stream);
}

/* attention_kernel.cuh — the Hopper (sm_90a) block-sparse attention forward kernel, FlashAttention-3 structure.

   Work item = (batch, head, 128-row query block). A persistent grid of one CTA per SM takes items from an
   atomic counter in this order: (b, h) major so that CTAs running together share K and V in L2, each head's
   longest query blocks first when causal. 384 threads in three warpgroups:
     - WG0, the producer (setmaxnreg.dec): one warp (two with ATTN_SPLIT, below). Per item: compacts the query block's kept key tiles
       (the layout's full list, then its partial list, as attention_fwd.cu walks them; tiles out of range or
       entirely masked by kv_len / causality are dropped) into shared memory, TMA-loads the Q tile into one of
       two Q buffers (issued before the list is read; the next item's Q lands while the current one is still
       computed) and publishes an item record, then TMA-loads each K tile and V tile (128 keys x D, 128-byte
       swizzled 64-column panels) into STAGES-deep rings, K and V on separate mbarriers so S = Q·Kᵀ can start before V has landed; the
       tile's key start travels with the K stage. A V tile that crosses a per-batch key length is zeroed
       past it before the consumers see it (the rows are real memory the caller may not have initialised;
       P there is 0, but 0 · NaN is not).
     - WG1, WG2, the consumers (setmaxnreg.inc): 64 query rows each. Per key tile t one "slot" issues
       S_t = Q·K_tᵀ (wgmma m64n128k16, both operands K-major from shared memory) and, behind it,
       O += P_{t-1}·V_{t-1} (wgmma m64nDk16 with P as the A operand in registers, V N-major from shared
       memory); then the softmax of S_t runs while the P·V GEMM is still in the tensor cores (FA3's
       intra-warpgroup overlap — only with ATTN_OV: without it ptxas hoists the P·V wait above the softmax).
       With the ping-pong (the builds without ATTN_NP) the two consumers take turns issuing (two named
       barriers, as FA3), so one warpgroup's softmax overlaps the other's GEMMs; both defaults now issue
       without turns (ATTN_NP: the tensor pipe interleaves the two warpgroups' GEMMs by itself), measured faster
       at D=64 with early waits (ATTN_EW, session 7) and at D=128 (session 11, +2 % on an H200).
   Softmax is online, fp32, in base 2 with the scale folded into one FFMA (the launcher only sends
   positive scales here), exactly the masking rule of attention_fwd.cu: inside a tile that crosses kv_len
   or the causal diagonal, key x is hidden from row y iff x >= kv_len - k0 or (causal) x > y + q0 + off - k0.
   A row with nothing visible keeps m = -inf, l = 0 and ends with O = 0, LSE = -inf.
   Epilogue: each consumer normalises its 64 rows, writes LSE, stages O (16-bit, swizzled) over its own rows
   of the item's Q buffer and TMA-stores it (rows past seq_q are clipped by the tensor map); the buffer goes
   back to the producer once the store has read it.
   Malformed device layouts: counts are clamped to [0, capacity], key blocks outside [0, nb) are dropped, and
   at most MAXT tiles are kept (the launcher guarantees 2·capacity <= MAXT), so nothing is read or written
   out of bounds. */
#ifndef BSK_HOPPER_ATTENTION_KERNEL_CUH
#define BSK_HOPPER_ATTENTION_KERNEL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda.h>
#include <math.h>
#include "ptx.cuh"
#include "../../internal.h" /* bsk_dtype values as template arguments */

namespace bsk_hopper {

/* Plain parameters (the tensor maps travel as __grid_constant__ kernel arguments). */
struct AttnHParams {
    float *lse;
    const int32_t *full_count, *full_idx, *part_count, *part_idx, *kv_lens;
    int64_t off;
    int seq_q, seq_k;
    int heads, group, mq, nb, cap, lay_b, lay_h, causal;
    float scale_log2; /* scale · log2(e) > 0 */
    unsigned *counter;  /* work queue: [0] head, [1] CTAs done; both 0 at the launch, the last CTA resets them */
    unsigned total;     /* items: batch * heads * mq */
};

/* Shared-memory plan: two Q buffers, K ring, V ring (each tile = D/64 panels of 128 rows x 128 bytes, 16 KB
   per panel), the barriers, two item records, the key start of each K stage, the producer's tile list. */
template <int D_, int STAGES_> struct AttnCfg {
    static constexpr int D = D_;
    static constexpr int STAGES = STAGES_;
    static constexpr int PANELS = D_ / 64;
    static constexpr int PANEL = 16384;                  /* 128 rows x 64 elements x 2 bytes */
    static constexpr int TILE = PANELS * PANEL;          /* bytes of a 128-row tile          */
    static constexpr int Q_OFF = 0;                      /* two Q buffers                    */
    static constexpr int K_OFF = 2 * TILE;
    static constexpr int V_OFF = K_OFF + STAGES_ * TILE;
    /* barriers: qfull[2], qempty[2], aux, kfull[S], kempty[S], vfull[S], vempty[S] */
    static constexpr int BAR_OFF = V_OFF + STAGES_ * TILE;
    static constexpr int REC_OFF = BAR_OFF + ((5 + 4 * STAGES_) * 8 + 15) / 16 * 16; /* 2 x int4 x 2 */
    static constexpr int KMETA_OFF = REC_OFF + 64;       /* int per K stage                   */
    static constexpr int MAXT = 2048;                    /* tiles per query block             */
    static constexpr int LIST_OFF = KMETA_OFF + (STAGES_ * 4 + 15) / 16 * 16;
    static constexpr int SMEM = LIST_OFF + 2 * MAXT * 4 + 1024; /* two lists (SPLIT); + slack to align to 1024 */
    static constexpr int THREADS = 384;
};

/* Registers per thread after setmaxnreg (the CTA got 384 x 168 at launch). */
constexpr int ATTN_PRODUCER_REGS = 56, ATTN_CONSUMER_REGS = 224;
static_assert(128 * ATTN_PRODUCER_REGS + 256 * ATTN_CONSUMER_REGS <= 384 * 168, "register budget");

template <int DT> struct AttnOps;
template <> struct AttnOps<BSK_F16> {
    static __device__ __forceinline__ uint32_t pack(float a, float b)
    {
        __half2 h = __floats2half2_rn(a, b); /* a in the low half: the lower column */
        return *reinterpret_cast<uint32_t *>(&h);
    }
    static __device__ __forceinline__ void qk(float *s, uint64_t da, uint64_t db, int acc)
    {
        wgmma_m64n128k16_f16<0, 0>(s, da, db, acc);
    }
    template <int D>
    static __device__ __forceinline__ void pv(float *o, uint32_t *pa, uint64_t db)
    {
        if (D == 128) wgmma_m64n128k16_rs_f16<1>(o, pa[0], pa[1], pa[2], pa[3], db, 1);
        else wgmma_m64n64k16_rs_f16<1>(o, pa[0], pa[1], pa[2], pa[3], db, 1);
    }
};
template <> struct AttnOps<BSK_BF16> {
    static __device__ __forceinline__ uint32_t pack(float a, float b)
    {
        __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
        return *reinterpret_cast<uint32_t *>(&h);
    }
    static __device__ __forceinline__ void qk(float *s, uint64_t da, uint64_t db, int acc)
    {
        wgmma_m64n128k16_bf16<0, 0>(s, da, db, acc);
    }
    template <int D>
    static __device__ __forceinline__ void pv(float *o, uint32_t *pa, uint64_t db)
    {
        if (D == 128) wgmma_m64n128k16_rs_bf16<1>(o, pa[0], pa[1], pa[2], pa[3], db, 1);
        else wgmma_m64n64k16_rs_bf16<1>(o, pa[0], pa[1], pa[2], pa[3], db, 1);
    }
};

__device__ __forceinline__ float attn_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); /* ex2(-inf) = +0, as the masking relies on */
    return y;
}

/* Kernel options (template flags; bsk__attn_variant picks them, attention_hopper.cu):
   ATTN_XB — the ping-pong runs on across items: each warpgroup's slot ends by opening the other's turn, WG2's
             last slot of an item included, so WG1 issues the next item's S_0 while WG2 is still in its epilogue
             (without it WG2 opens WG1's first turn of every item only after its own epilogue);
   ATTN_LR — lazy rescale: a row's reference max moves only when the tile's max exceeds it by more than
             ATTN_LR_TH (log2 units; then P <= 2^TH, exact after the final 1/l), and O *= alpha is skipped when
             no row of the warp moved (after the first tiles: almost always);
   ATTN_SPLIT — producer warp 1 issues the V tiles (from the item record and a per-item list buffer), warp 0
             the K tiles, so K_{t+2} no longer waits behind V_{t+1}'s free stage (one warp: K and V in turn);
   ATTN_OV — the warp vote on alpha (O needs no rescale when no row of the warp moved its max) and its branch
             come between the softmax and the wait for P·V_{t-1}: the branch ends the basic block, so ptxas can no
             longer hoist that wait (it has no register inputs) to the top of the softmax's block, which it does
             otherwise (SASS: WARPGROUP.DEPBAR.LE gsb0, 0x0 before the first FMNMX) and which serialises the
             softmax behind this warpgroup's own P·V: FA3's intra-warpgroup overlap, made real;
   ATTN_DT — fewer instructions per tile (issue slots bind at D=64): the shared-memory pointer keeps its address
             space (the record / key-start / list reads are LDS, not generic loads with an address conversion),
             wgmma descriptors are one 64-bit value per tile plus immediates (not five uniform ops per wgmma),
             and whether a tile needs the element mask is one 32-bit compare against a per-item bound;
   ATTN_TR — the row max and the row sum of a tile as trees (four partial chains per row, then combined)
             instead of one dependent chain of 16 per row: at D=64 ncu reports dependency waits as the largest
             stall, and the max chain sits before the first exponential;
   ATTN_NP — no ping-pong: the consumer warpgroups issue their GEMMs whenever their data is there (the tensor
             pipe interleaves them), no named-barrier turns;
   ATTN_EW — early waits: the waits for the next slot's K tile (and its key start) and for the V tile of the
             P·V the next slot issues sit right after this slot's GEMMs are issued, where the warpgroup waits for
             them anyway, so the loop top is only the turn's barrier (session 7: a %clock trace of the slots
             showed ~240-320 cycles per slot between the pack and the next issue, on each warpgroup's critical
             path). With NP (no turns at all), the D=64 default: +3 to +4 % non-causal, +6 % causal over XB alone
             (H100, session 7, final run); at D=128 (2 stages) the early V wait serialises the warpgroups, hence
             STAGES >= 3.
   ATTN_UC — the consumer index through a warp reduction (a uniform register to the compiler), so the Q-tile
             descriptors derived from it stay in uniform registers: without it each S wgmma's descriptor took a
             64-bit add in per-thread registers and two R2UR (session 14; the same change gave the small-block
             SpMM +5-7 %; here D=64 dense +1.6 %, D=128 +0.3-0.8 %, H200). */
constexpr int ATTN_XB = 1, ATTN_LR = 2, ATTN_SPLIT = 4, ATTN_OV = 8, ATTN_DT = 16, ATTN_TR = 32, ATTN_NP = 64,
              ATTN_EW = 128, ATTN_UC = 256;
constexpr float ATTN_LR_TH = 8.0f;

template <int DT, int D, int STAGES, int OPT>
__global__ void __launch_bounds__(384, 1)
    attn_hopper_kernel(const __grid_constant__ CUtensorMap tmQ, const __grid_constant__ CUtensorMap tmK,
                       const __grid_constant__ CUtensorMap tmV, const __grid_constant__ CUtensorMap tmO,
                       const AttnHParams p)
{
    typedef AttnCfg<D, STAGES> CF;
    /* EW waits for V_t in slot t, right after its issue: with 2 stages V_t's stage is V_{t-2}'s, which the other
       warpgroup frees only at the end of its slot t-1, so the warpgroups would wait for each other (measured
       -37 % at D=128 with V released one slot later still) */
    static_assert(!(OPT & ATTN_EW) || STAGES >= 3, "ATTN_EW needs 3 or more stages");
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = (OPT & ATTN_DT) ? smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u)
                                    : (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    const uint32_t sb = smem_u32(smem);
    const uint32_t qfull0 = sb + CF::BAR_OFF, qempty0 = qfull0 + 16, aux = qfull0 + 32, kfull0 = qfull0 + 40,
                   kempty0 = kfull0 + 8 * STAGES, vfull0 = kempty0 + 8 * STAGES, vempty0 = vfull0 + 8 * STAGES;
    int4 *rec = (int4 *)(smem + CF::REC_OFF); /* item record u: rec[2u] = {b, h, i, nt (-1: end)}, rec[2u+1].x = kv_len */
    int *kmeta = (int *)(smem + CF::KMETA_OFF);
    int *tlist = (int *)(smem + CF::LIST_OFF);
    const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
    const int mq = p.mq;

    if (tid == 0) {
        for (int u = 0; u < 2; ++u) {
            /* every lane of the producer warp arrives: lanes wrote the tile list the V warp reads (each write
               released by its own lane's arrival), lane 0 the record and the Q tile's bytes */
            mbar_init(qfull0 + 8 * u, 32);
            /* one arrival per consumer warp once it has read the record (its lane 0, the lane that read it),
               and one per consumer warpgroup once its O store has read the Q buffer */
            mbar_init(qempty0 + 8 * u, 8 + 2 + ((OPT & ATTN_SPLIT) ? 1 : 0)); /* + the V warp (SPLIT) */
        }
        mbar_init(aux, 1);
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(kfull0 + 8 * s, 1);
            mbar_init(kempty0 + 8 * s, 8); /* one arrival per consumer warp */
            mbar_init(vfull0 + 8 * s, 1);
            mbar_init(vempty0 + 8 * s, 8);
        }
        mbar_init_fence();
        tma_prefetch_desc(&tmQ);
        tma_prefetch_desc(&tmK);
        tma_prefetch_desc(&tmV);
        tma_prefetch_desc(&tmO);
    }
    __syncthreads();
    /* Programmatic dependent launch (the launcher sets the attribute): everything above is the CTA's own setup;
       from here on it reads what an earlier kernel on the stream may write (Q, K, V, the layout, kv_lens, the
       queue) and writes what it may still read (O, LSE). A no-op without a PDL predecessor. */
    grid_dep_wait();

    if (wg == 0) {
        /* ------------------------------------------------------------ producer */
        setmaxnreg_dec<ATTN_PRODUCER_REGS>();
        uint32_t aph = 0; /* aux phase */
        /* V tile of ring stage s at key k0 (whole warp: the zeroing past kv_len uses every lane) */
        auto issue_v = [&](int s, int k0, int hk, int b, int kv_len) {
            const uint32_t vdst = sb + CF::V_OFF + s * CF::TILE;
            /* Rows in [kv_len, seq_k) are the caller's memory past the key length: zero them in V. (Rows
               past seq_k come back as zeros from TMA; K needs nothing: S there is replaced by -inf.) */
            const bool cut = kv_len < p.seq_k && k0 + 128 > kv_len;
            if (!cut) {
                if (lane == 0) {
                    mbar_arrive_expect_tx(vfull0 + 8 * s, CF::TILE);
#pragma unroll
                    for (int pn = 0; pn < CF::PANELS; ++pn)
                        tma_load_4d(vdst + pn * CF::PANEL, &tmV, vfull0 + 8 * s, 64 * pn, k0, hk, b);
                }
            } else {
                if (lane == 0) {
                    mbar_arrive_expect_tx(aux, CF::TILE);
#pragma unroll
                    for (int pn = 0; pn < CF::PANELS; ++pn)
                        tma_load_4d(vdst + pn * CF::PANEL, &tmV, aux, 64 * pn, k0, hk, b);
                }
                mbar_wait(aux, aph);
                aph ^= 1u;
                const int r0 = kv_len - k0;     /* 1..127: rows r0..127 are zeroed       */
                const int per = (128 - r0) * 8; /* 16-byte pieces per panel (whole rows) */
                for (int x = lane; x < per * CF::PANELS; x += 32) {
                    const int pn = x / per, rem = x - pn * per;
                    const uint32_t a = vdst + pn * CF::PANEL + r0 * 128 + rem * 16;
                    asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(a), "r"(0u) : "memory");
                }
                fence_proxy_async_smem(); /* the generic stores, before wgmma (async proxy) reads them */
                __syncwarp();
                if (lane == 0) mbar_arrive(vfull0 + 8 * s);
            }
        };
        if (warp == 0) {
            uint32_t kt = 0; /* K/V tiles issued so far (ring position) */
            /* items: the queue (taken one ahead, so its latency hides behind the current item) */
            unsigned item = lane == 0 ? atomicAdd(p.counter, 1u) : 0u;
            item = __shfl_sync(0xffffffffu, item, 0);
            for (uint32_t n = 0;; ++n) {
                const uint32_t u = n & 1u, uph = (n >> 1) & 1u;
                unsigned next = p.total;
                if (item < p.total) {
                    next = lane == 0 ? atomicAdd(p.counter, 1u) : 0u;
                    next = __shfl_sync(0xffffffffu, next, 0);
                }
                mbar_wait(qempty0 + 8 * u, uph ^ 1u); /* Q buffer, record u and its list are free (every lane: each writes the list) */
                __syncwarp();
                if (item >= p.total) {
                    if (lane == 0) rec[2 * u] = make_int4(0, 0, 0, -1);
                    mbar_arrive(qfull0 + 8 * u);
                    /* this CTA's last fetch is done: the last CTA to get here resets the queue for the next
                       launch (no memset between an earlier kernel and this one: it would break the PDL chain) */
                    if (lane == 0) queue_done_reset<1, 1u>(p.counter, gridDim.x);
                    break;
                }
                const int bh = (int)(item / (unsigned)mq), ii = (int)(item % (unsigned)mq);
                const int i = p.causal ? mq - 1 - ii : ii;
                const int h = bh % p.heads, b = bh / p.heads, hk = h / p.group;
                const int q0 = i * 128, q_last = min(q0 + 128, p.seq_q) - 1;
                if (lane == 0) {
                    /* the Q tile first (it depends on nothing loaded): its bytes are announced now, the arrival
                       that publishes the record below comes after the record is written. Rows past seq_q are
                       zero-filled by TMA; their results are never stored. */
                    mbar_expect_tx(qfull0 + 8 * u, CF::TILE);
#pragma unroll
                    for (int pn = 0; pn < CF::PANELS; ++pn)
                        tma_load_4d(sb + CF::Q_OFF + u * CF::TILE + pn * CF::PANEL, &tmQ, qfull0 + 8 * u, 64 * pn, q0, h, b);
                }
                const int kv_len = p.kv_lens ? min(max(p.kv_lens[b], 0), p.seq_k) : p.seq_k;
                /* Compact the kept tiles, in list order: full list, then partial list. */
                const int64_t row = ((int64_t)(p.lay_b == 1 ? 0 : b) * p.lay_h + (p.lay_h == 1 ? 0 : h)) * mq + i;
                const int nf = min(max(p.full_count[row], 0), p.cap), np = min(max(p.part_count[row], 0), p.cap);
                const int32_t *fl = p.full_idx + row * p.cap, *pl = p.part_idx + row * p.cap;
                int nt = 0;
                int *tl = tlist + ((OPT & ATTN_SPLIT) ? u * CF::MAXT : 0u);
                for (int base = 0; base < nf + np; base += 32) {
                    const int t = base + lane;
                    int j = -1;
                    if (t < nf) j = fl[t];
                    else if (t < nf + np) j = pl[t - nf];
                    bool ok = j >= 0 && j < p.nb;
                    if (ok) {
                        const int k0 = j * 128;
                        ok = k0 < kv_len && !(p.causal && (int64_t)k0 > (int64_t)q_last + p.off);
                    }
                    const unsigned bal = __ballot_sync(0xffffffffu, ok);
                    const int pos = nt + __popc(bal & ((1u << lane) - 1u));
                    if (ok && pos < CF::MAXT) tl[pos] = j;
                    nt += __popc(bal);
                }
                nt = min(nt, CF::MAXT);
                __syncwarp();
                if (lane == 0) {
                    rec[2 * u] = make_int4(b, h, i, nt); /* published by the arrivals (release) */
                    rec[2 * u + 1] = make_int4(kv_len, 0, 0, 0);
                }
                mbar_arrive(qfull0 + 8 * u);
                for (int t = 0; t < nt; ++t, ++kt) {
                    const int s = (int)(kt % STAGES);
                    const uint32_t ph = (kt / STAGES) & 1u;
                    const int k0 = tl[t] * 128;
                    const uint32_t kdst = sb + CF::K_OFF + s * CF::TILE;
                    if (lane == 0) {
                        mbar_wait(kempty0 + 8 * s, ph ^ 1u);
                        kmeta[s] = k0; /* read by the consumers before they release the stage */
                        mbar_arrive_expect_tx(kfull0 + 8 * s, CF::TILE);
#pragma unroll
                        for (int pn = 0; pn < CF::PANELS; ++pn)
                            tma_load_4d(kdst + pn * CF::PANEL, &tmK, kfull0 + 8 * s, 64 * pn, k0, hk, b);
                        if (!(OPT & ATTN_SPLIT)) mbar_wait(vempty0 + 8 * s, ph ^ 1u);
                    }
                    __syncwarp();
                    if (!(OPT & ATTN_SPLIT)) issue_v(s, k0, hk, b, kv_len);
                }
                item = next;
            }
        } else if ((OPT & ATTN_SPLIT) && warp == 1) {
            /* V tiles: the item records as the consumers see them, the list buffer of the record */
            uint32_t vt = 0;
            for (uint32_t n = 0;; ++n) {
                const uint32_t u = n & 1u;
                mbar_wait(qfull0 + 8 * u, (n >> 1) & 1u);
                const int4 r0 = stage_record_read(rec + 2 * u, lane);
                const int4 r1 = stage_record_read(rec + 2 * u + 1, lane);
                if (r0.w < 0) break;
                const int b = r0.x, hk = r0.y / p.group, nt = r0.w, kv_len = r1.x;
                const int *tl = tlist + u * CF::MAXT;
                /* lane 0 reads the list (and releases record and list with its qempty arrival after the
                   last read): one reading lane, ordered by its own arrival */
                for (int t = 0; t < nt; ++t, ++vt) {
                    const int s = (int)(vt % STAGES);
                    const uint32_t ph = (vt / STAGES) & 1u;
                    const int k0 = stage_word_read(&tl[t], lane) * 128;
                    if (lane == 0) mbar_wait(vempty0 + 8 * s, ph ^ 1u);
                    __syncwarp();
                    issue_v(s, k0, hk, b, kv_len);
                }
                if (lane == 0) mbar_arrive(qempty0 + 8 * u); /* record u and its list read */
            }
        }
    } else {
        /* ------------------------------------------------------------ consumers */
        setmaxnreg_inc<ATTN_CONSUMER_REGS>();
        const int c = (OPT & ATTN_UC) ? (int)__reduce_or_sync(0xffffffffu, (unsigned)(wg - 1)) : wg - 1;
        const int tw = tid & 127, g = lane >> 2, tq = lane & 3;
        const int bar_mine = 1 + c, bar_other = 2 - c;
        float o[D / 2];
        float sa[64];
        uint32_t pa[32];
        float m[2], l[2];
        int q0 = 0, kv_len = 0;
        uint32_t qa = 0;
        uint64_t qdesc = 0; /* DT: the descriptor of qa */
        int mthr = 0;       /* DT: a tile at key k0 needs the element mask iff k0 > mthr */
        const int yb = 64 * c + 16 * warp + g; /* this thread's rows yb and yb + 8 of the query tile */
#pragma unroll
        for (int x = 0; x < 32; ++x) pa[x] = 0u;
#pragma unroll
        for (int x = 0; x < 64; ++x) sa[x] = 0.0f;

        /* The slot pieces; t counts K/V tiles over the CTA's items (the ring position). Issue: S_t = Q·K_tᵀ into
           sa (scale_d 0 on the first k step), O += P·V_t from pa. */
        auto issue_s = [&](uint32_t t) {
            const uint32_t ka = sb + CF::K_OFF + (t % STAGES) * CF::TILE;
            const uint64_t kdesc = smem_desc(ka, 16, 1024);
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk) {
                const uint32_t off = (uint32_t)(kk >> 2) * CF::PANEL + (uint32_t)(kk & 3) * 32u;
                /* DT: the start-address field (bits 0-13, address >> 4) takes the offset as an addend: every
                   address stays below 2^18, so nothing carries out of the field */
                if (OPT & ATTN_DT)
                    AttnOps<DT>::qk(sa, qdesc + (off >> 4), kdesc + (off >> 4), kk > 0 ? 1 : 0);
                else
                    AttnOps<DT>::qk(sa, smem_desc(qa + off, 16, 1024), smem_desc(ka + off, 16, 1024), kk > 0 ? 1 : 0);
            }
            wgmma_commit();
        };
        auto issue_pv = [&](uint32_t t) {
            const uint32_t va = sb + CF::V_OFF + (t % STAGES) * CF::TILE;
            const uint64_t vdesc = smem_desc(va, CF::PANEL, 1024);
#pragma unroll
            for (int kk = 0; kk < 8; ++kk) {
                if (OPT & ATTN_DT) AttnOps<DT>::template pv<D>(o, pa + 4 * kk, vdesc + (uint64_t)(kk * 128));
                else AttnOps<DT>::template pv<D>(o, pa + 4 * kk, smem_desc(va + kk * 2048u, CF::PANEL, 1024));
            }
            wgmma_commit();
        };
        /* K tile t has landed; its key start (read before the stage is released) */
        auto wait_k = [&](uint32_t t) -> int {
            mbar_wait(kfull0 + 8 * (t % STAGES), (t / STAGES) & 1u);
            return stage_word_read(&kmeta[t % STAGES], lane); /* lane 0: the lane that releases the stage */
        };
        auto wait_v = [&](uint32_t t) { mbar_wait(vfull0 + 8 * (t % STAGES), (t / STAGES) & 1u); };
        auto release = [&](uint32_t bar0, uint32_t t) {
            __syncwarp();
            if (lane == 0) mbar_arrive(bar0 + 8 * (t % STAGES));
        };
        /* S (landed) of the tile at key k0 -> mask, online softmax: sa becomes exp values, m and l updated,
           alpha the O rescale. */
        auto softmax = [&](int k0, float *alpha) {
#pragma unroll
            for (int x = 0; x < 64; ++x) reg_fence(sa[x]);
            const bool need_mask = (OPT & ATTN_DT) ? k0 > mthr
                                                   : k0 + 128 > kv_len || (p.causal && (int64_t)k0 + 127 > (int64_t)q0 + p.off);
            if (need_mask) {
                const int kv_lim = kv_len - k0; /* keys [0, kv_lim) of the tile exist (>= 1) */
                const int64_t dg = (int64_t)q0 + p.off - k0;
                const int diag = (int)(dg > 1024 ? 1024 : (dg < -1024 ? -1024 : dg));
#pragma unroll
                for (int x = 0; x < 64; ++x) {
                    const int kx = 8 * (x >> 2) + 2 * tq + (x & 1), ry = yb + 8 * ((x >> 1) & 1);
                    if (kx >= kv_lim || (p.causal && kx > ry + diag)) sa[x] = -INFINITY;
                }
            }
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) {
                float mx = -INFINITY;
                if (OPT & ATTN_TR) {
                    float t4[4];
#pragma unroll
                    for (int n = 0; n < 4; ++n) t4[n] = fmaxf(sa[4 * n + 2 * rr], sa[4 * n + 2 * rr + 1]);
#pragma unroll
                    for (int n = 4; n < 16; ++n) t4[n & 3] = fmaxf(t4[n & 3], fmaxf(sa[4 * n + 2 * rr], sa[4 * n + 2 * rr + 1]));
                    mx = fmaxf(fmaxf(t4[0], t4[1]), fmaxf(t4[2], t4[3]));
                } else {
#pragma unroll
                    for (int n = 0; n < 16; ++n) mx = fmaxf(mx, fmaxf(sa[4 * n + 2 * rr], sa[4 * n + 2 * rr + 1]));
                }
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float mxs = mx * p.scale_log2;
                /* LR: keep the reference max unless the tile's exceeds it by more than TH (-inf + TH = -inf) */
                const float mnew = (OPT & ATTN_LR) ? (mxs > m[rr] + ATTN_LR_TH ? mxs : m[rr]) : fmaxf(m[rr], mxs);
                const float muse = mnew == -INFINITY ? 0.0f : mnew; /* nothing visible yet: stays at 0 */
                if (OPT & ATTN_LR) alpha[rr] = mnew == m[rr] ? 1.0f : attn_exp2(m[rr] - muse);
                else alpha[rr] = attn_exp2(m[rr] - muse);
                m[rr] = mnew;
                float rs4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (int n = 0; n < 16; ++n) {
                    const float p0 = attn_exp2(fmaf(sa[4 * n + 2 * rr], p.scale_log2, -muse));
                    const float p1 = attn_exp2(fmaf(sa[4 * n + 2 * rr + 1], p.scale_log2, -muse));
                    sa[4 * n + 2 * rr] = p0;
                    sa[4 * n + 2 * rr + 1] = p1;
                    rs4[(OPT & ATTN_TR) ? (n & 3) : 0] += p0 + p1;
                }
                const float rs = (OPT & ATTN_TR) ? (rs4[0] + rs4[1]) + (rs4[2] + rs4[3]) : rs4[0];
                l[rr] = l[rr] * alpha[rr] + rs; /* the thread's part of the row sum; the quad adds up at the end */
            }
        };
        /* After the P·V GEMM that read pa has finished: pa = P (16-bit); rescale_pack: O *= alpha first. */
        auto pack_p = [&]() {
#pragma unroll
            for (int kk = 0; kk < 8; ++kk) {
                pa[4 * kk + 0] = AttnOps<DT>::pack(sa[8 * kk + 0], sa[8 * kk + 1]);
                pa[4 * kk + 1] = AttnOps<DT>::pack(sa[8 * kk + 2], sa[8 * kk + 3]);
                pa[4 * kk + 2] = AttnOps<DT>::pack(sa[8 * kk + 4], sa[8 * kk + 5]);
                pa[4 * kk + 3] = AttnOps<DT>::pack(sa[8 * kk + 6], sa[8 * kk + 7]);
            }
        };
        auto rescale_pack = [&](const float *alpha) {
            /* LR: warp-uniform skip when no row of the warp moved its max */
            if (!(OPT & ATTN_LR) || __any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
                for (int x = 0; x < D / 2; ++x) o[x] *= alpha[(x >> 1) & 1];
            }
            pack_p();
        };
        auto pv_done = [&]() {
            wgmma_wait<0>();
#pragma unroll
            for (int x = 0; x < D / 2; ++x) reg_fence(o[x]);
#pragma unroll
            for (int x = 0; x < 32; ++x) reg_fence_u32(pa[x]);
        };

        /* the ping-pong turns (none with NP) */
        auto turn_wait = [&]() { if (!(OPT & ATTN_NP)) named_bar_sync(bar_mine, 256); };
        auto turn_open = [&]() { if (!(OPT & ATTN_NP)) named_bar_arrive(bar_other, 256); };
        uint32_t kt = 0; /* K/V tiles consumed so far */
        /* XB: WG1's first turn of the CTA; afterwards every slot of either warpgroup opens the other's */
        if ((OPT & ATTN_XB) && !(OPT & ATTN_NP) && c == 1) named_bar_arrive(1, 256);
        int pend = -1;   /* Q buffer whose O store this warpgroup has issued but not yet seen read */
        for (uint32_t n = 0;; ++n) {
            const uint32_t u = n & 1u;
            mbar_wait(qfull0 + 8 * u, (n >> 1) & 1u); /* the item record and its Q tile */
            /* each warp's lane 0 reads the record, shuffles it and frees it for this warp (program order
               after its own read: no cross-lane ordering for racecheck to miss) */
            const int4 r0 = stage_record_read(&rec[2 * u], lane);
            const int4 r1 = stage_record_read(&rec[2 * u + 1], lane);
            if (lane == 0) mbar_arrive(qempty0 + 8 * u);
            /* the previous item's O store has had this wait's time to read its buffer: hand it back */
            if (pend >= 0 && tw == 0) {
                bulk_wait_read<0>();
                mbar_arrive(qempty0 + 8 * pend);
            }
            pend = -1;
            if (r0.w < 0) break;
            const int b = r0.x, h = r0.y, nt = r0.w;
            q0 = r0.z * 128;
            kv_len = r1.x;
            const int q_last = min(q0 + 128, p.seq_q) - 1;
            qa = sb + CF::Q_OFF + u * CF::TILE + (uint32_t)c * 8192u;
            if (OPT & ATTN_DT) {
                qdesc = smem_desc(qa, 16, 1024);
                /* k0 + 128 > kv_len or (causal) k0 + 127 > q0 + off, as one bound on k0 (k0 >= 0: a bound below 0
                   masks every tile, one at INT_MAX none) */
                int64_t thr = (int64_t)kv_len - 128;
                if (p.causal) thr = min(thr, (int64_t)q0 + p.off - 127);
                mthr = (int)max(min(thr, (int64_t)INT32_MAX), (int64_t)-1);
            }
            m[0] = m[1] = -INFINITY;
            l[0] = l[1] = 0.0f;
#pragma unroll
            for (int x = 0; x < D / 2; ++x) o[x] = 0.0f;
            if (nt > 0) {
                /* Turns (FA3 ping-pong), per item: WG1 issues first (WG2's arrival opens its barrier); each
                   slot ends by opening the other's, except WG2's last (nobody waits for it). Slots: S_0;
                   S_t + PV_{t-1} for t = 1 .. nt-1; PV_{nt-1}. The loop is peeled so no wgmma sits on a
                   divergent path (ptxas serialises those). */
                if (!(OPT & ATTN_XB) && !(OPT & ATTN_NP) && c == 1) named_bar_arrive(1, 256);
                float alpha[2];
                int k0 = wait_k(kt);
                int k0n = 0; /* EW: the next slot's key start, read while this slot's GEMMs run */
                turn_wait();
                wgmma_fence();
                issue_s(kt);
                turn_open();
                if (OPT & ATTN_EW) { /* what the next slot needs, while S_0 runs */
                    if (nt > 1) k0n = wait_k(kt + 1u);
                    wait_v(kt);
                }
                wgmma_wait<0>();
                release(kempty0, kt);
                softmax(k0, alpha);
                rescale_pack(alpha);
                for (int t = 1; t < nt; ++t) {
                    const uint32_t g_t = kt + (uint32_t)t;
                    if (OPT & ATTN_EW) {
                        k0 = k0n;
                    } else {
                        k0 = wait_k(g_t);
                        wait_v(g_t - 1);
                    }
                    turn_wait();
                    wgmma_fence();
                    issue_s(g_t);
                    issue_pv(g_t - 1);
                    turn_open();
                    if (OPT & ATTN_EW) { /* what the next slot needs, while S_t and P·V_{t-1} run */
                        if (t + 1 < nt) k0n = wait_k(g_t + 1u);
                        wait_v(g_t);
                    }
                    wgmma_wait<1>();
                    release(kempty0, g_t);
                    softmax(k0, alpha);
                    if (OPT & ATTN_OV) {
                        /* vote + branch first (see ATTN_OV), then the wait: the softmax above overlaps P·V_{t-1} */
                        if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
                            pv_done();
#pragma unroll
                            for (int x = 0; x < D / 2; ++x) o[x] *= alpha[(x >> 1) & 1];
                        }
                        pv_done();
                        release(vempty0, g_t - 1);
                        pack_p();
                    } else {
                        pv_done();
                        release(vempty0, g_t - 1);
                        rescale_pack(alpha);
                    }
                }
                const uint32_t g_l = kt + (uint32_t)nt - 1u;
                if (!(OPT & ATTN_EW)) wait_v(g_l);
                turn_wait();
                wgmma_fence();
                issue_pv(g_l);
                if ((OPT & ATTN_XB) || c == 0) turn_open();
                pv_done();
                release(vempty0, g_l);
                kt += (uint32_t)nt;
            }

            /* ---- epilogue: normalise, LSE, stage O over this warpgroup's rows of the Q buffer, TMA store */
            float inv[2];
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) {
                l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 1);
                l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 2);
                inv[rr] = l[rr] > 0.0f ? 1.0f / l[rr] : 0.0f;
            }
            if (p.lse && tq == 0) {
#pragma unroll
                for (int rr = 0; rr < 2; ++rr) {
                    const int q = q0 + yb + 8 * rr;
                    if (q <= q_last)
                        p.lse[((int64_t)b * p.heads + h) * p.seq_q + q] =
                            l[rr] > 0.0f ? (m[rr] + __log2f(l[rr])) * 0.69314718055994531f : -INFINITY;
                }
            }
            const int rl = 16 * warp + g;
#pragma unroll
            for (int h2 = 0; h2 < 2; ++h2) {
                const int r = rl + 8 * h2;
                const uint32_t rowa = qa + (uint32_t)r * 128u + 4u * (uint32_t)tq;
#pragma unroll
                for (int j = 0; j < D / 8; ++j) {
                    const uint32_t v = AttnOps<DT>::pack(o[4 * j + 2 * h2] * inv[h2], o[4 * j + 2 * h2 + 1] * inv[h2]);
                    const uint32_t a = rowa + (uint32_t)(j >> 3) * (uint32_t)CF::PANEL + ((uint32_t)((j & 7) ^ (r & 7)) << 4);
                    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a), "r"(v) : "memory");
                }
            }
            fence_proxy_async_smem();
            named_bar_sync(3 + c, 128);
            if (tw == 0) {
                if (q0 + 64 * c <= q_last) {
#pragma unroll
                    for (int pn = 0; pn < CF::PANELS; ++pn)
                        tma_store_4d(&tmO, qa + pn * CF::PANEL, 64 * pn, q0 + 64 * c, h, b);
                }
                bulk_commit();
            }
            pend = (int)u;
        }
        if ((OPT & ATTN_XB) && !(OPT & ATTN_NP)) {
            /* WG2's last arrival (after its last slot, or the first one if the CTA had no slots) is taken by
               WG1 here; barrier 5 keeps WG2 resident until then */
            if (c == 0) named_bar_sync(1, 256);
            named_bar_sync(5, 256);
        }
        if (tw == 0) bulk_wait_read<0>(); /* the last staged tile is read before shared memory goes away */
    }
}

} // namespace bsk_hopper
#endif

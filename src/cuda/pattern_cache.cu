/* pattern_cache.cu — data derived from a device BSR pattern, kept in a small per-context LRU keyed by the
   pattern: the transpose index (for each block column, its blocks in block-row order), built here on the GPU
   without host synchronisation, and launchers' derived buffers (a kernel family's work lists for the pattern, in
   the launcher's own layout, which it fills with its prep kernels on first use: the small-block SpMM's row-group
   unions in spmm_small_hopper.cu, the b64 / b128 SpMM's sorted units in spmm_hopper.cu).

   Build, all on ctx->stream:
     1. count:   cursor[c] = number of blocks p with col_idx[p] == c (blocks with a column outside [0, nb) are
                 skipped; integer atomics, so the counts are exact and deterministic)
     2. scan:    t_ptr = exclusive prefix sum of the counts (one CTA), cursor[c] = t_ptr[c]
     3. scatter: each kept block p takes a slot of its column with an atomic on cursor[c] (order arbitrary)
     4. sort:    each column's segment sorted by p, so the order — and every sum the op-T kernels form over it —
                 is deterministic; for a valid pattern p order is block-row order. t_row[q] = the block row of
                 t_blk[q], found by binary search over row_ptr (in range for any row_ptr).
   Every slot written is inside the column's range, so a malformed pattern gives wrong but in-bounds lists. */
#include <stdint.h>
#include "cuda_internal.h"
#include "portable/portable_common.cuh"
#include "scan.cuh" /* block_excl_scan */

#define SCAN_THREADS 1024
#define SORT_THREADS 512
#define SORT_SMEM 4096 /* segments up to this length are sorted in shared memory (bitonic) */

__global__ void tindex_count(const int32_t *__restrict__ col_idx, int64_t nnzb, int64_t nb, int32_t *cursor)
{
    for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < nnzb; p += (int64_t)gridDim.x * blockDim.x) {
        int32_t c = col_idx[p];
        if (c >= 0 && c < nb) atomicAdd(&cursor[c], 1);
    }
}

/* One CTA: exclusive scan of cursor[0..nb) into t_ptr[0..nb]; cursor[c] becomes t_ptr[c]. */
__global__ void __launch_bounds__(SCAN_THREADS) tindex_scan(int32_t *cursor, int32_t *t_ptr, int64_t nb)
{
    __shared__ int32_t warp_tot[33];
    int32_t carry = 0;
    for (int64_t base = 0; base < nb; base += SCAN_THREADS) {
        int64_t c = base + threadIdx.x;
        int32_t sum; /* the next round's scan starts with a barrier: warp_tot is free to rewrite */
        int32_t excl = carry + block_excl_scan(c < nb ? cursor[c] : 0, warp_tot, &sum);
        if (c < nb) {
            t_ptr[c] = excl;
            cursor[c] = excl;
        }
        carry += sum;
    }
    if (threadIdx.x == 0) t_ptr[nb] = carry;
}

__global__ void tindex_scatter(const int32_t *__restrict__ col_idx, int64_t nnzb, int64_t nb, int32_t *cursor,
                               int32_t *tmp)
{
    for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < nnzb; p += (int64_t)gridDim.x * blockDim.x) {
        int32_t c = col_idx[p];
        if (c >= 0 && c < nb) tmp[atomicAdd(&cursor[c], 1)] = (int32_t)p;
    }
}

/* One CTA per column (grid-stride): sort the segment's block numbers (they sit in t_row as scratch) into
   t_blk, then write their block rows into t_row. */
__global__ void __launch_bounds__(SORT_THREADS) tindex_sort(const int32_t *__restrict__ row_ptr, int64_t mb,
                                                            int64_t nnzb, int64_t nb, const int32_t *__restrict__ t_ptr,
                                                            int32_t *t_row, int32_t *t_blk)
{
    __shared__ int32_t s[SORT_SMEM];
    for (int64_t col = blockIdx.x; col < nb; col += gridDim.x) {
        int64_t a = t_ptr[col], e = t_ptr[col + 1], L = e - a;
        if (L <= 0) continue;
        if (L <= SORT_SMEM) {
            int n = 1;
            while (n < L) n <<= 1;
            for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = i < L ? t_row[a + i] : INT32_MAX;
            __syncthreads();
            for (int k = 2; k <= n; k <<= 1)
                for (int j = k >> 1; j > 0; j >>= 1) {
                    for (int i = threadIdx.x; i < n; i += blockDim.x) {
                        int ij = i ^ j;
                        if (ij > i) {
                            int32_t x = s[i], y = s[ij];
                            if ((x > y) == ((i & k) == 0)) { s[i] = y; s[ij] = x; }
                        }
                    }
                    __syncthreads();
                }
            for (int i = threadIdx.x; i < L; i += blockDim.x) t_blk[a + i] = s[i];
        } else {
            /* long column: rank sort straight from global memory (keys are distinct block numbers) */
            for (int64_t i = threadIdx.x; i < L; i += blockDim.x) {
                int32_t v = t_row[a + i];
                int64_t rank = 0;
                for (int64_t u = 0; u < L; u++) rank += t_row[a + u] < v;
                t_blk[a + rank] = v;
            }
        }
        __syncthreads(); /* every read of the scratch in t_row is done before it is overwritten */
        for (int64_t i = threadIdx.x; i < L; i += blockDim.x)
            t_row[a + i] = (int32_t)bsk_row_of(row_ptr, mb, nnzb, t_blk[a + i]);
        __syncthreads(); /* s is reused by the next column */
    }
}

/* The transpose index of A's pattern into a new allocation *out (stream-ordered on ctx->stream). */
static bsk_status build(bsk_context *ctx, struct bsk_cuda_state *st, const bsk_bsr *A, int64_t mb, int64_t nb,
                        int32_t **out)
{
    cudaStream_t stream = (cudaStream_t)ctx->stream;
    int64_t nnzb = A->nnzb;
    size_t words = 2 * (size_t)(nb + 1) + 2 * (size_t)nnzb;
    int32_t *mem = NULL;
    bsk_status s = bsk_cuda_status(cudaMallocAsync((void **)&mem, words * sizeof(int32_t), stream));
    if (s) return s;
    int32_t *t_ptr = mem, *cursor = mem + (nb + 1), *t_row = cursor + (nb + 1), *t_blk = t_row + nnzb;
    const int32_t *ci = A->col_idx;
    unsigned g = (unsigned)((nnzb + 255) / 256);
    unsigned gmax = (unsigned)st->sms * 8;
    if (g > gmax) g = gmax;
    if (g < 1) g = 1;
    s = bsk_cuda_status(cudaMemsetAsync(cursor, 0, (size_t)(nb + 1) * sizeof(int32_t), stream));
    if (!s) {
        tindex_count<<<g, 256, 0, stream>>>(ci, nnzb, nb, cursor);
        tindex_scan<<<1, SCAN_THREADS, 0, stream>>>(cursor, t_ptr, nb);
        tindex_scatter<<<g, 256, 0, stream>>>(ci, nnzb, nb, cursor, t_row);
        unsigned gs = (unsigned)(nb < (int64_t)st->sms * 16 ? nb : (int64_t)st->sms * 16);
        tindex_sort<<<gs < 1 ? 1 : gs, SORT_THREADS, 0, stream>>>(A->row_ptr, mb, nnzb, nb, t_ptr, t_row, t_blk);
        s = BSK_CUDA_LAUNCH_CHECK();
    }
    if (s) {
        (void)cudaFreeAsync(mem, stream);
        return s;
    }
    *out = mem;
    return BSK_SUCCESS;
}

/* ti's arrays inside an index of nb columns and nnzb blocks at mem */
static void view(int32_t *mem, int64_t nb, int64_t nnzb, int slot, bsk_tindex *ti)
{
    ti->t_ptr = mem;
    ti->t_row = mem + 2 * (nb + 1);
    ti->t_blk = ti->t_row + nnzb;
    ti->slot = slot;
}

/* A derived buffer without data (its memory freed or handed on by the caller). */
static void clear_derived(struct bsk_derived *d)
{
    d->mem = NULL;
    d->bytes = 0;
    d->built = 0;
    d->used = 0;
}

/* An entry without data: an empty slot (its event is kept for reuse). */
static void clear_data(struct bsk_tindex_entry *en)
{
    en->mem = NULL;
    for (int k = 0; k < BSK_DERIVED_SLOTS; k++) clear_derived(&en->d[k]);
    en->used = 0;
}

/* Whether the entry holds any data (an entry with none may be reused as empty). */
static int has_data(const struct bsk_tindex_entry *en)
{
    int any = en->mem != NULL;
    for (int k = 0; k < BSK_DERIVED_SLOTS; k++) any |= en->d[k].mem != NULL;
    return any;
}

/* Frees an entry's data once the kernels that last used it (any stream) are done; the slot becomes empty. */
static void evict(struct bsk_tindex_entry *en, cudaStream_t stream)
{
    if (has_data(en)) (void)cudaStreamWaitEvent(stream, en->ev, 0);
    if (en->mem) (void)cudaFreeAsync(en->mem, stream);
    for (int k = 0; k < BSK_DERIVED_SLOTS; k++)
        if (en->d[k].mem) (void)cudaFreeAsync(en->d[k].mem, stream);
    clear_data(en);
}

/* After the launches that used slot's data: their end, so a later eviction or another stream waits for them. */
static void record_use(bsk_context *ctx, int slot)
{
    if (slot < 0 || !ctx->cuda) return;
    struct bsk_tindex_entry *en = &ctx->cuda->tindex[slot];
    if (en->ev) (void)cudaEventRecord(en->ev, (cudaStream_t)ctx->stream);
}

/* The slot of A's pattern: with the cache on, its entry if there is one (this stream then ordered after its last
   use); otherwise an emptied one (the least recently used, or the pattern's own: without the cache the same
   addresses may hold another pattern now) with A's key. */
static bsk_status entry_of(bsk_context *ctx, struct bsk_cuda_state *st, const bsk_bsr *A, int *slot)
{
    const int64_t mb = bsk_bsr_mb(A), nb = bsk_bsr_nb(A);
    cudaStream_t stream = (cudaStream_t)ctx->stream;
    int victim = 0;
    for (int i = 0; i < BSK_TINDEX_SLOTS; i++) {
        struct bsk_tindex_entry *en = &st->tindex[i];
        if (en->used && en->row_ptr == A->row_ptr && en->col_idx == A->col_idx && en->mb == mb && en->nb == nb &&
            en->nnzb == A->nnzb) {
            if (!ctx->pattern_cache) { victim = i; break; }
            /* built (or last used) perhaps on another stream: order this stream after it */
            bsk_status s = bsk_cuda_status(cudaStreamWaitEvent(stream, en->ev, 0));
            if (s) return s;
            en->used = ++st->tindex_clock;
            *slot = i;
            return BSK_SUCCESS;
        }
        if (st->tindex[i].used < st->tindex[victim].used) victim = i;
    }
    struct bsk_tindex_entry *en = &st->tindex[victim];
    evict(en, stream);
    if (!en->ev) {
        bsk_status s = bsk_cuda_status(cudaEventCreateWithFlags(&en->ev, cudaEventDisableTiming));
        if (s) return s;
    }
    en->row_ptr = A->row_ptr;
    en->col_idx = A->col_idx;
    en->mb = mb;
    en->nb = nb;
    en->nnzb = A->nnzb;
    en->used = ++st->tindex_clock;
    *slot = victim;
    return BSK_SUCCESS;
}

/* Whether ctx->stream is capturing, or that cannot be told (then treated as capturing: nothing is cached). */
static int capturing(bsk_context *ctx)
{
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing((cudaStream_t)ctx->stream, &cap) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    return cap != cudaStreamCaptureStatusNone;
}

bsk_status bsk_cuda_tindex_get(bsk_context *ctx, const bsk_bsr *A, bsk_tindex *ti)
{
    ti->t_ptr = ti->t_row = ti->t_blk = NULL;
    ti->slot = -1;
    ti->owned = NULL;
    if (A->nnzb == 0) return BSK_SUCCESS;
    struct bsk_cuda_state *st = bsk_cuda_state_get(ctx);
    if (!st) return BSK_ERR_OUT_OF_MEMORY;
    const int64_t mb = bsk_bsr_mb(A), nb = bsk_bsr_nb(A);
    bsk_status s;
    if (capturing(ctx)) { /* an index of this call's own, in the graph's memory (freed by tindex_done) */
        if ((s = build(ctx, st, A, mb, nb, &ti->owned))) return s;
        view(ti->owned, nb, A->nnzb, -1, ti);
        return BSK_SUCCESS;
    }
    int slot;
    if ((s = entry_of(ctx, st, A, &slot))) return s;
    struct bsk_tindex_entry *en = &st->tindex[slot];
    if (!en->mem) {
        if (!(s = build(ctx, st, A, mb, nb, &en->mem)))
            s = bsk_cuda_status(cudaEventRecord(en->ev, (cudaStream_t)ctx->stream));
        if (s) {
            if (en->mem) { /* the event failed: the index's kernels are queued, the free is stream-ordered after */
                (void)cudaFreeAsync(en->mem, (cudaStream_t)ctx->stream);
                en->mem = NULL;
            }
            if (!has_data(en)) en->used = 0; /* nothing cached: the slot stays free */
            return s;
        }
    }
    view(en->mem, en->nb, en->nnzb, slot, ti);
    return BSK_SUCCESS;
}

void bsk_cuda_tindex_done(bsk_context *ctx, const bsk_tindex *ti)
{
    if (ti->owned) (void)cudaFreeAsync(ti->owned, (cudaStream_t)ctx->stream);
    else record_use(ctx, ti->slot);
}

bsk_status bsk_cuda_derived_get(bsk_context *ctx, const bsk_bsr *A, const int64_t key[BSK_DERIVED_KEY], size_t bytes,
                                void **buf, int *built, int *slot)
{
    *buf = NULL;
    *built = 0;
    *slot = -1;
    struct bsk_cuda_state *st = bsk_cuda_state_get(ctx);
    if (!st) return BSK_ERR_OUT_OF_MEMORY;
    cudaStream_t stream = (cudaStream_t)ctx->stream;
    /* Inside a capture (or when that cannot be told) the cache is not used: *buf stays NULL and the launcher builds
       its lists in its workspace, the prep kernels captured with the rest — a graph never holds a cache buffer that
       a later eviction could free, nor waits on an event recorded outside it. */
    if (capturing(ctx)) return BSK_SUCCESS;
    int i;
    bsk_status s = entry_of(ctx, st, A, &i);
    if (s) return s;
    struct bsk_tindex_entry *en = &st->tindex[i];
    /* the key's buffer, else an empty one, else the least recently used (entry_of ordered this stream after the
       entry's last use, so it may be freed or refilled now) */
    int k = -1;
    for (int j = 0; j < BSK_DERIVED_SLOTS && k < 0; j++) {
        int same = en->d[j].mem != NULL;
        for (int q = 0; q < BSK_DERIVED_KEY && same; q++) same = en->d[j].key[q] == key[q];
        if (same) k = j;
    }
    int victim = 0;
    for (int j = 1; j < BSK_DERIVED_SLOTS && en->d[victim].mem; j++)
        if (!en->d[j].mem || en->d[j].used < en->d[victim].used) victim = j;
    struct bsk_derived *d = &en->d[k >= 0 ? k : victim];
    if (k >= 0 && d->bytes >= bytes) {
        *built = d->built;
    } else {
        if (d->mem) (void)cudaFreeAsync(d->mem, stream);
        clear_derived(d);
        if ((s = bsk_cuda_status(cudaMallocAsync(&d->mem, bytes, stream)))) {
            d->mem = NULL;
            if (!has_data(en)) en->used = 0;
            return s;
        }
        d->bytes = bytes;
        for (int q = 0; q < BSK_DERIVED_KEY; q++) d->key[q] = key[q];
    }
    d->used = st->tindex_clock;
    *buf = d->mem;
    *slot = i * BSK_DERIVED_SLOTS + (int)(d - en->d);
    return BSK_SUCCESS;
}

void bsk_cuda_derived_done(bsk_context *ctx, int slot, int filled)
{
    if (slot < 0 || !ctx->cuda) return;
    if (filled) ctx->cuda->tindex[slot / BSK_DERIVED_SLOTS].d[slot % BSK_DERIVED_SLOTS].built = 1;
    record_use(ctx, slot / BSK_DERIVED_SLOTS);
}

void bsk_cuda_pattern_cache_release(struct bsk_cuda_state *st)
{
    for (int i = 0; i < BSK_TINDEX_SLOTS; i++) {
        struct bsk_tindex_entry *en = &st->tindex[i];
        if (en->ev) (void)cudaEventSynchronize(en->ev);
        if (en->mem) (void)cudaFree(en->mem);
        for (int k = 0; k < BSK_DERIVED_SLOTS; k++)
            if (en->d[k].mem) (void)cudaFree(en->d[k].mem);
        if (en->ev) (void)cudaEventDestroy(en->ev);
        clear_data(en);
        en->ev = NULL;
    }
}

bsk_status bsk_cuda_exclusive_scan_i32(int32_t *counts, int32_t *ptr, int64_t n, cudaStream_t stream)
{
    tindex_scan<<<1, SCAN_THREADS, 0, stream>>>(counts, ptr, n);
    return BSK_CUDA_LAUNCH_CHECK();
}

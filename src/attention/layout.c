/* layout.c — attention layouts: descriptor and list checks, allocation, host builders, clone, counts. */
#include <stdlib.h>
#include <string.h>
#include "attention_internal.h"

static int aligned4(const void *p) { return ((uintptr_t)p & 3u) == 0; }

int64_t bsk_attn_layout_mq(const bsk_attn_layout *L)
{
    return L && L->block_q > 0 && L->seq_q >= 0 ? (L->seq_q + L->block_q - 1) / L->block_q : 0;
}

int64_t bsk_attn_layout_nb(const bsk_attn_layout *L)
{
    return L && L->block_k > 0 && L->seq_k >= 0 ? (L->seq_k + L->block_k - 1) / L->block_k : 0;
}

int64_t bsk__attn_layout_rows(const bsk_attn_layout *L)
{
    return (int64_t)L->batch * L->heads * bsk_attn_layout_mq(L);
}

/* Sizes alone (shared by alloc, the builders and the descriptor check). */
static bsk_status check_sizes(int64_t seq_q, int64_t seq_k, int32_t block_q, int32_t block_k, int32_t batch,
                              int32_t heads, int32_t capacity)
{
    if (seq_q < 0 || seq_k < 0 || block_q < 1 || block_k < 1 || batch < 1 || heads < 1 || capacity < 0)
        return BSK_ERR_INVALID_ARGUMENT;
    if (seq_q > BSK_LIMIT_DIM || seq_k > BSK_LIMIT_DIM || block_q > BSK_LIMIT_BLOCK || block_k > BSK_LIMIT_BLOCK)
        return BSK_ERR_OVERFLOW;
    int64_t nb = (seq_k + block_k - 1) / block_k, mq = (seq_q + block_q - 1) / block_q, rows, elems;
    if (capacity > nb) return BSK_ERR_INVALID_ARGUMENT;
    if (!bsk__mul_ok((int64_t)batch * heads, mq, &rows) || !bsk__mul_ok(rows, capacity, &elems) ||
        rows > INT32_MAX || elems > INT32_MAX)
        return BSK_ERR_OVERFLOW;
    return BSK_SUCCESS;
}

bsk_status bsk__attn_layout_check_desc(const bsk_attn_layout *L)
{
    if (!L) return BSK_ERR_NULL_POINTER;
    if (L->mem != BSK_MEM_HOST && L->mem != BSK_MEM_DEVICE) return BSK_ERR_INVALID_ARGUMENT;
    bsk_status s = check_sizes(L->seq_q, L->seq_k, L->block_q, L->block_k, L->batch, L->heads, L->capacity);
    if (s) return s;
    int64_t rows = bsk__attn_layout_rows(L);
    if (rows > 0 && (!L->full_count || !L->part_count)) return BSK_ERR_NULL_POINTER;
    if (rows > 0 && L->capacity > 0 && (!L->full_idx || !L->part_idx)) return BSK_ERR_NULL_POINTER;
    if (!aligned4(L->full_count) || !aligned4(L->part_count) || !aligned4(L->full_idx) || !aligned4(L->part_idx))
        return BSK_ERR_MISALIGNED;
    return BSK_SUCCESS;
}

bsk_status bsk__attn_layout_check_lists(const bsk_attn_layout *L, const int32_t *fc, const int32_t *fi,
                                        const int32_t *pc, const int32_t *pi)
{
    int64_t rows = bsk__attn_layout_rows(L), nb = bsk_attn_layout_nb(L), cap = L->capacity;
    for (int64_t r = 0; r < rows; r++) {
        int32_t nf = fc[r], np = pc[r];
        if (nf < 0 || nf > cap || np < 0 || np > cap) return BSK_ERR_INVALID_BSR;
        const int32_t *f = fi + r * cap, *p = pi + r * cap;
        for (int32_t a = 0; a < nf; a++)
            if (f[a] < 0 || f[a] >= nb || (a > 0 && f[a] <= f[a - 1])) return BSK_ERR_INVALID_BSR;
        for (int32_t a = 0; a < np; a++)
            if (p[a] < 0 || p[a] >= nb || (a > 0 && p[a] <= p[a - 1])) return BSK_ERR_INVALID_BSR;
        /* both sorted: a merge finds a tile listed twice */
        for (int32_t a = 0, c = 0; a < nf && c < np;) {
            if (f[a] == p[c]) return BSK_ERR_INVALID_BSR;
            if (f[a] < p[c]) a++; else c++;
        }
    }
    return BSK_SUCCESS;
}

/* Host copies of a layout's four arrays (the arrays themselves for a host layout). */
typedef struct host_lists { int32_t *fc, *fi, *pc, *pi; int owned; } host_lists;

static void host_lists_free(host_lists *h)
{
    if (h->owned) { free(h->fc); free(h->fi); free(h->pc); free(h->pi); }
    memset(h, 0, sizeof *h);
}

static bsk_status host_lists_get(const bsk_attn_layout *L, int counts_only, host_lists *h)
{
    memset(h, 0, sizeof *h);
    if (L->mem == BSK_MEM_HOST) {
        h->fc = L->full_count; h->fi = L->full_idx; h->pc = L->part_count; h->pi = L->part_idx;
        return BSK_SUCCESS;
    }
    int64_t rows = bsk__attn_layout_rows(L), idx = counts_only ? 0 : rows * L->capacity;
    h->owned = 1;
    h->fc = (int32_t *)malloc((size_t)(rows + 1) * 4);
    h->pc = (int32_t *)malloc((size_t)(rows + 1) * 4);
    h->fi = (int32_t *)malloc((size_t)(idx + 1) * 4);
    h->pi = (int32_t *)malloc((size_t)(idx + 1) * 4);
    if (!h->fc || !h->pc || !h->fi || !h->pi) { host_lists_free(h); return BSK_ERR_OUT_OF_MEMORY; }
    bsk_status s = BSK_SUCCESS;
    if (rows) {
        s = bsk_cuda_memcpy(h->fc, L->full_count, (size_t)rows * 4, 0, 1);
        if (!s) s = bsk_cuda_memcpy(h->pc, L->part_count, (size_t)rows * 4, 0, 1);
    }
    if (!s && idx) {
        s = bsk_cuda_memcpy(h->fi, L->full_idx, (size_t)idx * 4, 0, 1);
        if (!s) s = bsk_cuda_memcpy(h->pi, L->part_idx, (size_t)idx * 4, 0, 1);
    }
    if (s) host_lists_free(h);
    return s;
}

bsk_status bsk__attn_layout_check_location(const bsk_attn_layout *L)
{
    bsk_status s = bsk__check_location(L->full_count, L->mem);
    if (!s) s = bsk__check_location(L->part_count, L->mem);
    if (!s) s = bsk__check_location(L->full_idx, L->mem);
    if (!s) s = bsk__check_location(L->part_idx, L->mem);
    return s;
}

bsk_status bsk_attn_layout_validate(const bsk_attn_layout *L)
{
    bsk_status s = bsk__attn_layout_check_desc(L);
    if (s || (s = bsk__attn_layout_check_location(L))) return s;
    host_lists h;
    if ((s = host_lists_get(L, 0, &h))) return s;
    s = bsk__attn_layout_check_lists(L, h.fc, h.fi, h.pc, h.pi);
    host_lists_free(&h);
    return s;
}

bsk_status bsk_attn_layout_tiles(const bsk_attn_layout *L, int64_t *full, int64_t *partial)
{
    bsk_status s = bsk__attn_layout_check_desc(L);
    if (s || (s = bsk__attn_layout_check_location(L))) return s;
    host_lists h;
    if ((s = host_lists_get(L, 1, &h))) return s;
    int64_t rows = bsk__attn_layout_rows(L), nf = 0, np = 0;
    for (int64_t r = 0; r < rows; r++) { nf += h.fc[r]; np += h.pc[r]; }
    host_lists_free(&h);
    if (full) *full = nf;
    if (partial) *partial = np;
    return BSK_SUCCESS;
}

bsk_status bsk_attn_layout_alloc(int64_t seq_q, int64_t seq_k, int32_t block_q, int32_t block_k, int32_t batch,
                                 int32_t heads, int32_t capacity, bsk_memory mem, bsk_attn_layout *out)
{
    if (!out) return BSK_ERR_NULL_POINTER;
    if (mem != BSK_MEM_HOST && mem != BSK_MEM_DEVICE) return BSK_ERR_INVALID_ARGUMENT;
    bsk_status s = check_sizes(seq_q, seq_k, block_q, block_k, batch, heads, capacity);
    if (s) return s;
    bsk_attn_layout L = {seq_q, seq_k, block_q, block_k, batch, heads, capacity, NULL, NULL, NULL, NULL, mem};
    int64_t rows = bsk__attn_layout_rows(&L), idx = rows * capacity;
    size_t cb = (size_t)(rows ? rows : 1) * 4, ib = (size_t)(idx ? idx : 1) * 4;
    if (mem == BSK_MEM_HOST) {
        L.full_count = (int32_t *)calloc(1, cb);
        L.part_count = (int32_t *)calloc(1, cb);
        L.full_idx = (int32_t *)calloc(1, ib);
        L.part_idx = (int32_t *)calloc(1, ib);
        if (!L.full_count || !L.part_count || !L.full_idx || !L.part_idx) {
            free(L.full_count); free(L.part_count); free(L.full_idx); free(L.part_idx);
            return BSK_ERR_OUT_OF_MEMORY;
        }
        *out = L;
        return BSK_SUCCESS;
    }
    void *z = calloc(1, cb > ib ? cb : ib);
    if (!z) return BSK_ERR_OUT_OF_MEMORY;
    void *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    s = bsk_cuda_malloc(&a, cb);
    if (!s) s = bsk_cuda_malloc(&b, cb);
    if (!s) s = bsk_cuda_malloc(&c, ib);
    if (!s) s = bsk_cuda_malloc(&d, ib);
    /* zero everything: a fresh layout means "no tiles", and unread index slots stay defined */
    if (!s) s = bsk_cuda_memcpy(a, z, cb, 1, 0);
    if (!s) s = bsk_cuda_memcpy(b, z, cb, 1, 0);
    if (!s) s = bsk_cuda_memcpy(c, z, ib, 1, 0);
    if (!s) s = bsk_cuda_memcpy(d, z, ib, 1, 0);
    free(z);
    if (s) {
        bsk_cuda_free(a); bsk_cuda_free(b); bsk_cuda_free(c); bsk_cuda_free(d);
        return s;
    }
    L.full_count = (int32_t *)a; L.part_count = (int32_t *)b; L.full_idx = (int32_t *)c; L.part_idx = (int32_t *)d;
    *out = L;
    return BSK_SUCCESS;
}

void bsk_attn_layout_free(bsk_attn_layout *L)
{
    if (!L) return;
    if (L->mem == BSK_MEM_DEVICE) {
        bsk_cuda_free(L->full_count); bsk_cuda_free(L->part_count);
        bsk_cuda_free(L->full_idx); bsk_cuda_free(L->part_idx);
    } else {
        free(L->full_count); free(L->part_count); free(L->full_idx); free(L->part_idx);
    }
    memset(L, 0, sizeof *L);
}

bsk_status bsk_attn_layout_clone(const bsk_attn_layout *L, bsk_memory mem, bsk_attn_layout *out)
{
    if (!out) return BSK_ERR_NULL_POINTER;
    bsk_status s = bsk__attn_layout_check_desc(L);
    if (s || (s = bsk__attn_layout_check_location(L))) return s;
    if (mem != BSK_MEM_HOST && mem != BSK_MEM_DEVICE) return BSK_ERR_INVALID_ARGUMENT;
    bsk_attn_layout C;
    s = bsk_attn_layout_alloc(L->seq_q, L->seq_k, L->block_q, L->block_k, L->batch, L->heads, L->capacity, mem, &C);
    if (s) return s;
    int64_t rows = bsk__attn_layout_rows(L), idx = rows * L->capacity;
    int dd = mem == BSK_MEM_DEVICE, sd = L->mem == BSK_MEM_DEVICE;
    if (rows) {
        s = bsk_cuda_memcpy(C.full_count, L->full_count, (size_t)rows * 4, dd, sd);
        if (!s) s = bsk_cuda_memcpy(C.part_count, L->part_count, (size_t)rows * 4, dd, sd);
    }
    if (!s && idx) {
        s = bsk_cuda_memcpy(C.full_idx, L->full_idx, (size_t)idx * 4, dd, sd);
        if (!s) s = bsk_cuda_memcpy(C.part_idx, L->part_idx, (size_t)idx * 4, dd, sd);
    }
    if (s) { bsk_attn_layout_free(&C); return s; }
    *out = C;
    return BSK_SUCCESS;
}

/* ---- builders. Each decides per tile through a predicate, then classifies kept tiles. */

typedef int (*keep_fn)(const void *arg, int64_t l, int64_t i, int64_t j);

static bsk_status build(int64_t seq_q, int64_t seq_k, int32_t bq, int32_t bk, int32_t batch, int32_t heads,
                        int causal, int64_t off, keep_fn keep, const void *arg, bsk_attn_layout *out)
{
    if (!out) return BSK_ERR_NULL_POINTER;
    if (causal != 0 && causal != 1) return BSK_ERR_INVALID_ARGUMENT;
    if (off > ((int64_t)1 << 31) || off < -((int64_t)1 << 31)) return BSK_ERR_INVALID_ARGUMENT;
    int64_t nb = bk > 0 && seq_k >= 0 ? (seq_k + bk - 1) / bk : 0;
    bsk_status s = check_sizes(seq_q, seq_k, bq, bk, batch, heads, 0);
    if (s) return s;
    if (nb > INT32_MAX) return BSK_ERR_OVERFLOW;
    bsk_attn_layout L;
    if ((s = bsk_attn_layout_alloc(seq_q, seq_k, bq, bk, batch, heads, (int32_t)nb, BSK_MEM_HOST, &L))) return s;
    int64_t mq = bsk_attn_layout_mq(&L);
    for (int64_t l = 0; l < (int64_t)batch * heads; l++)
        for (int64_t i = 0; i < mq; i++) {
            int64_t r = l * mq + i, q0 = i * bq, q1 = q0 + bq < seq_q ? q0 + bq : seq_q;
            int32_t nf = 0, np = 0;
            for (int64_t j = 0; j < nb; j++) {
                if (!keep(arg, l, i, j)) continue;
                int64_t k0 = j * bk, k1 = k0 + bk;
                /* k1 may pass seq_k: the last key block is then partial (keys past the end are masked) */
                int cls = bsk__attn_tile_class(q0, q1, k0, k1, seq_k, causal, off);
                if (cls == 2) continue;
                if (cls == 0) L.full_idx[r * nb + nf++] = (int32_t)j;
                else L.part_idx[r * nb + np++] = (int32_t)j;
            }
            L.full_count[r] = nf;
            L.part_count[r] = np;
        }
    *out = L;
    return BSK_SUCCESS;
}

static int keep_all(const void *arg, int64_t l, int64_t i, int64_t j) { (void)arg; (void)l; (void)i; (void)j; return 1; }

bsk_status bsk_attn_layout_dense(int64_t seq_q, int64_t seq_k, int32_t block_q, int32_t block_k, bsk_attn_layout *out)
{
    return build(seq_q, seq_k, block_q, block_k, 1, 1, 0, 0, keep_all, NULL, out);
}

bsk_status bsk_attn_layout_causal(int64_t seq_q, int64_t seq_k, int32_t block_q, int32_t block_k,
                                  int64_t causal_offset, bsk_attn_layout *out)
{
    return build(seq_q, seq_k, block_q, block_k, 1, 1, 1, causal_offset, keep_all, NULL, out);
}

typedef struct local_arg { int64_t bq, bk, left, right, global, off; } local_arg;

static int keep_local(const void *arg, int64_t l, int64_t i, int64_t j)
{
    (void)l;
    const local_arg *a = (const local_arg *)arg;
    if (j < a->global || i < a->global) return 1;
    int64_t key = i * a->bq + a->off; /* the diagonal key of the block's first row */
    int64_t d = key >= 0 ? key / a->bk : -((-key + a->bk - 1) / a->bk);
    return j >= d - a->left && j <= d + a->right;
}

bsk_status bsk_attn_layout_local(int64_t seq_q, int64_t seq_k, int32_t block_q, int32_t block_k, int32_t window_left,
                                 int32_t window_right, int32_t global_blocks, int causal, int64_t causal_offset,
                                 bsk_attn_layout *out)
{
    if (window_left < 0 || window_right < 0 || global_blocks < 0) return BSK_ERR_INVALID_ARGUMENT;
    local_arg a = {block_q, block_k, window_left, window_right, global_blocks, causal_offset};
    return build(seq_q, seq_k, block_q, block_k, 1, 1, causal, causal_offset, keep_local, &a, out);
}

typedef struct mask_arg { const uint8_t *mask; int64_t mq, nb; } mask_arg;

static int keep_mask(const void *arg, int64_t l, int64_t i, int64_t j)
{
    const mask_arg *a = (const mask_arg *)arg;
    return a->mask[(l * a->mq + i) * a->nb + j] != 0;
}

bsk_status bsk_attn_layout_from_mask(int64_t seq_q, int64_t seq_k, int32_t block_q, int32_t block_k, int32_t batch,
                                     int32_t heads, const uint8_t *mask, int causal, int64_t causal_offset,
                                     bsk_attn_layout *out)
{
    bsk_status s = check_sizes(seq_q, seq_k, block_q, block_k, batch, heads, 0);
    if (s) return s;
    if (!mask && seq_q > 0 && seq_k > 0) return BSK_ERR_NULL_POINTER;
    mask_arg a = {mask, (seq_q + block_q - 1) / block_q, (seq_k + block_k - 1) / block_k};
    return build(seq_q, seq_k, block_q, block_k, batch, heads, causal, causal_offset, keep_mask, &a, out);
}

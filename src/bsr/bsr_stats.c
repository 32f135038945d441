/* bsr_stats.c — pattern statistics of a BSR matrix (host or device metadata). */
#include <string.h>
#include "bsr_common.h"

bsk_status bsk_bsr_stats_get(const bsk_bsr *A, bsk_bsr_stats *stats)
{
    bsk_status s;
    if (!A || !stats) return BSK_ERR_NULL_POINTER;
    if ((s = bsk__check_bsr_desc(A))) return s;
    if (A->mem == BSK_MEM_DEVICE && bsk_cuda_device_count() <= 0) return BSK_ERR_NO_DEVICE;
    if ((s = bsk__check_bsr_location(A))) return s;

    const int64_t mb = bsk_bsr_mb(A), nb = bsk_bsr_nb(A), nnzb = A->nnzb;
    const int32_t *rp = A->row_ptr, *ci = A->col_idx;
    int32_t *hrp = NULL, *hci = NULL;
    if (A->mem == BSK_MEM_DEVICE) { /* one synchronous copy of the metadata; checked and used on the host */
        size_t rp_bytes = bsk__bytes(mb + 1, 4), ci_bytes = bsk__bytes(nnzb, 4);
        if (!rp_bytes || !ci_bytes) return BSK_ERR_OVERFLOW;
        hrp = (int32_t *)malloc(rp_bytes);
        hci = (int32_t *)malloc(ci_bytes);
        if (!hrp || !hci) { free(hrp); free(hci); return BSK_ERR_OUT_OF_MEMORY; }
        s = bsk_cuda_memcpy(hrp, A->row_ptr, (size_t)(mb + 1) * 4, 0, 1);
        if (!s && nnzb) s = bsk_cuda_memcpy(hci, A->col_idx, (size_t)nnzb * 4, 0, 1);
        if (s) { free(hrp); free(hci); return s; }
        rp = hrp;
        ci = hci;
    }
    s = bsk__check_bsr_indices(mb, nb, nnzb, rp, ci);
    if (!s) {
        bsk_bsr_stats st;
        memset(&st, 0, sizeof st);
        st.mb = mb;
        st.nb = nb;
        st.nnzb = nnzb;
        st.density = mb && nb ? (double)nnzb / ((double)mb * (double)nb) : 0.0;
        st.row_mean = mb ? (double)nnzb / (double)mb : 0.0;
        st.row_min = mb ? INT64_MAX : 0;
        for (int64_t i = 0; i < mb; i++) {
            int64_t n = (int64_t)rp[i + 1] - rp[i];
            if (n < st.row_min) st.row_min = n;
            if (n > st.row_max) st.row_max = n;
            st.empty_rows += n == 0;
        }
        *stats = st;
    }
    free(hrp);
    free(hci);
    return s;
}

/* spmm_small_tune.h — internal knobs of the small-block Hopper SpMM (spmm_small_hopper.cu) for experiments and
   tests (tests/test_hopper_small.c, the device probe). Not part of the public API; plain C so host test code can
   include it. 0 everywhere means the default. */
#ifndef BSK_HOPPER_SMALL_TUNE_H
#define BSK_HOPPER_SMALL_TUNE_H
#ifdef __cplusplus
extern "C" {
#endif
struct bsk_hopper_small_tune_s {
    int variant;   /* 0 default; 1: the other stage shape (BS 32: 1 block column per stage, 7 stages; BS 16: 1
                      column, 14 stages); 2: Bᵀ through registers, wait_group 0 (run 1); 3 / 4: one / two
                      producer warps (default four; session 8); 5 / 6: BS 32, 2 / 4 rows per wgmma with the k16
                      steps issued outer (experiment, session 9); BS 32, session 12: 7 the two entries of a stage
                      aliased in one set of A slots (timing only: results wrong), 8 compact pairs without
                      overflow slots, 9 the pre-compact-pair default at 2 rows per wgmma; -1: decline (the portable
                      path runs). 1-9 exist for fp16 input only (bf16 runs the default)                        */
    int force;     /* 1: take every case the kernel can do, ignoring the density crossover to the portable kernel */
    int band_mb;   /* L2 budget in MB for the A blocks of one band of row groups (default 16)                  */
    int max_ctas;  /* cap on the persistent grid (default: one CTA per SM)                                     */
    int no_pdl;    /* 1: launch the main kernel without programmatic dependent launch                          */
    int prep_only; /* 1: run the two prep kernels only (timing); C is not written                              */
    int diag;      /* experiments, results wrong: 1 consumers idle (the load pipeline alone), 2 no A-block loads,
                      3 no loads and consumers idle (the barrier / instruction pipeline alone)                 */
    void *prof;    /* -DBSK_SMALL_PROF builds: device buffer of 16 long long per CTA (cycle counters), or NULL */
    int out_grid;  /* written by the launcher: the grid it launched                                            */
    int out_items; /* written by the launcher: row groups x N tiles                                            */
    int rows_per_mma; /* adjacent row slots per wgmma in the default stage shape (variant 0, both input dtypes):
                         0 by density (BS 32: 2 below d 0.3, else 1; BS 16: 4 below d 0.2, else 16), 1 one row
                         each (session 8), BS 32: 2 / 4 / 8, BS 16: 4 / 8 / 16 (session 9); others: as 1       */
    int zero_tma;  /* RG > 1, the row slots of absent rows in present groups: 0 the default (TMA up to 4 rows per
                      wgmma, else stores), 1 zeroed by shared-memory stores of the producer warp (+ proxy fence), 2
                      TMA loads of an out-of-bounds block (zero fill) */
    int epi_direct; /* 1: the fp32-staged epilogue with 16-byte stores even where the TMA-store epilogue applies
                       (16-bit C of the input's dtype, beta = 0; session 16) */
    int out_prep;   /* written by the launcher: 1 the prep kernels ran, 0 the pattern cache held the lists, 2 direct
                       mode (no prep kernels; each CTA built its item's list) */
    int out_ts;     /* written by the launcher: 1 the TMA-store epilogue ran */
    int wide;       /* wide items (session 19): 64-column halves per consumer, 0 the default (by density: BS 32 4 below d
                       0.35, else 1; BS 16 4 below d 0.17, 2 below 0.4, else 1), 1 / 4, and 2 at BS 16; an item is then
                       256 / (BS * wide) block rows x 128 * wide columns. A variant or rows_per_mma != 0 runs wide 1. */
    int out_nh;     /* written by the launcher: the wide setting it ran (1, 2, 4) */
    int b_box3d;    /* 1: wide items with one entry per stage load each entry's 2 NH B boxes one by one (default: one 3-D
                       box where N % 64 == 0) */
    int out_b3d;    /* written by the launcher: 1 the 3-D B boxes ran */
    int direct;     /* direct mode (session 27: no prep kernels, CTA t runs item t and builds its union list itself):
                       0 the default (on wherever it applies: the items fit the grid, no cached lists, four producer
                       warps), -1 off, 1 on (as the default) */
    void *out_queue; /* written by the launcher: the direct-mode queue a direct call used (its slot's eight words are
                        zero between launches), else NULL */
};
extern struct bsk_hopper_small_tune_s bsk__hopper_small_tune;
#ifdef __cplusplus
}
#endif
#endif

/* sddmm_tune.h — internal knobs of the Hopper SDDMM for experiments and tests (tests/test_hopper_sddmm.c, the
   device probe). Not part of the public API; plain C so host code can include it. 0 everywhere means the
   default. */
#ifndef BSK_HOPPER_SDDMM_TUNE_H
#define BSK_HOPPER_SDDMM_TUNE_H
#ifdef __cplusplus
extern "C" {
#endif
struct bsk_hopper_sddmm_tune_s {
    int b64_blocks; /* b = 64: output blocks per work item, 4 (64 x 256 tile) or 8 (64 x 512 tile); 0 default   */
    int split;      /* 0: the planner splits a one-round tail along D; -1: never split; S >= 2: split the last
                       items % grid items (or the last min(items, grid)) into S parts (tests, probes)             */
    int max_ctas;   /* cap on the persistent grid (0: one CTA per SM)                                            */
    int no_pdl;     /* 1: launch the main kernel without programmatic dependent launch                          */
    int split_order; /* 1: split units part-major (part 0 of every split item, then part 1, ...); 0: item-major  */
    int col_groups;  /* 2..64: items cut at that many block-column groups and listed group-major (a wave reads one
                        group's Y panels); 1: row order; 0: automatic (sddmm_hopper.cu col_groups_auto; at B = 64
                        the prep kernel chooses from the rows); -1: that device rule whatever Y's size (tests)    */
    int *groups_out; /* device int or NULL: the prep kernel writes the number of column groups it used            */
};
extern struct bsk_hopper_sddmm_tune_s bsk__hopper_sddmm_tune;
#ifdef __cplusplus
}
#endif
#endif

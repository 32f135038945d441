/* tune.h — internal knobs of the Hopper SpMM for experiments (bench/hopper_probe.c, tests/test_hopper.c).
   Not part of the public API; plain C so host test code can include it. 0 everywhere means the default. */
#ifndef BSK_HOPPER_TUNE_H
#define BSK_HOPPER_TUNE_H
#include "bsk.h"
#ifdef __cplusplus
extern "C" {
#endif
struct bsk_hopper_tune_s {
    int b64_wgn;    /* BM = 64: wgmma N per consumer warpgroup, 128 (tile 64 x 256) or 256 (64 x 512)          */
    int band_mb;    /* L2 budget in MB for the A blocks of one band of rows (default 16)                       */
    int no_pdl;     /* 1: launch the main kernel without programmatic dependent launch                         */
    int max_ctas;   /* cap on the persistent grid (default: one CTA per SM)                                    */
    int bdesc_swap; /* 1: swap B's descriptor LBO/SBO (a probe of the layout; wrong results expected)         */
    int epi;        /* 0: TMA-store epilogue when C is 16-bit, beta = 0, N % 8 = 0; 1: always the direct one   */
    int classes;    /* 0: bands cut at bit-length classes of the row length; 1: no classes; 2: 2 bits/class   */
    int cluster;    /* BM = 128: 0 default (none), 1 2-CTA clusters with the TMA-store epilogue (16-bit C, beta 0),
                       2 none, 3 2-CTA clusters with 4 stages and the direct epilogue (any C)                     */
    int b64_mode;   /* BM = 64: 0 default, 1 split (64 x 256 tile, the consumers split N), 2 paired block rows  */
    int pf;         /* L2 prefetch lead in stages: 0 default (off), -1 off, > 0 that many stages (<= 32 blocks) */
    int cl_acq;     /* clusters: 1 = consumers wait on the full barrier with cluster-scope acquire (run-4 kernel) */
    int l2hint;     /* 1: A loads evict_last (reused across N tiles), TMA-stored C evict_first (never re-read);
                       2: C evict_first only; 0 default: both on short (mean < 12 blocks), unskewed rows (BM = 128 op N,
                       session 8), none elsewhere; -1: none                                                  */
    int ring4;      /* TMA-store epilogue configurations: 0 default, 1 three stages + the whole tile staged at once,
                       2 four stages + half the tile staged per round (two rounds)                            */
    int split;      /* BM = 128 long-row split (parts of L .. 2L - 1 blocks on different CTAs, fp32 partials
                       added by the row's last part): 0 default (the automatic rules), -1 off, -2 the automatic
                       rules of sessions 6-21 (no long-row rule), -3 the automatic rules with the long-row rule
                       (B64_SKEW_RULE) in any configuration, > 0 that L (whatever
                       the grid)                                                                              */
    int split_mb;   /* workspace budget for the split's partial tiles in MB (0: default)                      */
    int tgroup;     /* N tiles per tile group: the queue takes tgroup N tiles through every band before the next
                       tiles (0 default: all N tiles, i.e. band after band)                                  */
    int out_max_grid; /* written by the launcher: the persistent grid before capping by the item count        */
    int out_split_len; /* written by the launcher: the split length L it asked the prep kernel for (0: none)  */
    int out_pf;       /* written by the launcher: the prefetch lead in blocks it used (0: off)                 */
    int out_prep;     /* written by the launcher: 1 the prep kernel ran, 0 the work list came from the pattern cache,
                         2 direct mode (no prep, no list: one item per CTA) */
    int out_part;     /* written by the launcher: partition queues allowed with 1 tile groups (skewed rows only
                         unless forced), 2 row groups forced, 3 row groups on unskewed rows (0: none)      */
    int part_mode;        /* BM = 128 L2-partition queues, once the GPU's map is known: 0 default (tile groups
                             on skewed rows), -1 off, 1 tile groups (N tiles split between the partitions)
                             whatever the rows, 2 row groups (units split by rank parity between the
                             partitions, each walking every N tile: A read by one partition only) whatever the
                             rows, 3 session 8's default (= 0 while ROW_GROUPS_DEFAULT is off), 4 op N: row
                             groups on unskewed rows, tile groups on skewed ones (session 9's candidate
                             default). Row groups never with the long-row split (on the b64 64 x 512 tile the
                             long-row rule sets L on most calls: row groups there need split -1 or -2).       */
    int l2promo;          /* TMA L2 promotion of the A / B loads: 0 default (256 B), 1 none, 2 64 B, 3 128 B  */
    int fab;              /* session 9 diagnostics, TIMING ONLY (wrong results): bit 1 no C store (the tile is
                             staged, not written), bit 2 every A load reads block 0, bit 4 every B load reads
                             N tile 0's panel (BM = 128 op-N configurations)                             */
    const void *part_tab; /* device array [1024] of unsigned char: smid -> L2 partition (0 / 1) to use instead of
                             the discovered map (bench/l2_partition_probe.sh's ncu table; tests)            */
    void *prof_buf;   /* device buffer of 16 x grid unsigned long long cycle counters, read by kernels built
                         with -DBSK_HOPPER_PROF (bench/hopper_probe.c --prof); NULL otherwise                 */
    void *prep_prof_buf; /* device buffer of 16 unsigned long long or NULL: in -DBSK_HOPPER_PROF builds the prep
                            kernel's phase ends and the main kernel's entry / end of its wait, in %globaltimer ns
                            (PREP_T_*, spmm_kernel.cuh; bench/hopper_probe.c --prepprof)                       */
    int part_tg;    /* N tiles per tile group inside each L2-partition queue (0: the default — 1 on the b64
                       64 x 512 tile, op N (B64_SKEW_RULE), else half the N tiles; -1, or >= the N tiles: half
                       the N tiles, one group per partition, as sessions 8-21). Partition 0 takes the first
                       ceil(groups / 2) groups: with a size that does not divide the tiles evenly the halves can
                       be uneven (5 tiles in groups of 2: 4 and 1) — a probe knob there, not a default          */
    int part_long;  /* long rows first inside the L2-partition queues with tile groups (part_tg): 0 default (off),
                       -1 off, k > 0: the units of >= pow2ceil(k x mean) blocks (a class boundary) take every N
                       tile of their partition first, longest first, before the other units walk the tile groups
                       (session 23: a long row's items start early, the short rows' B reads of a group fall in one
                       window). Only with the length classes on (classes 0) and the tile-group partition queues.
                       Measured on b128 skewed (hopper_probe --longfirst): H100 d 0.1 / 0.25 +2 / +4 %, H200 d 0.1
                       -3 to -6 %: a knob, not a default. The queue order stays a bijection and keeps each N tile's
                       units in rank order (a split row's combining part last), brute-forced on the CPU.       */
    int out_long_len; /* written by the launcher: the long-unit threshold it gave the prep kernel (0: part_long off) */
    int slot_epi;   /* the 64 x 512 tile with 16-bit C, beta 0: 0 C staged in the last ring slot and TMA-stored
                       (session 20), -1 the direct epilogue                                                      */
    int pair_match; /* paired b64 tiles (op N and T): 0 default (PAIR_MATCH_DEFAULT with the work list cached,
                       PAIR_MATCH_UNCACHED_DEFAULT without), 1 pair each block row with a row that shares its columns
                       (the prep kernel's full matching, session 24), 2 the same over the 16 rows on either side only
                       (windowed, session 25: cheap enough for every call), -1 adjacent rows                       */
    int out_pair_match; /* written by the launcher: the matching the prep kernel was asked for (0 adjacent rows, 1
                           full, 2 windowed)                                                                      */
    void *pair_rows_out; /* device int2 array of >= ceil(units / 2) entries or NULL: paired tiles copy each unit's
                            two block rows there (tests)                                                        */
    int dram_gbs;   /* the DRAM bandwidth (GB/s) the b64 dispatch assumes: 0 the device's (tests set both sides of
                       B64_MATCHED_PAIR_MAX_DRAM_GBS)                                                          */
    const unsigned *out_queue; /* written by the launcher: direct mode's queue (8 words of the context's zeroed block,
                                  zero again after each call) or NULL; the test reads it back */
    int direct;     /* direct mode (no prep kernel where every item has a CTA of its own, no split, no matching, no
                       cached list; session 26): 0 default (DIRECT_DEFAULT), -1 off, 1 on, 2 also with more items than
                       CTAs (an experiment: the items in unsorted, tile-major order from the queue, no bands)        */
    double window_min_flop; /* the flop on kept blocks from which lists rebuilt on every call get the windowed
                               matching: 0 PAIR_WINDOW_MIN_FLOP (tests set it low)                          */
};
extern struct bsk_hopper_tune_s bsk__hopper_tune;
/* Probe hook of src/cuda/l2_partition.cu (tests, bench/hopper_probe.c): runs the L2-partition map discovery to
   completion (host-synchronous) and copies out the table (1025 bytes: smid -> 0 / 1, byte 1024 = valid), the
   per-block chase latencies (cycles per load) and SM ids; *n = the SM count. */
bsk_status bsk__cuda_l2_partition_probe(bsk_context *ctx, unsigned char *table, float *lat, int *smid, int *n);
/* The device's peak DRAM bandwidth in GB/s as the b64 dispatch reads it (src/cuda/backend.cu; 0: not reported). */
int bsk__cuda_dram_gbs(int device);
#ifdef __cplusplus
}
#endif
#endif

/* attn_common.h — what the attention benchmarks (`bsk attention`, cmd_attention.c; `bsk attention-bwd`,
   cmd_attention_bwd.c) share, in tools/attn_common.c: the random block layouts they time, and their GPU
   setup, cuBLAS reference and JSON frame. `cmd` is the subcommand's name ("attention", "attention-bwd"):
   messages read "bsk <cmd>: ...". */
#ifndef BSK_ATTN_COMMON_H
#define BSK_ATTN_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include "cli.h"

/* Per (batch, head, query block) of a B x H layout of S x S with bs x bs tiles: round(density · candidates)
   key blocks at random (at least 1; candidates: every block, or causal: the diagonal and the blocks before
   it, the diagonal always kept). Deterministic for a seed. */
bsk_status attn_bench_layout(int64_t S, int32_t bs, int32_t B, int32_t H, double density, int causal, uint64_t seed,
                             bsk_attn_layout *out);

/* A timed layout's size: kept tiles, their share of all B·H·mq² tiles, and the forward's flop on them
   (4 · kept · bs² · D, diagonal tiles counted whole). */
void attn_bench_tiles(const bsk_attn_layout *L, int64_t B, int64_t H, int32_t bs, int64_t D, int64_t *kept,
                      double *density_actual, double *flop);
/* Forward params over device [B, S, H, D] bf16 tensors q, k, v, o, lse and the device layout L. */
bsk_attention_params attn_bench_params(void *q, void *k, void *v, void *o, float *lse, const bsk_attn_layout *L, int64_t B,
                                       int64_t S, int64_t H, int64_t D, int causal);

/* Opens `json` and writes the top-level object's "meta" and the first keys of "config" (batch, heads, seq),
   leaving "config" open for the caller's keys; NULL (message on stderr) when the file cannot be written. */
FILE *attn_bench_json_begin(cli_json *j, const char *cmd, const char *json, int64_t B, int64_t H, int64_t S);
/* Closes what is open, the file, and says where it went. */
void attn_bench_json_finish(cli_json *j, FILE *f, const char *json);

#ifdef BSK_WITH_CUDA
#include <cublas_v2.h>

/* A CUDA context, a cuBLAS handle and a GPU timer: CLI_OK, or CLI_FAIL (message on stderr, nothing held). */
int attn_bench_open(const char *cmd, bsk_context **ctx, cublasHandle_t *blas, cli_gpu_timer *timer);
void attn_bench_close(bsk_context *ctx, cublasHandle_t blas, cli_gpu_timer *timer);
/* cuBLAS dense bf16 GEMM 8192^3 (fp32 compute) in TFLOPS, the reference of every run; printed too. */
double attn_bench_cublas_tflops(cublasHandle_t blas, cli_gpu_timer *timer, int iters);
#endif

#endif

/* examples/spmm.c — the README's five lines as a whole program: prune a dense weight matrix to its non-zero
   64 x 64 blocks, multiply, check against a plain dense product, and show what a bad call returns.

   Build and run (make builds it as build/bin/example_spmm):  build/bin/example_spmm
   Host arrays run on the CPU backend; device arrays (bsk_bsr_clone(&A, BSK_MEM_DEVICE, ...), B and C in
   cudaMalloc'd memory with mem = BSK_MEM_DEVICE) run the same call on the GPU, asynchronously on the context's
   stream (bsk_synchronize waits). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "bsk.h"

enum { M = 512, K = 384, N = 96, BS = 64 };

static float frand(uint64_t *s) /* xorshift64*, uniform in [-1, 1) */
{
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return (float)((*s * 2685821657736338717ull) >> 40) / (float)(1 << 23) - 1.0f;
}

int main(void)
{
    float *w = calloc((size_t)M * K, sizeof *w), *b = malloc((size_t)K * N * sizeof *b);
    float *c = malloc((size_t)M * N * sizeof *c);
    if (!w || !b || !c) return 1;
    uint64_t seed = 42;
    /* a weight matrix with a quarter of its 64 x 64 blocks non-zero (block (i, j) kept when (i + 2j) % 4 == 0) */
    for (int i = 0; i < M; i++)
        for (int j = 0; j < K; j++)
            if ((i / BS + 2 * (j / BS)) % 4 == 0) w[(size_t)i * K + j] = frand(&seed);
    for (size_t i = 0; i < (size_t)K * N; i++) b[i] = frand(&seed);

    bsk_context *ctx = NULL;
    bsk_status s = bsk_create(&ctx, BSK_BACKEND_AUTO); /* CPU or CUDA: follows the memory of the operands */
    if (s) { fprintf(stderr, "bsk_create: %s\n", bsk_status_string(s)); return 1; }

    bsk_dense W = {M, K, K, BSK_F32, BSK_MEM_HOST, w};
    bsk_bsr A;
    if ((s = bsk_bsr_from_dense(&W, BS, BS, 0.0f, &A))) { /* keep the blocks with a non-zero entry */
        fprintf(stderr, "bsk_bsr_from_dense: %s\n", bsk_status_string(s));
        bsk_destroy(ctx);
        return 1;
    }
    printf("A: %d x %d, %lld of %lld blocks of %d x %d kept\n", M, K, (long long)A.nnzb,
           (long long)(bsk_bsr_mb(&A) * bsk_bsr_nb(&A)), BS, BS);

    bsk_dense B = {K, N, N, BSK_F32, BSK_MEM_HOST, b}, C = {M, N, N, BSK_F32, BSK_MEM_HOST, c};
    s = bsk_spmm(ctx, BSK_OP_N, 1.0f, &A, &B, 0.0f, &C); /* C = A·B */
    if (!s) s = bsk_synchronize(ctx);
    if (s) fprintf(stderr, "bsk_spmm: %s\n", bsk_status_string(s));

    /* the dense product the sparse one replaces, in double */
    double num = 0.0, den = 0.0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0.0;
            for (int k = 0; k < K; k++) acc += (double)w[(size_t)i * K + k] * b[(size_t)k * N + j];
            num += (c[(size_t)i * N + j] - acc) * (c[(size_t)i * N + j] - acc);
            den += acc * acc;
        }
    const double rel = sqrt(num / den);
    printf("C = A·B: |C - dense W·B| / |dense W·B| = %.2e\n", rel);

    /* a bad call: B with the wrong number of rows — a named status, and C is left as it was */
    bsk_dense Bbad = {K + 1, N, N, BSK_F32, BSK_MEM_HOST, b};
    c[0] = 12345.0f;
    bsk_status bad = bsk_spmm(ctx, BSK_OP_N, 1.0f, &A, &Bbad, 0.0f, &C);
    printf("bsk_spmm with a %d-row B: %s (C untouched: %s)\n", K + 1, bsk_status_string(bad),
           c[0] == 12345.0f ? "yes" : "no");

    const int ok = !s && rel < 1e-5 && bad == BSK_ERR_SHAPE_MISMATCH && c[0] == 12345.0f;
    bsk_bsr_free(&A);
    bsk_destroy(ctx);
    free(w), free(b), free(c);
    printf("%s\n", ok ? "OK" : "FAILED");
    return ok ? 0 : 1;
}

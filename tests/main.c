/* main.c — runs every registered test; `bsk_tests [substring]` runs those whose name contains it.
 * BSK_TEST_FROM=<name> starts at that test (resuming a run cut off by a timeout). Each line gives the test's
 * wall time, so the slow ones are visible. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "harness.h"

#define MAX_TESTS 1024
static struct { const char *name, *file; bsk_test_fn fn; } tests[MAX_TESTS];
static int ntests;
static uint64_t run_seed;
static bsk_rng test_rng;

void bsk_test_register(const char *name, const char *file, bsk_test_fn fn)
{
    if (ntests < MAX_TESTS) { tests[ntests].name = name; tests[ntests].file = file; tests[ntests].fn = fn; ntests++; }
}

uint64_t bsk_test_seed(void) { return run_seed; }
bsk_rng *bsk_test_rng(void) { return &test_rng; }
int bsk_test_stress_scale(void)
{
    const char *e = getenv("BSK_STRESS_SCALE");
    long v = e ? strtol(e, NULL, 10) : 1;
    return v < 1 ? 1 : v > 1000 ? 1000 : (int)v;
}

void bsk_rng_init(bsk_rng *r, uint64_t seed) { r->s = seed ? seed : 0x9e3779b97f4a7c15ull; }
uint64_t bsk_rng_next(bsk_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull); /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
double bsk_rng_uniform(bsk_rng *r) { return (double)(bsk_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }
float bsk_rng_sym(bsk_rng *r)
{
    float v;
    do { v = (float)(2.0 * bsk_rng_uniform(r) - 1.0); } while (v == 0.0f);
    return v;
}
int64_t bsk_rng_int(bsk_rng *r, int64_t lo, int64_t hi) { return lo + (int64_t)(bsk_rng_next(r) % (uint64_t)(hi - lo + 1)); }

int main(int argc, char **argv)
{
    const char *filter = argc > 1 ? argv[1] : NULL;
    const char *env = getenv("BSK_TEST_SEED");
    run_seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    printf("bsk_tests: seed %llu (set BSK_TEST_SEED to repeat), library %s\n", (unsigned long long)run_seed,
           bsk_version_string());
    const char *from = getenv("BSK_TEST_FROM");
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < ntests; i++) {
        if (from && *from) {
            if (strcmp(tests[i].name, from) != 0) continue;
            from = NULL;
        }
        if (filter && !strstr(tests[i].name, filter)) continue;
        bsk_test_ctx t = {0};
        uint64_t h = 1469598103934665603ull;
        for (const char *c = tests[i].name; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
        bsk_rng_init(&test_rng, run_seed ^ h);
        fflush(stdout);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        tests[i].fn(&t);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (t.failed) { failed++; printf("FAIL  %s (%d checks) %.1f s\n", tests[i].name, t.failed, sec); }
        else if (t.skipped) { skipped++; printf("skip  %s: %s\n", tests[i].name, t.skip_msg); }
        else { passed++; printf("ok    %s  %.1f s\n", tests[i].name, sec); }
        fflush(stdout);
    }
    if (from && *from) { /* the run never started: say so, rather than report 0 tests as a pass */
        printf("BSK_TEST_FROM=%s names no test\n", from);
        failed++;
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}

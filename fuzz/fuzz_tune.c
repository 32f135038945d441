/* fuzz_tune.c — arbitrary bytes into the tune-file parser (bsk__tune_parse, what bsk_tune_load runs on a file's
   text): it must return a documented status, a table only on success, and never read past the input. */
#include <stdlib.h>
#include "../src/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct bsk__tune_table *t = NULL;
    bsk_status s = bsk__tune_parse((const char *)data, size, "cpu", &t);
    if (s != BSK_SUCCESS && s != BSK_ERR_INVALID_ARGUMENT && s != BSK_ERR_UNSUPPORTED) abort();
    if (s != BSK_SUCCESS && t) abort();
    free(t);
    return 0;
}

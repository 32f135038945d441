/* context.c — the context handle and device queries. */
#include <stdlib.h>
#include "../internal.h"

bsk_status bsk_create(bsk_context **ctx, bsk_backend backend)
{
    if (!ctx) return BSK_ERR_NULL_POINTER;
    if (backend != BSK_BACKEND_AUTO && backend != BSK_BACKEND_CPU && backend != BSK_BACKEND_CUDA)
        return BSK_ERR_INVALID_ARGUMENT;
    int has_device = backend == BSK_BACKEND_CPU ? 0 : bsk_cuda_device_count() > 0;
    if (backend == BSK_BACKEND_CUDA && !has_device) return BSK_ERR_NO_DEVICE;
    bsk_context *c = (bsk_context *)calloc(1, sizeof *c);
    if (!c) return BSK_ERR_OUT_OF_MEMORY;
    c->backend = backend;
    c->has_device = has_device;
    c->last_kernel = "none";
    const char *tune_file = getenv("BSK_TUNE_FILE"); /* a file it cannot use is skipped (see bsk.h) */
    if (tune_file && *tune_file) (void)bsk_tune_load(c, tune_file);
    *ctx = c;
    return BSK_SUCCESS;
}

void bsk_destroy(bsk_context *ctx)
{
    if (!ctx) return;
    if (ctx->has_device) {
        (void)bsk_cuda_synchronize(ctx);
        bsk_cuda_release(ctx);
    }
    bsk_tune_clear(ctx);
    free(ctx);
}

bsk_status bsk_set_stream(bsk_context *ctx, void *stream)
{
    if (!ctx) return BSK_ERR_NULL_POINTER;
    if (stream != ctx->stream && ctx->cuda) {
        /* the workspace and pattern caches were last used on the old stream: order that work first */
        bsk_status s = bsk_cuda_stream_switch(ctx, stream);
        if (s) return s;
    }
    ctx->stream = stream;
    return BSK_SUCCESS;
}

bsk_status bsk_get_stream(const bsk_context *ctx, void **stream)
{
    if (!ctx || !stream) return BSK_ERR_NULL_POINTER;
    *stream = ctx->stream;
    return BSK_SUCCESS;
}

int bsk_has_device(const bsk_context *ctx) { return ctx ? ctx->has_device : 0; }

bsk_status bsk_synchronize(bsk_context *ctx)
{
    if (!ctx) return BSK_ERR_NULL_POINTER;
    return ctx->has_device ? bsk_cuda_synchronize(ctx) : BSK_SUCCESS;
}

bsk_status bsk_set_pattern_cache(bsk_context *ctx, int enable)
{
    if (!ctx) return BSK_ERR_NULL_POINTER;
    if (enable != 0 && enable != 1) return BSK_ERR_INVALID_ARGUMENT;
    /* either way the entries go: off, nothing may outlive its pattern; on, entries left by calls without the cache
       (each rebuilt per call, so their patterns may have been rewritten since) must not be taken as cached */
    if (enable != ctx->pattern_cache && ctx->cuda) bsk_cuda_forget_patterns(ctx);
    ctx->pattern_cache = enable;
    return BSK_SUCCESS;
}

bsk_status bsk_forget_patterns(bsk_context *ctx)
{
    if (!ctx) return BSK_ERR_NULL_POINTER;
    if (ctx->cuda) bsk_cuda_forget_patterns(ctx);
    return BSK_SUCCESS;
}

const char *bsk_last_kernel(const bsk_context *ctx) { return ctx && ctx->last_kernel ? ctx->last_kernel : "none"; }

bsk_status bsk_device_query(bsk_device_info *info)
{
    if (!info) return BSK_ERR_NULL_POINTER;
    return bsk_cuda_device_query(info);
}

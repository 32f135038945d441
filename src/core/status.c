/* status.c — status strings, version, dtype sizes. */
#include "../internal.h"

const char *bsk_status_string(int s)
{
    switch (s) {
    case BSK_SUCCESS: return "success";
    case BSK_ERR_INVALID_ARGUMENT: return "invalid argument";
    case BSK_ERR_NULL_POINTER: return "NULL pointer";
    case BSK_ERR_INVALID_BSR: return "invalid BSR structure";
    case BSK_ERR_SHAPE_MISMATCH: return "shape mismatch";
    case BSK_ERR_UNSUPPORTED: return "unsupported dtype, layout or operation";
    case BSK_ERR_MISALIGNED: return "misaligned pointer";
    case BSK_ERR_WRONG_LOCATION: return "pointer in the wrong memory (host/device)";
    case BSK_ERR_OVERFLOW: return "size overflow";
    case BSK_ERR_OUT_OF_MEMORY: return "out of memory";
    case BSK_ERR_NO_DEVICE: return "no CUDA device";
    case BSK_ERR_CUDA: return "CUDA error";
    case BSK_ERR_INTERNAL: return "internal error";
    case BSK_ERR_BAD_LAYOUT: return "bad dense layout (ld < cols)";
    default: return "unknown status";
    }
}

#define BSK_STR2(x) #x
#define BSK_STR(x) BSK_STR2(x)

unsigned bsk_version(void) { return BSK_VERSION_NUMBER; }

const char *bsk_version_string(void)
{
    return BSK_STR(BSK_VERSION_MAJOR) "." BSK_STR(BSK_VERSION_MINOR) "." BSK_STR(BSK_VERSION_PATCH);
}

size_t bsk_dtype_size(bsk_dtype t)
{
    switch (t) {
    case BSK_F32: return 4;
    case BSK_F16: return 2;
    case BSK_BF16: return 2;
    default: return 0;
    }
}

/* convert.c — fp16 / bf16 <-> fp32 on the host, exact and round-to-nearest-even. */
#include <string.h>
#include <math.h>
#include "../internal.h"

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float bsk__half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
    if (exp == 0x1f) return u2f(sign | 0x7f800000u | (man << 13));          /* inf / nan */
    if (exp == 0) {                                                         /* zero / subnormal */
        float v = (float)man * 5.9604644775390625e-8f;                      /* 2^-24 */
        return sign ? -v : v;
    }
    return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t bsk__float_to_half(float f)
{
    uint32_t u = f2u(f), sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0)); /* inf/nan */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);            /* rounds past 65504: inf */
    if (a < 0x38800000u) {                                              /* subnormal half or zero */
        /* value = a * 2^-24 units; round to nearest even integer multiple of 2^-24 */
        float v = u2f(a) * 16777216.0f;                                 /* exact scaling by 2^24 */
        uint32_t m = (uint32_t)lrintf(v);                               /* banker's rounding mode default */
        return (uint16_t)(sign | m);
    }
    uint32_t e = ((a >> 23) - 112) << 10, m = (a >> 13) & 0x3ffu;
    uint32_t h = e | m, rest = a & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

float bsk__bf16_to_float(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t bsk__float_to_bf16(float f)
{
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float bsk__load(const void *p, bsk_dtype t, int64_t i)
{
    switch (t) {
    case BSK_F32: return ((const float *)p)[i];
    case BSK_F16: return bsk__half_to_float(((const uint16_t *)p)[i]);
    default: return bsk__bf16_to_float(((const uint16_t *)p)[i]);
    }
}

void bsk__store(void *p, bsk_dtype t, int64_t i, float v)
{
    switch (t) {
    case BSK_F32: ((float *)p)[i] = v; break;
    case BSK_F16: ((uint16_t *)p)[i] = bsk__float_to_half(v); break;
    default: ((uint16_t *)p)[i] = bsk__float_to_bf16(v); break;
    }
}

/* bsk_dlpack.h — the DLPack structs the extension consumes, declared from the public ABI (v0.8 layout,
   the unversioned "dltensor" capsule every producer still emits when the consumer asks for no
   max_version). Only what _bsk.c reads is here; the layout must match the ABI byte for byte. */
#ifndef BSK_DLPACK_H
#define BSK_DLPACK_H

#include <stdint.h>

/* Device types we accept; the numbers are the ABI's. */
enum {
    BSK_DL_CPU = 1,          /* kDLCPU                          */
    BSK_DL_CUDA = 2,         /* kDLCUDA                         */
    BSK_DL_CUDA_HOST = 3,    /* kDLCUDAHost: pinned host memory */
    BSK_DL_CUDA_MANAGED = 13 /* kDLCUDAManaged                  */
};

/* Data type codes (DLDataTypeCode). */
enum {
    BSK_DL_INT = 0,
    BSK_DL_UINT = 1,
    BSK_DL_FLOAT = 2,
    BSK_DL_OPAQUE = 3,
    BSK_DL_BFLOAT = 4,
    BSK_DL_COMPLEX = 5,
    BSK_DL_BOOL = 6
};

typedef struct {
    int32_t device_type; /* DLDeviceType is a C enum: int-sized on every ABI DLPack supports */
    int32_t device_id;
} bsk_DLDevice;

typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} bsk_DLDataType;

typedef struct {
    void *data;
    bsk_DLDevice device;
    int32_t ndim;
    bsk_DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL means compact row-major */
    uint64_t byte_offset;
} bsk_DLTensor;

typedef struct bsk_DLManagedTensor {
    bsk_DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct bsk_DLManagedTensor *self);
} bsk_DLManagedTensor;

#endif

SHELL := /bin/bash
# BlackwellSparseK — build.   make            : lib/libbsk.{so,a} and bin/bsk
#                             make test       : build and run the test suite (GPU tests skip without a GPU)
#                             make test-asan  : host code under ASan + UBSan, CPU test suite
#                             make bench      : SpMM benchmark (GPU: vs cuBLAS / cuSPARSE; CPU: vs OpenBLAS)
#                             make sass       : dump the kernels' SASS and count HGMMA per kernel
#                             make fuzz       : libFuzzer targets, each for FUZZ_SECONDS
# Without nvcc (or with CUDA=0) the CUDA backend is replaced by a stub that reports no device.

CC      ?= cc
NVCC    ?= nvcc
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(shell command -v $(NVCC) 2>/dev/null))
CUDA    ?= $(if $(CUDA_HOME),1,0)
BUILD   ?= build
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
MAKEFLAGS += -j$(JOBS)

CFLAGS_BASE = -std=c11 -O3 -g -Wall -Wextra -Wno-unused-parameter -fPIC -pthread -fvisibility=hidden \
              -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc
CFLAGS  ?=
ALL_CFLAGS = $(CFLAGS_BASE) $(CFLAGS)
LDLIBS  = -lm -pthread

# Architectures we ship: Hopper machine code (wgmma/TMA need the "a" target), Ampere machine code for
# the portable path, and compute_80 PTX for anything newer. Hopper-only files build for sm_90a alone.
GENCODE_PORTABLE = -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_80,code=sm_80 \
                   -gencode arch=compute_80,code=compute_80
GENCODE_HOPPER   = -gencode arch=compute_90a,code=sm_90a
NVCCFLAGS ?= -O3 -std=c++17 -lineinfo -Xcompiler -fPIC,-fvisibility=hidden -Iinclude -Isrc \
             --expt-relaxed-constexpr -Xptxas -warn-spills
# Extra nvcc flags for probe builds only (e.g. NVCC_EXTRA=-DBSK_HOPPER_PROF: the SpMM kernel's cycle counters).
NVCC_EXTRA ?=
comma := ,
# What `bsk preflight` reports: the code= targets of the portable gencode list actually built.
ARCH_LIST = $(patsubst code=%,%,$(filter code=%,$(subst $(comma), ,$(GENCODE_PORTABLE))))

HOST_SRCS := $(wildcard src/core/*.c src/bsr/*.c src/cpu/*.c src/attention/*.c)
ifeq ($(CUDA),1)
PORTABLE_CU := $(wildcard src/cuda/*.cu src/cuda/portable/*.cu src/cuda/attention/*.cu)
HOPPER_CU   := $(wildcard src/cuda/hopper/*.cu)
CUDA_OBJS   := $(PORTABLE_CU:%.cu=$(BUILD)/%.o) $(HOPPER_CU:%.cu=$(BUILD)/%.o)
CUDA_LIBS   := -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt
TOOL_CUDA_LIBS := -L$(CUDA_HOME)/lib64 -lcublas -lcusparse -lcudart_static -ldl -lrt
ALL_CFLAGS  += -DBSK_WITH_CUDA=1 -I$(CUDA_HOME)/include
else
HOST_SRCS   += src/cuda/stub.c
CUDA_OBJS   :=
CUDA_LIBS   :=
TOOL_CUDA_LIBS :=
endif
HOST_OBJS := $(HOST_SRCS:%.c=$(BUILD)/%.o)
LIB_OBJS  := $(HOST_OBJS) $(CUDA_OBJS)

TOOL_SRCS := $(wildcard tools/*.c)
TEST_SRCS := $(wildcard tests/*.c)
# (make 4.3 keeps "\#" literally inside a function call; a variable holding "#" works in every version)
HASH := \#
HAVE_CBLAS := $(shell printf '$(HASH)include <cblas.h>\nint main(void){return 0;}' | $(CC) -x c - -o /dev/null -lopenblas 2>/dev/null && echo 1)
ifeq ($(HAVE_CBLAS),1)
TOOL_CFLAGS = -DBSK_HAVE_CBLAS=1
TOOL_BLAS   = -lopenblas
endif

.PHONY: nsys all lib test test-asan bench probes sass fuzz fuzz-build clean
all: lib $(BUILD)/bin/bsk $(BUILD)/bin/bsk_tests $(BUILD)/bin/example_spmm

lib: $(BUILD)/lib/libbsk.so $(BUILD)/lib/libbsk.a

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/src/cuda/hopper/%.o: src/cuda/hopper/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(NVCC_EXTRA) $(GENCODE_HOPPER) -DBSK_ARCH_LIST='"$(ARCH_LIST)"' -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(NVCC_EXTRA) $(GENCODE_PORTABLE) -DBSK_ARCH_LIST='"$(ARCH_LIST)"' -MMD -MP -c $< -o $@

$(BUILD)/lib/libbsk.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# The shared library carries the CUDA runtime statically: it needs only the driver at run time.
$(BUILD)/lib/libbsk.so: $(LIB_OBJS)
	@mkdir -p $(dir $@)
ifeq ($(CUDA),1)
	$(NVCC) -shared $(GENCODE_PORTABLE) -Xcompiler -fPIC $^ -o $@ -lcudart_static -ldl -lrt -lpthread
else
	$(CC) -shared $^ -o $@ $(LDLIBS)
endif

# Tools and tests link the static library (device code included through nvcc's device link).
$(BUILD)/tools/%.o: tools/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(TOOL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/bin/bsk: $(TOOL_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/lib/libbsk.a
	@mkdir -p $(dir $@)
	$(CC) $^ -o $@ $(TOOL_CUDA_LIBS) $(TOOL_BLAS) $(LDLIBS) -lstdc++

$(BUILD)/bin/bsk_tests: $(TEST_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/lib/libbsk.a
	@mkdir -p $(dir $@)
	$(CC) $^ -o $@ $(CUDA_LIBS) $(LDLIBS) -lstdc++

# examples/: small whole programs over the public API (each checks its own result and exits non-zero if wrong)
$(BUILD)/examples/%.o: examples/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/bin/example_%: $(BUILD)/examples/%.o $(BUILD)/lib/libbsk.a
	@mkdir -p $(dir $@)
	$(CC) $^ -o $@ $(CUDA_LIBS) $(LDLIBS) -lstdc++

test: $(BUILD)/bin/bsk_tests
	$(BUILD)/bin/bsk_tests

# Host code only (CUDA stub) with ASan + UBSan; halts on the first report.
test-asan:
	$(MAKE) BUILD=build-asan CUDA=0 CFLAGS="-O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	        LDLIBS="-lm -pthread -fsanitize=address,undefined" build-asan/bin/bsk_tests
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 build-asan/bin/bsk_tests

bench: $(BUILD)/bin/bsk
	$(BUILD)/bin/bsk bench spmm

# Device-run probes (bench/*.sh build them through these targets, and CI compiles them): the Hopper SpMM experiment
# probes (knobs of src/cuda/hopper/tune.h / spmm_small_tune.h, vs cuBLAS) and the L2-partition probe (sm_90a).
# balance_model: a CPU model of balanced items at 2048^3 (session 28; runs anywhere).
probes: $(BUILD)/bin/hopper_probe $(BUILD)/bin/small_probe $(BUILD)/bin/sddmm_probe $(BUILD)/bin/l2_partition_probe \
        $(BUILD)/bin/smem_ceiling_probe $(BUILD)/bin/balance_model
$(BUILD)/bin/hopper_probe $(BUILD)/bin/small_probe $(BUILD)/bin/sddmm_probe $(BUILD)/bin/balance_model: $(BUILD)/bin/%: bench/%.c bench/probe_util.h $(BUILD)/lib/libbsk.a
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -Wall -Wextra -Iinclude -Isrc -I$(CUDA_HOME)/include $< -o $@ $(BUILD)/lib/libbsk.a \
	    -L$(CUDA_HOME)/lib64 -lcublas -lcudart_static -ldl -lrt -lpthread -lm -lstdc++
# The shared-memory / ingress ceiling of a tile shape (session 20): TMA + wgmma with no sparse bookkeeping.
$(BUILD)/bin/smem_ceiling_probe: bench/smem_ceiling_probe.cu bench/probe_util.h src/cuda/hopper/tma.cu
	@mkdir -p $(dir $@)
	$(NVCC) -O2 $(GENCODE_HOPPER) -Iinclude -Isrc $< src/cuda/hopper/tma.cu -o $@ -lcublas
$(BUILD)/bin/l2_partition_probe: bench/l2_partition_probe.cu
	@mkdir -p $(dir $@)
	$(NVCC) -O2 $(GENCODE_HOPPER) $< -o $@

# Nsight Systems: one SpMM run of the CLI under nsys (CUDA kernels + the library's NVTX ranges, domain "bsk", each
# with a mark naming the kernel the dispatcher chose), report in $(BUILD)/bsk_nsys.nsys-rep, NVTX summary printed.
# NSYS_ARGS: the bsk command line to record.
NSYS_ARGS ?= spmm --m 4096 --n 4096 --k 4096 --block 128 --density 0.25 --reps 5
nsys: $(BUILD)/bin/bsk
	nsys profile --trace=cuda,nvtx --force-overwrite true -o $(BUILD)/bsk_nsys $(BUILD)/bin/bsk $(NSYS_ARGS)
	nsys stats --report nvtx_sum --format csv $(BUILD)/bsk_nsys.nsys-rep

sass: $(CUDA_OBJS)
	@for o in $(CUDA_OBJS); do echo "== $$o"; cuobjdump --dump-sass $$o | awk '/Function :/{f=$$3} /HGMMA/{n[f]++} END{for (k in n) printf "  %-70s HGMMA x%d\n", k, n[k]}'; done

# libFuzzer targets: the host library (CUDA stub) built with clang + ASan + UBSan, each target run for
# FUZZ_SECONDS from its seed corpus (fuzz/corpus/<target>, read-only) plus a scratch corpus in build-fuzz/.
FUZZ_SECONDS ?= 30
FUZZ_TARGETS := $(patsubst fuzz/%.c,%,$(wildcard fuzz/fuzz_*.c))
FUZZ_CFLAGS = -std=c11 -O1 -g -Iinclude -Isrc -D_POSIX_C_SOURCE=200809L -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_LIB_OBJS = $(patsubst %.c,build-fuzz/%.o,$(wildcard src/core/*.c src/bsr/*.c src/cpu/*.c src/attention/*.c) src/cuda/stub.c)
build-fuzz/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
build-fuzz/fuzz_%: fuzz/fuzz_%.c $(FUZZ_LIB_OBJS)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer $^ -o $@ -lm -pthread
.SECONDARY: $(FUZZ_LIB_OBJS)
fuzz-build: $(addprefix build-fuzz/,$(FUZZ_TARGETS))
fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do mkdir -p build-fuzz/corpus/$$t fuzz/corpus/$$t; \
	  echo "== $$t for $(FUZZ_SECONDS) s"; \
	  build-fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -rss_limit_mb=2048 build-fuzz/corpus/$$t fuzz/corpus/$$t 2>&1 \
	    | grep -E 'stat::number_of_executed_units|ERROR|SUMMARY|crash|leak' ; \
	  test $${PIPESTATUS[0]} -eq 0 || exit 1; done

clean:
	rm -rf build build-asan build-fuzz

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

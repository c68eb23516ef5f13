/* Native reference for memprof pinlimit's climb by a route memprof does not use: the CUDA
 * driver API from C, clock_gettime(CLOCK_MONOTONIC) around each call. The calls, flags, sizes
 * and order of memprof.experiments.pinlimit.climb:
 *   per step: cuMemHostAlloc(half, 0) [alloc]; a byte written in every page [touch_pinned];
 *     a byte written in every page of the next half of one anonymous mapping [touch_registered];
 *     cuMemHostRegister(that half, DEVICEMAP | PORTABLE) [register]
 *   then: cuMemFreeHost of each half [free]; cuMemHostUnregister of each [unregister];
 *     cuMemHostRegister of every half at once [register_whole]; its unregister [unregister_whole]
 * Usage: pinlimit_reference STEP_GIB STEPS  ->  lines "NAME MEDIAN_MS_PER_GIB"
 * Build: nvcc -O2 -cudart none -o pinlimit_reference pinlimit_reference.c -lcuda (nvcc hands
 *   a .c to gcc -O2), or cc -O2 -I$CUDA/include ... -L$CUDA/lib64/stubs -lcuda
 */
#define _GNU_SOURCE  /* MAP_ANONYMOUS, clock_gettime under -std=c11 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define PAGE_BYTES 4096
#define GIB (1024.0 * 1024.0 * 1024.0)

#define CHECK(call)                                                             \
    do {                                                                        \
        CUresult status_ = (call);                                              \
        if (status_ != CUDA_SUCCESS) {                                          \
            const char* name_ = NULL;                                           \
            cuGetErrorName(status_, &name_);                                    \
            fprintf(stderr, "%s failed: %s\n", #call, name_ ? name_ : "?");     \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Time one statement, storing milliseconds per GiB of `bytes` in samples[i]. */
#define TIMED(samples, i, bytes, statement)                                     \
    do {                                                                        \
        double start_ = now_ms();                                               \
        statement;                                                              \
        (samples)[i] = (now_ms() - start_) / ((double)(bytes) / GIB);           \
    } while (0)

static int by_value(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static double median(double* values, int n) {
    qsort(values, n, sizeof(double), by_value);
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

static void touch(char* memory, size_t bytes) {
    for (size_t offset = 0; offset < bytes; offset += PAGE_BYTES) ((volatile char*)memory)[offset] = 1;
}

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s STEP_GIB STEPS\n", argv[0]);
        return 2;
    }
    size_t step = (size_t)atoi(argv[1]) << 30, half = step / 2;
    int steps = atoi(argv[2]);
    if (step == 0 || steps < 2) {
        fprintf(stderr, "STEP_GIB at least 1 and STEPS at least 2\n");
        return 2;
    }
    CUdevice device;
    CUcontext context;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&device, 0));
    CHECK(cuDevicePrimaryCtxRetain(&context, device));
    CHECK(cuCtxSetCurrent(context));
    unsigned int flags = CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE;
    char* mapping = mmap(NULL, steps * half, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapping == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    /* numpy asks for transparent huge pages on every large array it allocates (madvise, as
       here): memprof registers such memory, so the reference touches and registers it too */
    madvise(mapping, steps * half, MADV_HUGEPAGE);
    void** pinned = calloc(steps, sizeof(void*));
    double *alloc = calloc(steps, sizeof(double)), *touch_pinned = calloc(steps, sizeof(double));
    double *touch_registered = calloc(steps, sizeof(double)), *reg = calloc(steps, sizeof(double));
    double *freed = calloc(steps, sizeof(double)), *unreg = calloc(steps, sizeof(double));
    for (int i = 0; i < steps; i++) {
        char* chunk = mapping + i * half;
        TIMED(alloc, i, half, CHECK(cuMemHostAlloc(&pinned[i], half, 0)));
        TIMED(touch_pinned, i, half, touch(pinned[i], half));
        TIMED(touch_registered, i, half, touch(chunk, half));
        TIMED(reg, i, half, CHECK(cuMemHostRegister(chunk, half, flags)));
    }
    for (int i = 0; i < steps; i++) TIMED(freed, i, half, CHECK(cuMemFreeHost(pinned[i])));
    for (int i = 0; i < steps; i++)
        TIMED(unreg, i, half, CHECK(cuMemHostUnregister(mapping + i * half)));
    double whole[1], whole_unreg[1];
    TIMED(whole, 0, steps * half, CHECK(cuMemHostRegister(mapping, steps * half, flags)));
    TIMED(whole_unreg, 0, steps * half, CHECK(cuMemHostUnregister(mapping)));
    printf("alloc %.4f\n", median(alloc, steps));
    printf("touch_pinned %.4f\n", median(touch_pinned, steps));
    printf("touch_registered %.4f\n", median(touch_registered, steps));
    printf("register %.4f\n", median(reg, steps));
    printf("free %.4f\n", median(freed, steps));
    printf("unregister %.4f\n", median(unreg, steps));
    printf("register_whole %.4f\n", whole[0]);
    printf("unregister_whole %.4f\n", whole_unreg[0]);
    munmap(mapping, steps * half);
    CHECK(cuDevicePrimaryCtxRelease(device));
    return 0;
}

// Native reference for memprof alloc's pools and virtual memory management by a route memprof
// does not use: the CUDA driver API from C++, std::chrono around each call (memprof: CUPTI's
// record of each). The calls, order and state of memprof.experiments.pools, each cycle
// repeated on its own (as its _calls_and_growth):
//   pool (the default pool, then one with release threshold UINT64_MAX): synchronize, trim
//     to 0; allocate [new]; memset; cuMemFreeAsync [free]; allocate [reused]; synchronize;
//     free; cuStreamSynchronize [sync]; allocate [after sync]; free; synchronize; kept pool:
//     cuMemPoolTrimTo(0) [trim]; cuCtxGetDevice [call_floor]
//   vmm: reserve, create, map, set access, memset, synchronize, unmap, release, free range,
//     cuCtxGetDevice [call_floor] (a call that does next to nothing: the clock's own floor)
//   device: cuMemAlloc [alloc], memset twice, synchronize, cuMemFree [free]
// Usage: allocators_reference BYTES REPEATS  ->  lines "NAME BYTES MEDIAN_MS"
// Build: nvcc -O2 -std=c++17 -o allocators_reference allocators_reference.cu -lcuda
#include <cuda_runtime.h>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "reference.h"  // CHECK, median

static std::map<std::string, std::vector<double>> samples;
static bool recording = false;

// Time one driver call (the expression) with the steady clock, in milliseconds.
#define TIMED(name, call)                                                               \
    do {                                                                                \
        auto start = std::chrono::steady_clock::now();                                  \
        CHECK(call);                                                                    \
        auto end = std::chrono::steady_clock::now();                                    \
        if (recording)                                                                  \
            samples[name].push_back(std::chrono::duration<double, std::milli>(end - start).count()); \
    } while (0)

static void pool_cycle(const std::string& kind, CUmemoryPool pool, bool own_pool, size_t bytes,
                       CUstream stream, CUmemoryPool default_pool, CUmemoryPool kept) {
    CUdeviceptr p;
    auto allocate = [&](CUdeviceptr* out) {
        return own_pool ? cuMemAllocFromPoolAsync(out, bytes, pool, stream)
                        : cuMemAllocAsync(out, bytes, stream);
    };
    CHECK(cuStreamSynchronize(stream));
    CHECK(cuMemPoolTrimTo(default_pool, 0));  // every pool empty, as memprof's empty_pools
    CHECK(cuMemPoolTrimTo(kept, 0));
    TIMED(kind + "_alloc_new", allocate(&p));
    CHECK(cuMemsetD8Async(p, 0x5A, bytes, stream));
    TIMED(kind + "_free", cuMemFreeAsync(p, stream));
    TIMED(kind + "_alloc_reused", allocate(&p));
    CHECK(cuStreamSynchronize(stream));
    CHECK(cuMemFreeAsync(p, stream));
    TIMED(kind + "_sync_after_free", cuStreamSynchronize(stream));
    TIMED(kind + "_alloc_after_sync", allocate(&p));
    CHECK(cuMemFreeAsync(p, stream));
    CHECK(cuStreamSynchronize(stream));
    if (own_pool) TIMED(kind + "_trim", cuMemPoolTrimTo(pool, 0));
    CUdevice device;
    TIMED(kind + "_call_floor", cuCtxGetDevice(&device));  // as memprof's call_floor
}

static void vmm_cycle(size_t bytes, int ordinal, CUstream stream) {
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal;
    size_t granularity = 0;
    CHECK(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    size_t size = std::max(granularity, (bytes + granularity - 1) / granularity * granularity);
    CUmemAccessDesc access = {};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUdeviceptr address;
    CUmemGenericAllocationHandle handle;
    TIMED("vmm_reserve", cuMemAddressReserve(&address, size, 0, 0, 0));
    TIMED("vmm_create", cuMemCreate(&handle, size, &prop, 0));
    TIMED("vmm_map", cuMemMap(address, size, 0, handle, 0));
    TIMED("vmm_set_access", cuMemSetAccess(address, size, &access, 1));
    CHECK(cuMemsetD8Async(address, 0x5A, bytes, stream));
    CHECK(cuStreamSynchronize(stream));
    TIMED("vmm_unmap", cuMemUnmap(address, size));
    TIMED("vmm_release_memory", cuMemRelease(handle));
    TIMED("vmm_address_free", cuMemAddressFree(address, size));
    CUdevice device;
    TIMED("vmm_call_floor", cuCtxGetDevice(&device));
}

static void device_cycle(size_t bytes, CUstream stream) {
    CUdeviceptr p;
    TIMED("device_alloc_new", cuMemAlloc(&p, bytes));
    CHECK(cuMemsetD8Async(p, 0x5A, bytes, stream));
    CHECK(cuMemsetD8Async(p, 0x5A, bytes, stream));
    CHECK(cuStreamSynchronize(stream));
    TIMED("device_free", cuMemFree(p));
}

int main(int argc, char** argv) {
    if (argc != 3) { std::fprintf(stderr, "usage: %s BYTES REPEATS\n", argv[0]); return 2; }
    size_t bytes = std::strtoull(argv[1], nullptr, 10);
    int repeats = std::atoi(argv[2]);
    if (cudaFree(0) != cudaSuccess) { std::fprintf(stderr, "no CUDA device\n"); return 1; }
    CUdevice device;
    CHECK(cuCtxGetDevice(&device));
    int ordinal = (int)device;
    CUstream stream;
    CHECK(cuStreamCreate(&stream, CU_STREAM_DEFAULT));
    CUmemoryPool default_pool, kept;
    CHECK(cuDeviceGetDefaultMemPool(&default_pool, device));
    CUmemPoolProps props = {};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = ordinal;
    CHECK(cuMemPoolCreate(&kept, &props));
    cuuint64_t everything = UINT64_MAX;
    CHECK(cuMemPoolSetAttribute(kept, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &everything));
    // Each cycle repeated on its own, two warm-ups first, in memprof's order: every cuMemAlloc
    // cycle, then every default-pool cycle, then the kept pool's, then VMM's.
    auto repeated = [&](auto cycle) {
        for (int round = 0; round < repeats + 2; ++round) {
            recording = round >= 2;
            cycle();
        }
    };
    repeated([&] { device_cycle(bytes, stream); });
    repeated([&] { pool_cycle("pool", default_pool, false, bytes, stream, default_pool, kept); });
    repeated([&] { pool_cycle("pool_kept", kept, true, bytes, stream, default_pool, kept); });
    repeated([&] { vmm_cycle(bytes, ordinal, stream); });
    for (auto& [name, values] : samples) std::printf("%s %zu %.6f\n", name.c_str(), bytes, median(values));
    CHECK(cuMemPoolDestroy(kept));
    CHECK(cuStreamDestroy(stream));
    return 0;
}

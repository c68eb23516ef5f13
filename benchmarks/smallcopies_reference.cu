// Native reference for memprof smallcopies by a route memprof does not use: the CUDA driver
// API from C++. COPIES pieces of BYTES lie 256 bytes apart in one pageable, one pinned and one
// mapped buffer (as memprof's arenas) and side by side in device memory.
// GPU time per copy: a batch queued behind a kernel spinning on a mapped flag, between two
// events: pinned (one cuMemcpyHtoDAsync / DtoHAsync per piece) and batched (one
// cuMemcpyBatchAsync of every piece, source order: stream).
// Wall clock per copy, std::chrono from the first call until the stream is synchronized and
// the host work after it done (as memprof's Pieces._wall): pinned; pageable (cuMemcpyHtoD /
// DtoH per piece); batched (its arrays built before); gathered (memcpy into a pinned staging
// buffer, one copy; back: one copy, memcpy out); kernel (kernels/small_copies.cu, mapped).
// Every way's data is checked after its runs; a mismatch exits with status 1.
// Usage: smallcopies_reference BYTES COPIES REPEATS -> lines "WAY DIRECTION BYTES MS" (GPU
//   time) and "wall WAY DIRECTION BYTES MS", per copy, medians of REPEATS after two warm-ups
// Build: nvcc -O2 -std=c++17 -o smallcopies_reference smallcopies_reference.cu -lcuda
#include <cuda_runtime.h>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>

#include "../kernels/small_copies.cu"
#include "reference.h"  // CHECK, median

__global__ void spin(volatile int* flag, long long timeout_ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (flag[0] == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if ((long long)(now - start) > timeout_ns) { flag[1] = 1; break; }
    }
}

struct Setup {
    size_t bytes, stride;
    int copies, grid;
    unsigned char* pageable;  // malloc'd, pieces `stride` apart
    unsigned char* host;      // pinned, pieces `stride` apart
    unsigned char* mapped;    // pinned and mapped, pieces `stride` apart
    unsigned char* staging;   // pinned, pieces side by side
    CUdeviceptr device;       // pieces side by side
    CUdeviceptr table;        // the mapped pieces' device addresses, for the kernel
    CUstream stream;
    int* flag;                // mapped: the gate
    std::vector<CUdeviceptr> hosts, devices;
    std::vector<size_t> sizes;
};

// The GPU time of one batch queued by `queue`, behind the gate, in milliseconds.
template <typename Queue>
static double gated_ms(Setup& s, Queue queue) {
    CUevent start, end;
    CHECK(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK(cuEventCreate(&end, CU_EVENT_DEFAULT));
    s.flag[0] = s.flag[1] = 0;
    spin<<<1, 1, 0, (cudaStream_t)s.stream>>>(s.flag, 2000000000LL);
    CHECK(cuEventRecord(start, s.stream));
    queue();
    CHECK(cuEventRecord(end, s.stream));
    s.flag[0] = 1;
    CHECK(cuEventSynchronize(end));
    if (s.flag[1]) { std::fprintf(stderr, "gate timed out\n"); std::exit(1); }
    float ms = 0;
    CHECK(cuEventElapsedTime(&ms, start, end));
    CHECK(cuEventDestroy(start));
    CHECK(cuEventDestroy(end));
    return ms;
}

static void one_call_each(Setup& s, bool h2d) {
    for (int i = 0; i < s.copies; ++i) {
        unsigned char* host = s.host + i * s.stride;
        CUdeviceptr device = s.device + i * s.bytes;
        if (h2d) CHECK(cuMemcpyHtoDAsync(device, host, s.bytes, s.stream));
        else CHECK(cuMemcpyDtoHAsync(host, device, s.bytes, s.stream));
    }
}

static void pageable_each(Setup& s, bool h2d) {
    for (int i = 0; i < s.copies; ++i) {
        unsigned char* host = s.pageable + i * s.stride;
        CUdeviceptr device = s.device + i * s.bytes;
        if (h2d) CHECK(cuMemcpyHtoD(device, host, s.bytes));
        else CHECK(cuMemcpyDtoH(host, device, s.bytes));
    }
}

static void batched(Setup& s, bool h2d) {
    static CUmemcpyAttributes attributes = {};
    attributes.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    static size_t index = 0;
    CUdeviceptr* destinations = h2d ? s.devices.data() : s.hosts.data();
    CUdeviceptr* sources = h2d ? s.hosts.data() : s.devices.data();
#if CUDA_VERSION >= 13000
    CHECK(cuMemcpyBatchAsync(destinations, sources, s.sizes.data(), s.copies, &attributes, &index,
                             1, s.stream));
#else
    size_t failed = 0;
    CHECK(cuMemcpyBatchAsync(destinations, sources, s.sizes.data(), s.copies, &attributes, &index,
                             1, &failed, s.stream));
#endif
}

static void gather(Setup& s) {
    for (int i = 0; i < s.copies; ++i)
        std::memcpy(s.staging + i * s.bytes, s.pageable + i * s.stride, s.bytes);
}

static void scatter(Setup& s) {
    for (int i = 0; i < s.copies; ++i)
        std::memcpy(s.pageable + i * s.stride, s.staging + i * s.bytes, s.bytes);
}

static void kernel(Setup& s, bool h2d) {
    if (h2d)
        gatherPieces<<<s.grid, 256, 0, (cudaStream_t)s.stream>>>(
            (const unsigned long long*)s.table, (unsigned char*)s.device, (long long)s.bytes,
            s.copies);
    else
        scatterPieces<<<s.grid, 256, 0, (cudaStream_t)s.stream>>>(
            (const unsigned char*)s.device, (const unsigned long long*)s.table,
            (long long)s.bytes, s.copies);
}

// One way, from the first call until the stream is synchronized (and the host work after).
static void way(Setup& s, const std::string& name, bool h2d) {
    if (name == "pinned") one_call_each(s, h2d);
    else if (name == "pageable") pageable_each(s, h2d);
    else if (name == "batched") batched(s, h2d);
    else if (name == "gathered" && h2d) {
        gather(s);
        CHECK(cuMemcpyHtoDAsync(s.device, s.staging, s.bytes * s.copies, s.stream));
    } else if (name == "gathered") {
        CHECK(cuMemcpyDtoHAsync(s.staging, s.device, s.bytes * s.copies, s.stream));
    } else kernel(s, h2d);
    CHECK(cuStreamSynchronize(s.stream));
    if (name == "gathered" && !h2d) scatter(s);
}

static unsigned char* piece_of(Setup& s, const std::string& name, int i) {
    if (name == "pageable" || name == "gathered") return s.pageable + i * s.stride;
    if (name == "kernel") return s.mapped + i * s.stride;
    return s.host + i * s.stride;
}

// Host pieces hold `seed`-based bytes (h2d) or the device does (d2h); the other side poisoned.
static void prepare(Setup& s, const std::string& name, bool h2d, int seed) {
    CHECK(cuStreamSynchronize(s.stream));
    std::vector<unsigned char> data(s.bytes * s.copies);
    for (size_t i = 0; i < data.size(); ++i) data[i] = (unsigned char)(i * 7 + seed);
    if (h2d) {
        for (int i = 0; i < s.copies; ++i)
            std::memcpy(piece_of(s, name, i), data.data() + i * s.bytes, s.bytes);
        CHECK(cuMemsetD8(s.device, 0xFF, s.bytes * s.copies));
    } else {
        CHECK(cuMemcpyHtoD(s.device, data.data(), data.size()));
        for (int i = 0; i < s.copies; ++i) std::memset(piece_of(s, name, i), 0xFF, s.bytes);
    }
}

static void verify(Setup& s, const std::string& name, bool h2d, int seed) {
    std::vector<unsigned char> data(s.bytes * s.copies), got(data.size());
    for (size_t i = 0; i < data.size(); ++i) data[i] = (unsigned char)(i * 7 + seed);
    if (h2d) CHECK(cuMemcpyDtoH(got.data(), s.device, got.size()));
    else
        for (int i = 0; i < s.copies; ++i)
            std::memcpy(got.data() + i * s.bytes, piece_of(s, name, i), s.bytes);
    if (got != data) {
        std::fprintf(stderr, "%s %s: the data did not arrive\n", name.c_str(), h2d ? "h2d" : "d2h");
        std::exit(1);
    }
}

int main(int argc, char** argv) {
    if (argc != 4) { std::fprintf(stderr, "usage: %s BYTES COPIES REPEATS\n", argv[0]); return 2; }
    Setup s;
    s.bytes = std::strtoull(argv[1], nullptr, 10);
    s.copies = std::atoi(argv[2]);
    int repeats = std::atoi(argv[3]);
    s.stride = (s.bytes + 255) / 256 * 256 + 256;
    if (cudaFree(0) != cudaSuccess) { std::fprintf(stderr, "no CUDA device\n"); return 1; }
    CUdevice device;
    CHECK(cuCtxGetDevice(&device));
    int sms = 0;
    CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
    long long words = (long long)(s.bytes / 16) * s.copies;
    s.grid = (int)std::max(1LL, std::min((long long)8 * sms, (words + 255) / 256));
    s.pageable = (unsigned char*)std::malloc(s.stride * s.copies);
    std::memset(s.pageable, 0, s.stride * s.copies);  // touched: the OS provides it here
    CHECK(cuMemHostAlloc((void**)&s.host, s.stride * s.copies, 0));
    CHECK(cuMemHostAlloc((void**)&s.mapped, s.stride * s.copies, CU_MEMHOSTALLOC_DEVICEMAP));
    CHECK(cuMemHostAlloc((void**)&s.staging, s.bytes * s.copies, 0));
    CHECK(cuMemAlloc(&s.device, s.bytes * s.copies));
    CHECK(cuMemAlloc(&s.table, sizeof(CUdeviceptr) * s.copies));
    CHECK(cuMemHostAlloc((void**)&s.flag, 2 * sizeof(int), CU_MEMHOSTALLOC_DEVICEMAP));
    CHECK(cuStreamCreate(&s.stream, CU_STREAM_DEFAULT));
    CUdeviceptr mapped_device;
    CHECK(cuMemHostGetDevicePointer(&mapped_device, s.mapped, 0));
    std::vector<CUdeviceptr> table;
    s.sizes.assign(s.copies, s.bytes);
    for (int i = 0; i < s.copies; ++i) {
        s.hosts.push_back((CUdeviceptr)(s.host + i * s.stride));
        s.devices.push_back(s.device + i * s.bytes);
        table.push_back(mapped_device + i * s.stride);
    }
    CHECK(cuMemcpyHtoD(s.table, table.data(), sizeof(CUdeviceptr) * s.copies));
    const char* ways[] = {"pinned", "pageable", "batched", "gathered", "kernel"};
    int seed = 1;
    for (bool h2d : {true, false}) {
        const char* direction = h2d ? "h2d" : "d2h";
        std::vector<double> pinned, batch;
        for (int round = 0; round < repeats + 2; ++round) {  // two warm-ups, as memprof's
            double a = gated_ms(s, [&] { one_call_each(s, h2d); });
            double b = gated_ms(s, [&] { batched(s, h2d); });
            if (round >= 2) { pinned.push_back(a / s.copies); batch.push_back(b / s.copies); }
        }
        std::printf("pinned %s %zu %.6f\n", direction, s.bytes, median(pinned));
        std::printf("batched %s %zu %.6f\n", direction, s.bytes, median(batch));
        for (const char* name : ways) {
            prepare(s, name, h2d, ++seed);
            std::vector<double> walls;
            for (int round = 0; round < repeats + 2; ++round) {
                auto start = std::chrono::steady_clock::now();
                way(s, name, h2d);
                auto end = std::chrono::steady_clock::now();
                double ms = std::chrono::duration<double, std::milli>(end - start).count();
                if (round >= 2) walls.push_back(ms / s.copies);
            }
            verify(s, name, h2d, seed);
            std::printf("wall %s %s %zu %.6f\n", name, direction, s.bytes, median(walls));
        }
    }
    CHECK(cuStreamDestroy(s.stream));
    CHECK(cuMemFree(s.device));
    CHECK(cuMemFree(s.table));
    CHECK(cuMemFreeHost(s.host));
    CHECK(cuMemFreeHost(s.mapped));
    CHECK(cuMemFreeHost(s.staging));
    CHECK(cuMemFreeHost(s.flag));
    std::free(s.pageable);
    return 0;
}

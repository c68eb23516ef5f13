// Native reference for memprof smallcopies, by a route memprof does not use: the CUDA driver
// API from C++ (memprof: PyCUDA and cuda-bindings from Python). COPIES pieces of BYTES lie
// 256 bytes apart in one pinned buffer (as memprof's arena) and side by side in device memory.
// Each way is queued behind a kernel spinning on a flag in mapped memory, between two events,
// then released: the GPU's time for the whole batch, back to back, divided by COPIES.
//   pinned:  one cuMemcpyHtoDAsync (DtoH) per piece
//   batched: one cuMemcpyBatchAsync of every piece (source order: stream)
// Usage: smallcopies_reference BYTES COPIES REPEATS  ->  lines "WAY DIRECTION BYTES PER_COPY_MS"
// Build: nvcc -O2 -std=c++17 -o smallcopies_reference smallcopies_reference.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(call)                                                                     \
    do {                                                                                \
        CUresult status = (CUresult)(call);                                             \
        if (status != CUDA_SUCCESS) {                                                   \
            const char* name = nullptr;                                                 \
            cuGetErrorName(status, &name);                                              \
            std::fprintf(stderr, "%s failed: %s\n", #call, name ? name : "?");          \
            std::exit(1);                                                               \
        }                                                                               \
    } while (0)

__global__ void spin(volatile int* flag, long long timeout_ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (flag[0] == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if ((long long)(now - start) > timeout_ns) { flag[1] = 1; break; }
    }
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Setup {
    size_t bytes, stride;
    int copies;
    unsigned char* host;  // pinned, pieces `stride` apart
    CUdeviceptr device;   // pieces side by side
    CUstream stream;
    int* flag;            // mapped: the gate
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

static void batched(Setup& s, bool h2d, std::vector<CUdeviceptr>& hosts,
                    std::vector<CUdeviceptr>& devices, std::vector<size_t>& sizes) {
    CUmemcpyAttributes attributes = {};
    attributes.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    size_t index = 0;
    CUdeviceptr* destinations = h2d ? devices.data() : hosts.data();
    CUdeviceptr* sources = h2d ? hosts.data() : devices.data();
#if CUDA_VERSION >= 13000
    CHECK(cuMemcpyBatchAsync(destinations, sources, sizes.data(), s.copies, &attributes, &index,
                             1, s.stream));
#else
    size_t failed = 0;
    CHECK(cuMemcpyBatchAsync(destinations, sources, sizes.data(), s.copies, &attributes, &index,
                             1, &failed, s.stream));
#endif
}

int main(int argc, char** argv) {
    if (argc != 4) { std::fprintf(stderr, "usage: %s BYTES COPIES REPEATS\n", argv[0]); return 2; }
    Setup s;
    s.bytes = std::strtoull(argv[1], nullptr, 10);
    s.copies = std::atoi(argv[2]);
    int repeats = std::atoi(argv[3]);
    s.stride = (s.bytes + 255) / 256 * 256 + 256;
    if (cudaFree(0) != cudaSuccess) { std::fprintf(stderr, "no CUDA device\n"); return 1; }
    CHECK(cuMemHostAlloc((void**)&s.host, s.stride * s.copies, 0));
    CHECK(cuMemAlloc(&s.device, s.bytes * s.copies));
    CHECK(cuMemHostAlloc((void**)&s.flag, 2 * sizeof(int), CU_MEMHOSTALLOC_DEVICEMAP));
    CHECK(cuStreamCreate(&s.stream, CU_STREAM_DEFAULT));
    std::vector<CUdeviceptr> hosts, devices;
    std::vector<size_t> sizes(s.copies, s.bytes);
    for (int i = 0; i < s.copies; ++i) {
        hosts.push_back((CUdeviceptr)(s.host + i * s.stride));
        devices.push_back(s.device + i * s.bytes);
        std::memset(s.host + i * s.stride, i & 0xff, s.bytes);
    }
    for (bool h2d : {true, false}) {
        const char* direction = h2d ? "h2d" : "d2h";
        std::vector<double> pinned, batch;
        for (int round = 0; round < repeats + 2; ++round) {  // two warm-ups, as memprof's
            double a = gated_ms(s, [&] { one_call_each(s, h2d); });
            double b = gated_ms(s, [&] { batched(s, h2d, hosts, devices, sizes); });
            if (round >= 2) { pinned.push_back(a / s.copies); batch.push_back(b / s.copies); }
        }
        std::printf("pinned %s %zu %.6f\n", direction, s.bytes, median(pinned));
        std::printf("batched %s %zu %.6f\n", direction, s.bytes, median(batch));
    }
    CHECK(cuStreamDestroy(s.stream));
    CHECK(cuMemFree(s.device));
    CHECK(cuMemFreeHost(s.host));
    CHECK(cuMemFreeHost(s.flag));
    return 0;
}

// Independent reference for memprof's transfer bandwidth: the CUDA runtime API from C++,
// not PyCUDA's driver calls. Times cudaMemcpy with events, like bandwidthTest did.
// Usage: reference_bandwidth BYTES REPEATS   ->  lines "KIND DIRECTION MEDIAN_MS"
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <sys/mman.h>
#include <vector>

#define CHECK(call)                                                              \
    do {                                                                         \
        cudaError_t status = (call);                                             \
        if (status != cudaSuccess) {                                             \
            std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(status)); \
            std::exit(1);                                                        \
        }                                                                        \
    } while (0)

static double median_copy_ms(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                             int repeats) {
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    for (int i = 0; i < 2; ++i) CHECK(cudaMemcpy(dst, src, bytes, kind));  // warm-up
    std::vector<float> samples;
    for (int i = 0; i < repeats; ++i) {
        CHECK(cudaEventRecord(start, 0));
        CHECK(cudaMemcpy(dst, src, bytes, kind));
        CHECK(cudaEventRecord(stop, 0));
        CHECK(cudaEventSynchronize(stop));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        samples.push_back(ms);
    }
    CHECK(cudaEventDestroy(start));
    CHECK(cudaEventDestroy(stop));
    std::sort(samples.begin(), samples.end());
    size_t n = samples.size();
    return n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s BYTES REPEATS\n", argv[0]);
        return 2;
    }
    size_t bytes = std::strtoull(argv[1], nullptr, 10);
    int repeats = std::atoi(argv[2]);
    CHECK(cudaSetDevice(0));
    void* device = nullptr;
    CHECK(cudaMalloc(&device, bytes));
    // Pageable memory allocated as numpy allocates large arrays on Linux: malloc, then
    // madvise(MADV_HUGEPAGE) from the first 4 KiB page boundary, so both sides get the
    // same transparent huge pages and the same host memcpy speed when the driver stages.
    void* pageable = std::malloc(bytes);
    if (!pageable) return 1;
    uintptr_t first_page = (reinterpret_cast<uintptr_t>(pageable) + 4095) & ~uintptr_t(4095);
    madvise(reinterpret_cast<void*>(first_page), bytes - (first_page - reinterpret_cast<uintptr_t>(pageable)), MADV_HUGEPAGE);
    std::memset(pageable, 1, bytes);
    void* pinned = nullptr;
    CHECK(cudaMallocHost(&pinned, bytes));
    std::memset(pinned, 1, bytes);

    std::printf("pageable h2d %.6f\n", median_copy_ms(device, pageable, bytes, cudaMemcpyHostToDevice, repeats));
    std::printf("pageable d2h %.6f\n", median_copy_ms(pageable, device, bytes, cudaMemcpyDeviceToHost, repeats));
    std::printf("pinned h2d %.6f\n", median_copy_ms(device, pinned, bytes, cudaMemcpyHostToDevice, repeats));
    std::printf("pinned d2h %.6f\n", median_copy_ms(pinned, device, bytes, cudaMemcpyDeviceToHost, repeats));

    CHECK(cudaFreeHost(pinned));
    std::free(pageable);
    CHECK(cudaFree(device));
    return 0;
}

// Independent reference for memprof sweep's small transfers: pinned HtoD copies queued
// behind a spinning kernel (released by the host through mapped memory), each followed by
// an event, in CUDA C++ with the runtime API. Prints the median copy time.
// Usage: gated_copy_reference BYTES REPEATS  ->  "pinned h2d BYTES MEDIAN_MS"
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                      \
    do {                                                                                 \
        cudaError_t status = (call);                                                     \
        if (status != cudaSuccess) {                                                     \
            std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(status));  \
            std::exit(1);                                                                \
        }                                                                                \
    } while (0)

__global__ void spin(volatile int* flag, long long timeout_ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (flag[0] == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if ((long long)(now - start) > timeout_ns) { flag[1] = 1; break; }
    }
}

int main(int argc, char** argv) {
    if (argc != 3) { std::fprintf(stderr, "usage: %s BYTES REPEATS\n", argv[0]); return 2; }
    size_t bytes = std::strtoull(argv[1], nullptr, 10);
    int repeats = std::atoi(argv[2]);
    void *host, *device;
    int* flag;
    CHECK(cudaMallocHost(&host, bytes));
    CHECK(cudaMalloc(&device, bytes));
    CHECK(cudaHostAlloc((void**)&flag, 2 * sizeof(int), cudaHostAllocMapped));
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::vector<cudaEvent_t> events(repeats + 1);
    for (auto& e : events) CHECK(cudaEventCreate(&e));
    std::vector<float> samples;
    for (int round = 0; round < 2; ++round) {  // the first round warms up
        flag[0] = flag[1] = 0;
        spin<<<1, 1, 0, stream>>>(flag, 2000000000LL);
        CHECK(cudaEventRecord(events[0], stream));
        for (int i = 0; i < repeats; ++i) {
            CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream));
            CHECK(cudaEventRecord(events[i + 1], stream));
        }
        flag[0] = 1;
        CHECK(cudaStreamSynchronize(stream));
        if (flag[1]) { std::fprintf(stderr, "gate timed out\n"); return 1; }
        samples.clear();
        for (int i = 0; i < repeats; ++i) {
            float ms;
            CHECK(cudaEventElapsedTime(&ms, events[i], events[i + 1]));
            samples.push_back(ms);
        }
    }
    std::sort(samples.begin(), samples.end());
    size_t n = samples.size();
    double median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
    std::printf("pinned h2d %zu %.6f\n", bytes, median);
    return 0;
}

// Native references for memprof's transfer figures by a route memprof does not use: the CUDA
// runtime API from C++ (memprof: PyCUDA's driver calls).
//   throughput: back-to-back cudaMemcpyAsync from pinned memory queued behind a spinning
//               kernel, between one event pair (as bandwidth tools time them), per copy.
//   blocking:   std::chrono around a synchronous cudaMemcpy from malloc'd, touched memory,
//               median: "pageable" advises huge pages from 4 MiB, as numpy does for its
//               arrays; "pageable4k" is plain malloc'd memory, for the record.
// Usage: native_copies BYTES  ->  lines "pinned h2d|d2h throughput MS" and
//        "pageable|pageable4k h2d|d2h blocking MS"
#include <cuda_runtime.h>
#include <chrono>
#include <cstring>
#include <sys/mman.h>
#include <cstdint>

#include "reference.h"  // RT_CHECK, median

__global__ void spin(volatile int* flag) { while (*flag == 0) {} }

static double throughput_ms(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream, int* flag_host, int* flag_device) {
    cudaEvent_t start, stop;
    RT_CHECK(cudaEventCreate(&start));
    RT_CHECK(cudaEventCreate(&stop));
    RT_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream));
    RT_CHECK(cudaStreamSynchronize(stream));
    cudaEventRecord(start, stream);
    RT_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream));
    cudaEventRecord(stop, stream);
    RT_CHECK(cudaEventSynchronize(stop));
    float one = 0;
    cudaEventElapsedTime(&one, start, stop);
    int count = std::max(1, std::min(128, (int)(1.0 / std::max(one, 1e-4f)) + 1));
    std::vector<double> samples;
    for (int batch = 0; batch < 5; ++batch) {
        *flag_host = 0;
        spin<<<1, 1, 0, stream>>>(flag_device);
        cudaEventRecord(start, stream);
        for (int i = 0; i < count; ++i) RT_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream));
        cudaEventRecord(stop, stream);
        *flag_host = 1;
        RT_CHECK(cudaEventSynchronize(stop));
        float ms = 0;
        cudaEventElapsedTime(&ms, start, stop);
        samples.push_back(ms / count);
    }
    return median(samples);
}

static double blocking_ms(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    for (int i = 0; i < 2; ++i) RT_CHECK(cudaMemcpy(dst, src, bytes, kind));
    std::vector<double> samples;
    for (int i = 0; i < 11; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        RT_CHECK(cudaMemcpy(dst, src, bytes, kind));
        auto t1 = std::chrono::steady_clock::now();
        samples.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    return median(samples);
}

int main(int argc, char** argv) {
    if (argc != 2) { std::fprintf(stderr, "usage: %s BYTES\n", argv[0]); return 2; }
    size_t bytes = std::strtoull(argv[1], nullptr, 10);
    RT_CHECK(cudaSetDevice(0));
    void *device, *pinned;
    int *flag_host, *flag_device;
    RT_CHECK(cudaMalloc(&device, bytes));
    RT_CHECK(cudaMallocHost(&pinned, bytes));
    std::memset(pinned, 1, bytes);
    RT_CHECK(cudaHostAlloc((void**)&flag_host, sizeof(int), cudaHostAllocMapped));
    RT_CHECK(cudaHostGetDevicePointer((void**)&flag_device, flag_host, 0));
    cudaStream_t stream;
    RT_CHECK(cudaStreamCreate(&stream));
    void* plain = std::malloc(bytes);
    std::memset(plain, 1, bytes);
    void* pageable = std::malloc(bytes);
    if (bytes >= (4u << 20)) {  // as numpy's allocator: advise the 2 MiB-aligned part, then touch
        const uintptr_t huge = 2u << 20, start = ((uintptr_t)pageable + huge - 1) & ~(huge - 1);
        const uintptr_t end = ((uintptr_t)pageable + bytes) & ~(huge - 1);
        if (end > start) madvise((void*)start, end - start, MADV_HUGEPAGE);
    }
    std::memset(pageable, 1, bytes);
    std::printf("pinned h2d throughput %.6f\n", throughput_ms(device, pinned, bytes, cudaMemcpyHostToDevice, stream, flag_host, flag_device));
    std::printf("pinned d2h throughput %.6f\n", throughput_ms(pinned, device, bytes, cudaMemcpyDeviceToHost, stream, flag_host, flag_device));
    std::printf("pageable h2d blocking %.6f\n", blocking_ms(device, pageable, bytes, cudaMemcpyHostToDevice));
    std::printf("pageable d2h blocking %.6f\n", blocking_ms(pageable, device, bytes, cudaMemcpyDeviceToHost));
    std::printf("pageable4k h2d blocking %.6f\n", blocking_ms(device, plain, bytes, cudaMemcpyHostToDevice));
    std::printf("pageable4k d2h blocking %.6f\n", blocking_ms(plain, device, bytes, cudaMemcpyDeviceToHost));
    std::free(pageable);
    std::free(plain);
    return 0;
}

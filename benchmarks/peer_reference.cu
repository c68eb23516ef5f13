// Native reference for `memprof peer`: cudaMemcpyPeerAsync between GPU 0 and GPU 1 with
// peer access on, the same size, batches between one event pair on the source's stream,
// median of 3 batches after a warm-up; each direction alone, then both at once.
// nvcc -O2 -o peer_reference peer_reference.cu && ./peer_reference [power]
#include <cuda_runtime.h>

#include "reference.h"  // RT_CHECK

static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main(int argc, char** argv) {
    const int power = argc > 1 ? std::atoi(argv[1]) : 26;
    const size_t bytes = size_t(4) << power;
    const int batch = 16;
    void* src[2]; void* dst[2]; cudaStream_t stream[2]; cudaEvent_t start[2], end[2];
    for (int d = 0; d < 2; ++d) {
        RT_CHECK(cudaSetDevice(d));
        RT_CHECK(cudaDeviceEnablePeerAccess(1 - d, 0));
        RT_CHECK(cudaMalloc(&src[d], bytes)); RT_CHECK(cudaMalloc(&dst[d], bytes));
        RT_CHECK(cudaMemset(src[d], d + 1, bytes));
        RT_CHECK(cudaStreamCreateWithFlags(&stream[d], cudaStreamNonBlocking));
        RT_CHECK(cudaEventCreate(&start[d])); RT_CHECK(cudaEventCreate(&end[d]));
    }
    for (int both = 0; both < 2; ++both) {
        for (int first = 0; first < (both ? 1 : 2); ++first) {
            std::vector<float> per_copy[2];
            for (int round = 0; round < 4; ++round) {
                for (int d = 0; d < 2; ++d) {
                    if (!both && d != first) continue;
                    RT_CHECK(cudaSetDevice(d));
                    RT_CHECK(cudaEventRecord(start[d], stream[d]));
                    for (int i = 0; i < batch; ++i)
                        RT_CHECK(cudaMemcpyPeerAsync(dst[1 - d], 1 - d, src[d], d, bytes,
                                                     stream[d]));
                    RT_CHECK(cudaEventRecord(end[d], stream[d]));
                }
                for (int d = 0; d < 2; ++d) {
                    if (!both && d != first) continue;
                    RT_CHECK(cudaSetDevice(d));
                    RT_CHECK(cudaEventSynchronize(end[d]));
                    float ms; RT_CHECK(cudaEventElapsedTime(&ms, start[d], end[d]));
                    if (round > 0) per_copy[d].push_back(ms / batch);  // round 0 warms up
                }
            }
            for (int d = 0; d < 2; ++d) {
                if (!both && d != first) continue;
                std::printf("%s %d->%d %.1f GB/s\n", both ? "bidir" : "ce_on", d, 1 - d,
                            bytes / (median(per_copy[d]) * 1e-3) / 1e9);
            }
        }
    }
    return 0;
}

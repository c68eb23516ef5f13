// What the C++ references share: a driver API call checked (CHECK) or a runtime API one
// (RT_CHECK; where either fails: its error, exit status 1), and the median of samples.
#pragma once
#include <cuda.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
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
#define RT_CHECK(call) do { cudaError_t s = (call); if (s != cudaSuccess) { \
    std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(s)); std::exit(1); } } while (0)

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

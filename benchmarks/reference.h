// What the driver API's C++ references (allocators_, smallcopies_reference.cu) share: a call
// checked (where it fails: its error's name, exit status 1), and the median of samples.
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

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

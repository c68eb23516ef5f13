// Verification on the GPU: where memory the GPU can read (device memory, or host memory mapped
// into its address space) differs from what it should hold, without reading it back to the host.
//
// firstDifferentWord: the index of the first 32-bit word of got[0..n) that differs from
// expected[i * stride] (stride 1: another array; stride 0: one word everywhere, a memset's
// byte repeated), left in *first by atomicMin; *first starts at n, which means no difference.
// Grid-stride: any grid covers any n. Each thread stops at its own first difference; the
// smallest of those is the first of all.

extern "C" __global__ void firstDifferentWord(const unsigned int* got, const unsigned int* expected,
                                              long long stride, long long n,
                                              unsigned long long* first)
{
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        if (got[i] != expected[i * stride]) {
            atomicMin(first, (unsigned long long)i);
            return;
        }
    }
}

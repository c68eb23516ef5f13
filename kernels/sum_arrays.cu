// sumArraysGPU: the kernel of the seed documents (res = a + b, one element per thread),
// with a bounds check so any size works, not only multiples of the block size.
// a and b may point to device memory or to mapped (zero-copy) host memory.

extern "C" __global__ void sumArraysGPU(const float* a, const float* b, float* res, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        res[i] = a[i] + b[i];
    }
}

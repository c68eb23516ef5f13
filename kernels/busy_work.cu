// busyWork: a kernel whose time is set by `iterations`, for overlapping copies with compute.
// __fmul_rn/__fadd_rn forbid fused multiply-adds, so numpy's float32 arithmetic reproduces
// every result bit for bit.

extern "C" __global__ void busyWork(const float* in, float* out, int n, int iterations)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = in[i];
        for (int k = 0; k < iterations; ++k) {
            x = __fadd_rn(__fmul_rn(x, 0.999f), 0.001f);
        }
        out[i] = x;
    }
}

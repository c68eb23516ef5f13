// Kernels that touch a buffer directly, wherever it lives (device, mapped host, managed):
// readSum reads every element with 16-byte loads and leaves one partial sum per block;
// fillValue writes every element. Grid-stride loops, so any grid size covers any n.

struct alignas(16) Float4 { float x, y, z, w; };

extern "C" __global__ void readSum(const float* in, float* partial, long long n)
{
    __shared__ float block_sums[256];
    const long long packs = n / 4;
    const long long stride = (long long)gridDim.x * blockDim.x;
    float sum = 0.0f;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < packs; p += stride) {
        const Float4 v = reinterpret_cast<const Float4*>(in)[p];
        sum += (v.x + v.y) + (v.z + v.w);
    }
    for (long long i = packs * 4 + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        sum += in[i];
    }
    block_sums[threadIdx.x] = sum;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) block_sums[threadIdx.x] += block_sums[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = block_sums[0];
}

extern "C" __global__ void fillValue(float* out, float value, long long n)
{
    const long long packs = n / 4;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const Float4 v = {value, value, value, value};
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < packs; p += stride) {
        reinterpret_cast<Float4*>(out)[p] = v;
    }
    for (long long i = packs * 4 + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = value;
    }
}

// The latency of one small read of another GPU's memory (or this GPU's, as the baseline):
// one thread follows a chain of indices, each load depending on the one before, so the
// kernel's time over `steps` is the time of one read. __ldcv: not cached, every load goes
// to the memory that holds it.

extern "C" __global__ void chaseChain(const unsigned int* next, long long steps, unsigned int* last)
{
    unsigned int index = 0;
    for (long long s = 0; s < steps; ++s) {
        index = __ldcv(next + index);
    }
    *last = index;
}

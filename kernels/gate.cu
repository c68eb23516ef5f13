// A GPU-side gate: one thread spins until the host has written a generation number of at
// least `generation` into flag[0] (mapped pinned memory), so everything queued behind it on
// the stream starts at once and CUDA events time the work alone, without the host's enqueue
// cost. Generations only grow, so a gate released late never waits for the next one.
// After timeout_ns of %globaltimer it gives up and sets flag[1]: a gate never hangs the GPU.

extern "C" __global__ void gateWait(volatile long long* flag, long long generation,
                                    long long timeout_ns)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (flag[0] < generation) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if ((long long)(now - start) > timeout_ns) {
            flag[1] = 1;
            break;
        }
    }
}

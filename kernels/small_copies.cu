// Many small pieces moved by one kernel instead of one copy each (memprof smallcopies).
// gatherPieces reads piece p from pieces[p] (mapped host memory: zero-copy over PCIe) into
// out + p * pieceBytes (device memory); scatterPieces does the reverse. Pieces are 16-byte
// aligned and a multiple of 16 bytes. Grid-stride loops over every 16-byte word of every
// piece, so any grid covers any count.

struct alignas(16) Word { unsigned int x, y, z, w; };

extern "C" __global__ void gatherPieces(const unsigned long long* pieces, unsigned char* out,
                                        long long pieceBytes, int count)
{
    const long long words = pieceBytes / 16;
    const long long total = words * count;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const long long piece = i / words;
        const long long word = i - piece * words;
        const Word* source = reinterpret_cast<const Word*>(pieces[piece]);
        reinterpret_cast<Word*>(out)[i] = source[word];
    }
}

extern "C" __global__ void scatterPieces(const unsigned char* in, const unsigned long long* pieces,
                                         long long pieceBytes, int count)
{
    const long long words = pieceBytes / 16;
    const long long total = words * count;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const long long piece = i / words;
        const long long word = i - piece * words;
        Word* destination = reinterpret_cast<Word*>(pieces[piece]);
        destination[word] = reinterpret_cast<const Word*>(in)[i];
    }
}

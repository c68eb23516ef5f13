"""A GPU library on the fake CUPTI's driver (tests/fake_cupti.py), as a program calls one.

Its frames stand for a library's (torch's), where fake_cupti.py's stand for the driver's and
CUPTI's, which a real program's stack does not show (they are C): tests name this file a
library's and fake_cupti.py skipped (memprof.trace.stacks.CodeFilter).
"""

from __future__ import annotations

from tests.fake_cupti import FakeCupti


class FakeLibrary:
    """A GPU library on the fake driver, as a program calls it (torch.Tensor.to, .cpu(),
    torch.cuda.synchronize): its frames are this file's, a library's where a test says so."""

    def __init__(self, cupti: FakeCupti) -> None:
        self.cupti = cupti

    def to_device(self, nbytes: int, pinned: bool = False) -> int:
        """A runtime copy host to device (its driver call inside), as PyTorch makes one."""
        return self.cupti.memcpy(
            "HTOD",
            nbytes,
            duration_ns=nbytes // 20,
            src=2 if pinned else 1,
            dst=3,
            flags=1 if pinned else 0,
            call="cudaMemcpyAsync",
            call_ns=nbytes // 16 if not pinned else 3_000,
            inner="cuMemcpyAsync",
        )

    def to_host(self, nbytes: int) -> int:
        return self.cupti.memcpy(
            "DTOH", nbytes, nbytes // 20, src=3, dst=1, flags=0, call="cuMemcpyDtoH_v2"
        )

    def synchronize(self) -> int:
        return self.cupti.call("cudaStreamSynchronize_v3020", 500_000, runtime=True)

    def allocate(self) -> int:
        return self.cupti.call("cuMemAlloc_v2", 40_000)

    def launch(self) -> int:
        return self.cupti.kernel("sumArrays", 20_000)

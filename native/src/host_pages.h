// Contract: zeroed host memory straight from the OS, for the CPU KV cache. MapZeroedPages(bytes)
// returns a fresh anonymous mapping of `bytes` (rounded up to whole pages) whose contents are zero,
// and UnmapPages gives it back. Fresh pages are zero without a memset: a KV growth used to write
// the whole new tensor twice (zeros, then the held rows: 245 MB each at 1,072 positions of
// Qwen3-0.6B's shapes), and the rows past the held ones are now touched only when written. Where
// neither mmap nor VirtualAlloc exists it returns {nullptr, 0} and the caller uses its allocator.
// (Transparent huge pages were measured and left out: with Linux's `defrag=madvise` each 2 MiB
// fault compacted memory, and a growth took longer, not shorter.)
#pragma once

#include <cstddef>

namespace ropewalk {

struct HostPages {
  void* data = nullptr;
  size_t bytes = 0;  // the mapping's length (what UnmapPages needs)
};

/** `bytes` (> 0) of zeroed, page-aligned memory. @throws std::bad_alloc when the OS refuses. */
HostPages MapZeroedPages(size_t bytes);

/** Gives back what MapZeroedPages returned (nothing for an empty one). */
void UnmapPages(HostPages pages);

}  // namespace ropewalk

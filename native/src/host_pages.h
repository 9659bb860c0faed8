// Contract: zeroed host memory straight from the OS, for the CPU KV cache. MapZeroedPages(bytes)
// returns a fresh anonymous mapping of `bytes` (rounded up to whole pages) whose contents are zero,
// and UnmapPages gives it back. Fresh pages are zero without a memset: a KV growth used to write
// the whole new tensor twice (zeros, then the held rows: 245 MB each at 1,072 positions of
// Qwen3-0.6B's shapes), and the rows past the held ones are now touched only when written. Where
// neither mmap nor VirtualAlloc exists it returns {nullptr, 0} and the caller uses its allocator.
// (Transparent huge pages were measured and left out for the KV cache: with Linux's
// `defrag=madvise` each 2 MiB fault compacted memory, and a growth took longer, not shorter.)
// ReadIntoHugePages(path) reads a whole file (the model's weights, once at load) into a fresh
// anonymous mapping that Linux may back with 2 MiB pages (2 MiB-aligned, madvise(MADV_HUGEPAGE)):
// a decode step streams every weight, and over 4 KiB file pages it pays a TLB walk every 4 KiB and,
// on a paravirtualized VM, stalls of 30–90 ms every ~0.5 s (docs/benchmarks.md); elsewhere it
// returns {nullptr, 0} and the caller maps the file as before.
#pragma once

#include <cstddef>
#include <string>

namespace ropewalk {

struct HostPages {
  void* data = nullptr;
  size_t bytes = 0;  // the mapping's length (what UnmapPages needs)
};

/** `bytes` (> 0) of zeroed, page-aligned memory. @throws std::bad_alloc when the OS refuses. */
HostPages MapZeroedPages(size_t bytes);

/**
 * The whole file at `path` in anonymous memory that Linux may back with 2 MiB pages (see above);
 * `bytes` of the result is the mapping's length (≥ the file's), the file's length in `fileBytes`.
 * {nullptr, 0} where this is not Linux. Free with UnmapPages.
 * @throws std::runtime_error naming the path when it cannot be opened or read whole, std::bad_alloc
 *   when the OS refuses the memory.
 */
HostPages ReadIntoHugePages(const std::string& path, size_t* fileBytes);

/** Gives back what MapZeroedPages or ReadIntoHugePages returned (nothing for an empty one). */
void UnmapPages(HostPages pages);

}  // namespace ropewalk

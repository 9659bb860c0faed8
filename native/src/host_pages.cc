// MapZeroedPages / UnmapPages (contract in host_pages.h): mmap on POSIX, VirtualAlloc on Windows.
#include "host_pages.h"

#include <new>

#if defined(_WIN32)
#include <windows.h>
#else
#include <sys/mman.h>
#endif

namespace ropewalk {

HostPages MapZeroedPages(size_t bytes) {
  if (bytes == 0) return {};
#if defined(_WIN32)
  void* p = VirtualAlloc(nullptr, bytes, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
  if (p == nullptr) throw std::bad_alloc();
  return {p, bytes};
#else
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return {p, bytes};
#endif
}

void UnmapPages(HostPages pages) {
  if (pages.data == nullptr) return;
#if defined(_WIN32)
  VirtualFree(pages.data, 0, MEM_RELEASE);
#else
  munmap(pages.data, pages.bytes);
#endif
}

}  // namespace ropewalk

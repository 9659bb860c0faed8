// MapZeroedPages / ReadIntoHugePages / UnmapPages (contract in host_pages.h): mmap on POSIX,
// VirtualAlloc on Windows; ReadIntoHugePages on Linux only.
#include "host_pages.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <new>
#include <stdexcept>

#if defined(_WIN32)
#include <windows.h>
#else
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
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

HostPages ReadIntoHugePages(const std::string& path, size_t* fileBytes) {
  *fileBytes = 0;
#if defined(__linux__)
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open the weights file '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    close(fd);
    throw std::runtime_error("the weights file '" + path + "' is empty or cannot be read");
  }
  const size_t length = static_cast<size_t>(st.st_size);
  // 2 MiB-aligned start: map 2 MiB more, give back the unaligned head and the tail.
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t rounded = (length + kHuge - 1) / kHuge * kHuge;
  void* raw = mmap(nullptr, rounded + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    close(fd);
    throw std::bad_alloc();
  }
  const uintptr_t start = (reinterpret_cast<uintptr_t>(raw) + kHuge - 1) & ~(kHuge - 1);
  const size_t head = start - reinterpret_cast<uintptr_t>(raw);
  if (head > 0) munmap(raw, head);
  munmap(reinterpret_cast<void*>(start + rounded), kHuge - head);  // head < kHuge: the tail is never empty
  HostPages pages{reinterpret_cast<void*>(start), rounded};
  madvise(pages.data, rounded, MADV_HUGEPAGE);  // advice only: 4 KiB pages where THP is off
  auto* at = static_cast<uint8_t*>(pages.data);
  size_t done = 0;
  while (done < length) {
    const ssize_t got = pread(fd, at + done, std::min<size_t>(length - done, size_t{1} << 30), static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const std::string why = got < 0 ? std::strerror(errno) : "it ended early";
      close(fd);
      UnmapPages(pages);
      throw std::runtime_error("cannot read the weights file '" + path + "' whole (" + std::to_string(done) + " of " + std::to_string(length) + " bytes): " + why);
    }
    done += static_cast<size_t>(got);
  }
  close(fd);
  *fileBytes = length;
  return pages;
#else
  (void)path;
  return {};
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

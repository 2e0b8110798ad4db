#include "sandbox/native/disk_copy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace sandcastle::sandbox::native {

Status sparse_copy(int in, int out, off_t size) {
  if (::ftruncate(out, size) != 0) return Error::from_errno("size the copy");
  off_t off = 0;
  while (off < size) {
    off_t data = ::lseek(in, off, SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) break;  // only a hole is left
      return Error::from_errno("SEEK_DATA");
    }
    off_t hole = ::lseek(in, data, SEEK_HOLE);
    if (hole < 0) return Error::from_errno("SEEK_HOLE");
    loff_t src = data, dst = data;
    while (src < hole) {
      ssize_t n = ::copy_file_range(in, &src, out, &dst, static_cast<std::size_t>(hole - src), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Error::from_errno("copy_file_range");
      if (n == 0) break;
    }
    off = hole;
  }
  return {};
}

Status make_equal(int in, int out, off_t size) {
  if (size == 0) return {};
  const auto len = static_cast<std::size_t>(size);
  void* a = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, in, 0);
  if (a == MAP_FAILED) return Error::from_errno("map the image");
  void* b = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, out, 0);
  if (b == MAP_FAILED) {
    Error e = Error::from_errno("map the copy");
    ::munmap(a, len);
    return e;
  }
  const auto* src = static_cast<const char*>(a);
  const auto* dst = static_cast<const char*>(b);
  constexpr off_t kPage = 4096;
  Status st;
  off_t off = 0;
  while (st && off < size) {
    off_t data = ::lseek(in, off, SEEK_DATA);
    if (data < 0 && errno != ENXIO) {
      st = Error::from_errno("SEEK_DATA");
      break;
    }
    const off_t hole_end = data < 0 ? size : data;
    // A hole in `in`: none in `out` either (it reads as zeros all the same,
    // but its blocks would be kept).
    if (hole_end > off) {
      const off_t out_data = ::lseek(out, off, SEEK_DATA);
      if (out_data >= 0 && out_data < hole_end &&
          ::fallocate(out, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, hole_end - off) != 0)
        st = Error::from_errno("punch a hole in the copy");
    }
    if (data < 0) break;
    off_t hole = ::lseek(in, data, SEEK_HOLE);
    if (hole < 0) {
      st = Error::from_errno("SEEK_HOLE");
      break;
    }
    for (off_t p = data & ~(kPage - 1); st && p < hole; p += kPage) {
      const auto n = static_cast<std::size_t>(std::min(kPage, size - p));
      if (std::memcmp(src + p, dst + p, n) == 0) continue;
      if (::pwrite(out, src + p, n, p) != static_cast<ssize_t>(n))
        st = Error::from_errno("write the copy");
    }
    off = hole;
  }
  ::munmap(a, len);
  ::munmap(b, len);
  return st;
}

}  // namespace sandcastle::sandbox::native

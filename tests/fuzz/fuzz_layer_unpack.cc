// Fuzzes the layer unpacker (images/layer_unpack.h) with any bytes as a
// layer (plain or compressed tar), unpacked into a fresh directory beside an
// empty sibling. Whatever the input: nothing appears outside the layer's
// directory, the tree holds no device node but 0:0 whiteouts and no
// setuid/setgid bit, and the limits hold.
#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "images/layer_unpack.h"

namespace {

using namespace sandcastle::images;

class MemSource : public ByteSource {
 public:
  MemSource(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  ssize_t read(const void** data) override {
    // Small pieces, so reads cut headers and blocks anywhere.
    const size_t k = n_ < 777 ? n_ : 777;
    *data = d_;
    d_ += k;
    n_ -= k;
    return static_cast<ssize_t>(k);
  }
  std::string error() const override { return {}; }

 private:
  const uint8_t* d_;
  size_t n_;
};

std::uint64_t g_bytes = 0;

int check_entry(const char*, const struct stat* st, int, struct FTW*) {
  if (S_ISCHR(st->st_mode) && st->st_rdev != makedev(0, 0)) std::abort();
  if (S_ISBLK(st->st_mode) || S_ISSOCK(st->st_mode)) std::abort();
  if (st->st_mode & (S_ISUID | S_ISGID)) std::abort();
  if (S_ISREG(st->st_mode)) g_bytes += static_cast<std::uint64_t>(st->st_size);
  return 0;
}

size_t count_entries(const std::string& dir) {
  size_t n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (auto* e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") ++n;
    ::closedir(d);
  }
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char base[] = "/tmp/sc-fuzz-unpack-XXXXXX";
  if (!::mkdtemp(base)) std::abort();
  const std::string out = std::string(base) + "/out", outside = std::string(base) + "/outside";
  if (::mkdir(out.c_str(), 0755) != 0 || ::mkdir(outside.c_str(), 0755) != 0) std::abort();
  constexpr std::uint64_t kBytes = 4 << 20;
  UnpackBudget budget{kBytes, 2000, 32};
  MemSource src(data, size);
  auto r = unpack_layer(src, out, budget);
  (void)r;
  // Nothing beside the layer's directory, nothing in the sibling.
  if (count_entries(base) != 2 || count_entries(outside) != 0) std::abort();
  g_bytes = 0;
  if (::nftw(out.c_str(), check_entry, 16, FTW_PHYS) != 0) std::abort();
  // Hard links count once per name here: the limit holds per written byte.
  if (r.ok() && r->size_bytes > kBytes) std::abort();
  if (!remove_tree(base).ok()) std::abort();
  return 0;
}

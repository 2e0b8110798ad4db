// Builds tar archives in tests with libarchive's write API, so each hostile
// layer is exactly what the test says.
#pragma once

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/crypto.h"

namespace sandcastle::images::testing {

struct TarEntry {
  std::string path;
  unsigned type = AE_IFREG;  // AE_IFDIR, AE_IFLNK, AE_IFCHR, ...
  unsigned perm = 0644;
  std::string data;      // regular files
  std::string link;      // symlink target
  std::string hardlink;  // hard link target (type is then ignored)
  unsigned rdev_major = 0, rdev_minor = 0;
  la_int64_t size = -1;  // declared size when it differs from data (tar bombs)
};

inline TarEntry file(std::string path, std::string data, unsigned perm = 0644) {
  TarEntry e;
  e.path = std::move(path);
  e.data = std::move(data);
  e.perm = perm;
  return e;
}
inline TarEntry dir(std::string path, unsigned perm = 0755) {
  TarEntry e;
  e.path = std::move(path);
  e.type = AE_IFDIR;
  e.perm = perm;
  return e;
}
inline TarEntry symlink(std::string path, std::string target) {
  TarEntry e;
  e.path = std::move(path);
  e.type = AE_IFLNK;
  e.perm = 0777;
  e.link = std::move(target);
  return e;
}
inline TarEntry hardlink(std::string path, std::string target) {
  TarEntry e;
  e.path = std::move(path);
  e.hardlink = std::move(target);
  return e;
}

inline TarEntry device(std::string path, unsigned type, unsigned major, unsigned minor) {
  TarEntry e;
  e.path = std::move(path);
  e.type = type;
  e.perm = 0666;
  e.rdev_major = major;
  e.rdev_minor = minor;
  return e;
}

// The archive's bytes; filter: "", "gzip", "zstd".
inline std::string make_tar(const std::vector<TarEntry>& entries, const std::string& filter = "") {
  struct archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (filter == "gzip") archive_write_add_filter_gzip(a);
  if (filter == "zstd") archive_write_add_filter_zstd(a);
  archive_write_set_bytes_in_last_block(a, 1);
  std::string out;
  archive_write_open(
      a, &out, nullptr,
      [](struct archive*, void* client, const void* buf, size_t n) -> la_ssize_t {
        static_cast<std::string*>(client)->append(static_cast<const char*>(buf), n);
        return static_cast<la_ssize_t>(n);
      },
      nullptr);
  for (const auto& t : entries) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, t.path.c_str());
    archive_entry_set_perm(e, t.perm);
    archive_entry_set_mtime(e, 1700000000, 0);
    if (!t.hardlink.empty()) {
      archive_entry_set_filetype(e, AE_IFREG);
      archive_entry_set_hardlink(e, t.hardlink.c_str());
      archive_entry_set_size(e, 0);
    } else {
      archive_entry_set_filetype(e, t.type);
      if (t.type == AE_IFLNK) archive_entry_set_symlink(e, t.link.c_str());
      if (t.type == AE_IFCHR || t.type == AE_IFBLK) {
        archive_entry_set_rdevmajor(e, t.rdev_major);
        archive_entry_set_rdevminor(e, t.rdev_minor);
      }
      archive_entry_set_size(
          e,
          t.type == AE_IFREG ? (t.size >= 0 ? t.size : static_cast<la_int64_t>(t.data.size())) : 0);
    }
    if (archive_write_header(a, e) != ARCHIVE_OK) throw std::runtime_error(archive_error_string(a));
    if (t.type == AE_IFREG && t.hardlink.empty()) {
      if (t.size > static_cast<la_int64_t>(t.data.size())) {
        std::string zeros(1 << 20, '\0');
        for (la_int64_t left = t.size; left > 0; left -= static_cast<la_int64_t>(zeros.size()))
          archive_write_data(a, zeros.data(),
                             static_cast<size_t>(std::min<la_int64_t>(left, zeros.size())));
      } else if (!t.data.empty()) {
        archive_write_data(a, t.data.data(), t.data.size());
      }
    }
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

inline void write_bytes(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!f) throw std::runtime_error("write " + path);
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

inline std::string digest(const std::string& data) {
  return "sha256:" + crypto::hex(crypto::sha256(data));
}
inline std::string hex_of(const std::string& d) {
  return d.substr(7);
}

}  // namespace sandcastle::images::testing

#include "images/layer_unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <string_view>

#include "common/crypto.h"
#include "common/unique_fd.h"

namespace sandcastle::images {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}
Sha256::~Sha256() {
  EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_));
}
void Sha256::update(const void* data, size_t n) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, n);
}
std::string Sha256::finish() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), md, &len);
  return "sha256:" + crypto::hex(std::string_view(reinterpret_cast<const char*>(md), len));
}

ssize_t FdSource::read(const void** data) {
  for (;;) {
    ssize_t n = ::read(fd_, buf_.data(), buf_.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) error_ = std::string("read: ") + errno_text(errno);
    *data = buf_.data();
    return n;
  }
}

namespace {

constexpr std::string_view kWhiteoutPrefix = ".wh.";
constexpr std::string_view kOpaqueMarker = ".wh..wh..opq";

Error bad_entry(const std::string& path, const std::string& why) {
  return Error::make(ErrorCode::kInvalidArgument, "entry '" + path + "': " + why);
}

// "./a//b/./c/" → "a/b/c" ("" for the root). Absolute paths and ".." are
// refused rather than rebased: a layer that has them was not made by a
// well-behaved tool.
Result<std::string> clean_path(const std::string& raw, std::uint32_t max_depth) {
  if (raw.empty()) return bad_entry(raw, "empty path");
  // "/" alone is the layer's root as some tools write it (umoci insert).
  if (raw.find_first_not_of('/') == std::string::npos) return std::string();
  if (raw.front() == '/') return bad_entry(raw, "absolute path (refused)");
  std::string out;
  std::uint32_t depth = 0;
  size_t i = 0;
  while (i <= raw.size()) {
    size_t j = raw.find('/', i);
    if (j == std::string::npos) j = raw.size();
    std::string_view comp(raw.data() + i, j - i);
    i = j + 1;
    if (comp.empty() || comp == ".") continue;
    if (comp == "..") return bad_entry(raw, "'..' component (refused)");
    if (comp.size() > 255) return bad_entry(raw, "a name longer than 255 bytes");
    if (comp.find('\0') != std::string_view::npos) return bad_entry(raw, "NUL in the path");
    if (++depth > max_depth)
      return bad_entry(raw.substr(0, 200),
                       "deeper than " + std::to_string(max_depth) + " directories (refused)");
    if (!out.empty()) out.push_back('/');
    out.append(comp);
  }
  return out;
}

std::pair<std::string, std::string> split_parent(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

int open_beneath(int dirfd, const std::string& path, int flags) {
  struct open_how how {};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC | O_NOFOLLOW);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  for (;;) {
    int fd = static_cast<int>(::syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof how));
    if (fd < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    return fd;
  }
}

// Why the parent of an entry could not be opened beneath the root: the first
// component that is a symlink or not a directory. Only stats, for the message.
Error parent_error(int root, const std::string& entry_path, const std::string& parent, int err) {
  size_t i = 0;
  while (i <= parent.size()) {
    size_t j = parent.find('/', i);
    if (j == std::string::npos) j = parent.size();
    std::string prefix = parent.substr(0, j);
    i = j + 1;
    struct stat st {};
    if (::fstatat(root, prefix.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) break;
    if (S_ISLNK(st.st_mode))
      return bad_entry(entry_path, "its parent '" + prefix +
                                       "' is a symlink (refused: nothing is written through one)");
    if (!S_ISDIR(st.st_mode))
      return bad_entry(entry_path, "its parent '" + prefix + "' is not a directory");
  }
  return Error::from_errno("entry '" + entry_path + "': open " + parent, err);
}

struct DirFix {
  std::string path;
  mode_t mode;
  struct timespec mtime;
};

class Unpacker {
 public:
  Unpacker(int root, UnpackBudget& budget, LayerResult& result)
      : root_(root), budget_(budget), result_(result) {}

  Status entry(struct archive* ar, struct archive_entry* e);
  Status finish();

 private:
  Result<int> parent_fd(const std::string& entry_path, const std::string& parent);
  Status clear_target(int dirfd, const std::string& name, const std::string& path, bool keep_dir);
  Status write_file(struct archive* ar, struct archive_entry* e, int dirfd, const std::string& name,
                    const std::string& path);
  mode_t kept_mode(mode_t mode, bool is_dir);

  int root_;
  UnpackBudget& budget_;
  LayerResult& result_;
  std::string cached_parent_;
  UniqueFd cached_fd_;
  std::vector<DirFix> dirs_;
};

mode_t Unpacker::kept_mode(mode_t mode, bool is_dir) {
  mode &= 07777;
  if (mode & (S_ISUID | S_ISGID)) {
    ++result_.setid_stripped;
    mode &= ~static_cast<mode_t>(S_ISUID | S_ISGID);
  }
  if (!is_dir) mode &= ~static_cast<mode_t>(S_ISVTX);
  return mode;
}

// The parent directory of an entry, created (0755) when the tar did not list
// it. Opened beneath the layer root with no symlink anywhere on the way: a
// layer that planted `a -> /etc` cannot then write `a/passwd`.
Result<int> Unpacker::parent_fd(const std::string& entry_path, const std::string& parent) {
  if (parent.empty()) return root_;
  if (cached_fd_ && cached_parent_ == parent) return cached_fd_.get();
  cached_fd_.reset();
  cached_parent_.clear();
  int fd = open_beneath(root_, parent, O_RDONLY | O_DIRECTORY);
  if (fd < 0 && errno == ENOENT) {
    // Make the missing components one by one.
    UniqueFd cur(::fcntl(root_, F_DUPFD_CLOEXEC, 0));
    size_t i = 0;
    while (i < parent.size()) {
      size_t j = parent.find('/', i);
      if (j == std::string::npos) j = parent.size();
      std::string comp = parent.substr(i, j - i);
      i = j + 1;
      int next = open_beneath(cur.get(), comp, O_RDONLY | O_DIRECTORY);
      if (next < 0 && errno == ENOENT) {
        if (::mkdirat(cur.get(), comp.c_str(), 0755) != 0 && errno != EEXIST)
          return Error::from_errno("entry '" + entry_path + "': mkdir " + comp);
        next = open_beneath(cur.get(), comp, O_RDONLY | O_DIRECTORY);
      }
      if (next < 0) return parent_error(root_, entry_path, parent, errno);
      cur.reset(next);
    }
    fd = cur.release();
  }
  if (fd < 0) return parent_error(root_, entry_path, parent, errno);
  cached_fd_.reset(fd);
  cached_parent_ = parent;
  return fd;
}

Status remove_tree_at(int dirfd, const std::string& name);

// An entry replaces what an earlier entry of the same layer put there (tar
// semantics); a directory over a directory only updates its mode.
Status Unpacker::clear_target(int dirfd, const std::string& name, const std::string& path,
                              bool keep_dir) {
  struct stat st {};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return ok_status();
    return Error::from_errno("entry '" + path + "': stat");
  }
  if (S_ISDIR(st.st_mode)) {
    if (keep_dir) return ok_status();
    // Cached descriptors may point into the tree being removed.
    cached_fd_.reset();
    cached_parent_.clear();
    return remove_tree_at(dirfd, name);
  }
  if (::unlinkat(dirfd, name.c_str(), 0) != 0)
    return Error::from_errno("entry '" + path + "': unlink");
  return ok_status();
}

Status Unpacker::write_file(struct archive* ar, struct archive_entry* e, int dirfd,
                            const std::string& name, const std::string& path) {
  UniqueFd fd(
      ::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return Error::from_errno("entry '" + path + "': create");
  const la_int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
  if (size < 0) return bad_entry(path, "negative size");
  if (static_cast<std::uint64_t>(size) > budget_.bytes_left)
    return Error::make(ErrorCode::kResourceExhausted,
                       "entry '" + path + "': the image is larger than its limit");
  budget_.bytes_left -= static_cast<std::uint64_t>(size);
  result_.size_bytes += static_cast<std::uint64_t>(size);
  const void* buf = nullptr;
  size_t n = 0;
  la_int64_t off = 0;
  for (;;) {
    int r = archive_read_data_block(ar, &buf, &n, &off);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) {
      const char* msg = archive_error_string(ar);
      return Error::make(ErrorCode::kInvalidArgument,
                         "entry '" + path + "': " + (msg ? msg : "corrupt archive"));
    }
    if (off < 0 || off + static_cast<la_int64_t>(n) > size)
      return bad_entry(path, "data past its size");
    const char* p = static_cast<const char*>(buf);
    while (n > 0) {
      ssize_t w = ::pwrite(fd.get(), p, n, off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return Error::from_errno("entry '" + path + "': write");
      p += w;
      n -= static_cast<size_t>(w);
      off += w;
    }
  }
  // Sparse files end in a hole.
  if (::ftruncate(fd.get(), size) != 0) return Error::from_errno("entry '" + path + "': truncate");
  if (::fchmod(fd.get(),
               kept_mode(archive_entry_perm(e) | (archive_entry_mode(e) & 07000), false)) != 0)
    return Error::from_errno("entry '" + path + "': chmod");
  struct timespec ts[2] = {{0, UTIME_OMIT}, {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};
  (void)::futimens(fd.get(), ts);
  return ok_status();
}

Status Unpacker::entry(struct archive* ar, struct archive_entry* e) {
  if (budget_.entries_left == 0)
    return Error::make(ErrorCode::kResourceExhausted,
                       "the image has more tar entries than its limit");
  --budget_.entries_left;
  ++result_.entries;
  const char* raw = archive_entry_pathname(e);
  if (!raw) return bad_entry("?", "a path that is not valid text");
  auto cleaned = clean_path(raw, budget_.max_path_depth);
  if (!cleaned.ok()) return cleaned.error();
  const std::string& path = *cleaned;
  const mode_t type = archive_entry_filetype(e);

  if (path.empty()) {  // the layer's root directory
    if (type != AE_IFDIR) return bad_entry(raw, "the root is not a directory");
    dirs_.push_back({path,
                     kept_mode(archive_entry_mode(e), true),
                     {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}});
    return ok_status();
  }
  auto [parent, name] = split_parent(path);
  auto pfd = parent_fd(path, parent);
  if (!pfd.ok()) return pfd.error();
  const int dirfd = *pfd;

  // Whiteouts in overlayfs's format (OCI image-spec layer.md).
  if (std::string_view(name).substr(0, kWhiteoutPrefix.size()) == kWhiteoutPrefix) {
    if (name == kOpaqueMarker) {
      if (::fsetxattr(dirfd, "user.overlay.opaque", "y", 1, 0) != 0)
        return Error::from_errno("entry '" + path +
                                 "': mark the directory opaque (user.overlay.opaque)");
      // Overlay mounted by real root reads trusted.*; an unprivileged server
      // cannot set it, and its overlays (userxattr) do not read it.
      if (::geteuid() == 0) (void)::fsetxattr(dirfd, "trusted.overlay.opaque", "y", 1, 0);
      return ok_status();
    }
    std::string target = name.substr(kWhiteoutPrefix.size());
    if (target.empty() || target.rfind(".wh.", 0) == 0)
      return bad_entry(path, "a whiteout of nothing");
    // A file of the same layer wins over its whiteout (the whiteout only
    // hides lower layers).
    struct stat st {};
    if (::fstatat(dirfd, target.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return ok_status();
    if (::mknodat(dirfd, target.c_str(), S_IFCHR | 0, makedev(0, 0)) != 0)
      return Error::from_errno("entry '" + path + "': make the whiteout");
    return ok_status();
  }

  switch (type) {
    case AE_IFDIR: {
      if (auto s = clear_target(dirfd, name, path, true); !s.ok()) return s;
      if (::mkdirat(dirfd, name.c_str(), 0700) != 0 && errno != EEXIST)
        return Error::from_errno("entry '" + path + "': mkdir");
      // Modes are set at the end, so that a 0555 directory can still be filled.
      dirs_.push_back({path,
                       kept_mode(archive_entry_mode(e), true),
                       {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}});
      return ok_status();
    }
    case AE_IFREG: {
      if (archive_entry_hardlink(e)) break;
      if (auto s = clear_target(dirfd, name, path, false); !s.ok()) return s;
      return write_file(ar, e, dirfd, name, path);
    }
    case AE_IFLNK: {
      const char* target = archive_entry_symlink(e);
      if (!target || !*target) return bad_entry(path, "a symlink without a target");
      if (std::strlen(target) >= PATH_MAX)
        return bad_entry(path, "a symlink target longer than PATH_MAX");
      if (auto s = clear_target(dirfd, name, path, false); !s.ok()) return s;
      // Where it points is not checked: it is resolved inside the sandbox,
      // never by the server.
      if (::symlinkat(target, dirfd, name.c_str()) != 0)
        return Error::from_errno("entry '" + path + "': symlink");
      struct timespec ts[2] = {{0, UTIME_OMIT},
                               {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};
      (void)::utimensat(dirfd, name.c_str(), ts, AT_SYMLINK_NOFOLLOW);
      return ok_status();
    }
    case AE_IFIFO: {
      if (auto s = clear_target(dirfd, name, path, false); !s.ok()) return s;
      if (::mknodat(dirfd, name.c_str(), S_IFIFO | kept_mode(archive_entry_perm(e), false), 0) != 0)
        return Error::from_errno("entry '" + path + "': mkfifo");
      return ok_status();
    }
    case AE_IFCHR:
    case AE_IFBLK:
    case AE_IFSOCK:
      // Skipped, never made: a sandbox gets its own /dev.
      ++result_.devices_skipped;
      return ok_status();
    default:
      if (!archive_entry_hardlink(e)) return bad_entry(path, "an entry of unknown type");
  }

  // A hard link: its target must be an entry this layer already unpacked.
  auto target = clean_path(archive_entry_hardlink(e), budget_.max_path_depth);
  if (!target.ok()) return bad_entry(path, "hardlink target: " + target.error().context);
  if (target->empty()) return bad_entry(path, "a hardlink to the layer's root");
  auto [tparent, tname] = split_parent(*target);
  UniqueFd tdir;
  if (!tparent.empty()) {
    tdir.reset(open_beneath(root_, tparent, O_RDONLY | O_DIRECTORY));
    if (!tdir) return bad_entry(path, "hardlink target '" + *target + "' is not in this layer");
  }
  struct stat st {};
  const int tfd = tparent.empty() ? root_ : tdir.get();
  if (::fstatat(tfd, tname.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(st.st_mode))
    return bad_entry(path, "hardlink target '" + *target + "' is not in this layer");
  if (*target == path) return ok_status();
  if (auto s = clear_target(dirfd, name, path, false); !s.ok()) return s;
  if (::linkat(tfd, tname.c_str(), dirfd, name.c_str(), 0) != 0)
    return Error::from_errno("entry '" + path + "': link");
  return ok_status();
}

Status Unpacker::finish() {
  cached_fd_.reset();
  // Children were listed after their parents: fix them first, so that a
  // parent made read-only last does not stop the others.
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    UniqueFd fd(it->path.empty() ? ::fcntl(root_, F_DUPFD_CLOEXEC, 0)
                                 : open_beneath(root_, it->path, O_RDONLY | O_DIRECTORY));
    if (!fd) continue;  // replaced by a later entry
    if (::fchmod(fd.get(), it->mode) != 0)
      return Error::from_errno("chmod directory '" + it->path + "'");
    struct timespec ts[2] = {{0, UTIME_OMIT}, it->mtime};
    (void)::futimens(fd.get(), ts);
  }
  return ok_status();
}

// Feeds libarchive from a ByteSource, hashing the raw bytes.
struct RawCtx {
  ByteSource* src;
  Sha256 hash;
  std::string error;
  bool hashing = true;  // off for an uncompressed layer: its tar hash is its digest
};

la_ssize_t raw_read(struct archive*, void* client, const void** buf) {
  auto* c = static_cast<RawCtx*>(client);
  ssize_t n = c->src->read(buf);
  if (n < 0) {
    c->error = c->src->error();
    return -1;
  }
  if (c->hashing) c->hash.update(*buf, static_cast<size_t>(n));
  return n;
}

// Feeds the tar reader from the decompressing reader, hashing the tar bytes.
struct TarCtx {
  struct archive* raw;
  RawCtx* raw_ctx;
  Sha256 hash;
  std::vector<char> buf = std::vector<char>(1 << 20);
  std::string error;
  std::uint64_t left;  // uncompressed bytes the stream may still have
  bool too_big;
};

// What the uncompressed tar may total: the file data the budget allows plus
// headers and padding. Data that is never written (skipped members, bytes
// after the end) is bounded too, so a small compressed layer cannot make
// the server inflate terabytes of zeros.
std::uint64_t stream_limit(const UnpackBudget& b) {
  return b.bytes_left + std::min<std::uint64_t>(b.entries_left, 1u << 20) * 1536 + (1u << 20);
}

la_ssize_t tar_read(struct archive*, void* client, const void** buf) {
  auto* c = static_cast<TarCtx*>(client);
  la_ssize_t n = archive_read_data(c->raw, c->buf.data(), c->buf.size());
  if (n < 0) {
    const char* msg = archive_error_string(c->raw);
    c->error =
        !c->raw_ctx->error.empty() ? c->raw_ctx->error : (msg ? msg : "corrupt compressed stream");
    return -1;
  }
  if (static_cast<std::uint64_t>(n) > c->left) {
    c->too_big = true;
    return -1;
  }
  c->left -= static_cast<std::uint64_t>(n);
  c->hash.update(c->buf.data(), static_cast<size_t>(n));
  *buf = c->buf.data();
  return n;
}

struct ArchiveFree {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
using ArchivePtr = std::unique_ptr<struct archive, ArchiveFree>;

}  // namespace

Result<LayerResult> unpack_layer(ByteSource& src, const std::string& dest_dir,
                                 UnpackBudget& budget) {
  LayerResult result;
  UniqueFd root(::open(dest_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root) return Error::from_errno("open " + dest_dir);

  // Two readers: the first only decompresses (any filter, "raw" format) so
  // that the uncompressed tar can be hashed (its diff_id); the second reads
  // the tar from it.
  RawCtx raw_ctx{&src, {}, {}, true};
  ArchivePtr raw(archive_read_new());
  TarCtx tar_ctx{raw.get(), &raw_ctx, {}, std::vector<char>(1 << 20), {}, stream_limit(budget),
                 false};
  // Every failure of either reader is reported the same way: the limit,
  // then the source's own error, then libarchive's.
  auto corrupt = [&](struct archive* a, const char* fallback) -> Error {
    if (tar_ctx.too_big)
      return Error::make(ErrorCode::kResourceExhausted,
                         "the layer's tar stream is larger than its limit");
    const char* msg = archive_error_string(a);
    std::string why = !tar_ctx.error.empty()   ? tar_ctx.error
                      : !raw_ctx.error.empty() ? raw_ctx.error
                      : msg                    ? msg
                                               : fallback;
    return Error::make(ErrorCode::kInvalidArgument, "corrupt layer: " + why);
  };
  archive_read_support_filter_all(raw.get());
  archive_read_support_format_raw(raw.get());
  if (archive_read_open(raw.get(), &raw_ctx, nullptr, raw_read, nullptr) != ARCHIVE_OK)
    return corrupt(raw.get(), "unreadable");
  struct archive_entry* re = nullptr;
  if (archive_read_next_header(raw.get(), &re) != ARCHIVE_OK) return corrupt(raw.get(), "empty");
  const bool identity = archive_filter_code(raw.get(), 0) == ARCHIVE_FILTER_NONE;
  raw_ctx.hashing = !identity;
  ArchivePtr tar(archive_read_new());
  archive_read_support_format_tar(tar.get());
  archive_read_support_format_gnutar(tar.get());
  if (archive_read_open(tar.get(), &tar_ctx, nullptr, tar_read, nullptr) != ARCHIVE_OK)
    return corrupt(tar.get(), "not a tar");
  Unpacker un(root.get(), budget, result);
  for (;;) {
    struct archive_entry* e = nullptr;
    int r = archive_read_next_header(tar.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) return corrupt(tar.get(), "bad tar header");
    if (auto s = un.entry(tar.get(), e); !s.ok()) {
      if (tar_ctx.too_big || !tar_ctx.error.empty()) return corrupt(tar.get(), "");
      return s.error();
    }
  }
  if (auto s = un.finish(); !s.ok()) return s.error();
  // The digests cover every byte, padding after the tar's end included.
  for (;;) {
    const void* b = nullptr;
    la_ssize_t got = tar_read(tar.get(), &tar_ctx, &b);
    if (got < 0) return corrupt(raw.get(), "bad stream");
    if (got == 0) break;
  }
  for (;;) {
    const void* b = nullptr;
    ssize_t n = src.read(&b);
    if (n < 0) return Error::make(ErrorCode::kIo, "read layer: " + src.error());
    if (n == 0) break;
    raw_ctx.hash.update(b, static_cast<size_t>(n));
  }
  result.diff_id = tar_ctx.hash.finish();
  result.blob_digest = identity ? result.diff_id : raw_ctx.hash.finish();
  return result;
}

namespace {

Status remove_tree_at(int dirfd, const std::string& name) {
  struct stat st {};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? ok_status() : Error::from_errno("stat " + name);
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(dirfd, name.c_str(), 0) != 0 && errno != ENOENT)
      return Error::from_errno("unlink " + name);
    return ok_status();
  }
  (void)::fchmodat(dirfd, name.c_str(), 0700, 0);
  int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Error::from_errno("open " + name);
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return Error::from_errno("opendir " + name);
  }
  std::vector<std::string> names;
  while (auto* de = ::readdir(d)) {
    std::string_view n(de->d_name);
    if (n != "." && n != "..") names.emplace_back(n);
  }
  Status st_out = ok_status();
  for (const auto& n : names)
    if (auto s = remove_tree_at(::dirfd(d), n); !s.ok() && st_out.ok()) st_out = s;
  ::closedir(d);
  if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT && st_out.ok())
    st_out = Error::from_errno("rmdir " + name);
  return st_out;
}

}  // namespace

Status remove_tree(const std::string& path) {
  auto [parent, name] = split_parent(path);
  UniqueFd pfd(::open(parent.empty() ? "/" : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!pfd) return errno == ENOENT ? ok_status() : Error::from_errno("open " + parent);
  return remove_tree_at(pfd.get(), name);
}

}  // namespace sandcastle::images

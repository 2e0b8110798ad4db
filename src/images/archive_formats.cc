#include "images/archive_formats.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cctype>
#include <map>
#include <string_view>

#include "common/crypto.h"
#include "common/json_parse.h"
#include "common/unique_fd.h"
#include "images/oci_layout_writer.h"

namespace sandcastle::images {

namespace {

using nlohmann::json;

constexpr size_t kSmallFileMax = 4 << 20;    // manifests, configs, indexes
constexpr size_t kSmallTotalMax = 64 << 20;  // all of them in one archive
constexpr int kMaxIndexDepth = 4;            // an index of indexes of ...
constexpr size_t kMaxMembers = 100'000;      // members of an image archive

Error bad(const std::string& why) {
  return Error::make(ErrorCode::kInvalidArgument, why);
}

bool is_hex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool valid_digest(const std::string& d) {
  return d.rfind("sha256:", 0) == 0 && is_hex64(std::string_view(d).substr(7));
}

std::string strip_dot(std::string name) {
  while (name.rfind("./", 0) == 0) name.erase(0, 2);
  while (!name.empty() && name.back() == '/') name.pop_back();
  return name;
}

// Names a docker/podman save archive or an OCI layout has at its top; any
// other name makes the tar a plain rootfs.
bool structural_name(const std::string& n) {
  if (n.empty() || n == "manifest.json" || n == "repositories" || n == "index.json" ||
      n == "oci-layout" || n == "blobs" || n == "blobs/sha256")
    return true;
  if (n.rfind("blobs/sha256/", 0) == 0) return is_hex64(std::string_view(n).substr(13));
  auto slash = n.find('/');
  std::string_view head = std::string_view(n).substr(0, slash);
  if (slash != std::string::npos) {
    std::string_view tail = std::string_view(n).substr(slash + 1);
    return is_hex64(head) && (tail == "layer.tar" || tail == "json" || tail == "VERSION");
  }
  for (std::string_view ext : {".json", ".tar"})
    if (n.size() > ext.size() && n.compare(n.size() - ext.size(), ext.size(), ext) == 0)
      return is_hex64(std::string_view(n).substr(0, n.size() - ext.size()));
  return is_hex64(n);
}

// gzip, zstd, xz or bzip2 by their magic numbers.
bool looks_compressed(const std::string& path) {
  unsigned char m[6] = {};
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd || ::read(fd.get(), m, sizeof m) != static_cast<ssize_t>(sizeof m)) return false;
  return (m[0] == 0x1f && m[1] == 0x8b) ||
         (m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd) ||
         (m[0] == 0xfd && m[1] == '7' && m[2] == 'z' && m[3] == 'X' && m[4] == 'Z') ||
         (m[0] == 'B' && m[1] == 'Z' && m[2] == 'h');
}

struct ReadArchiveFree {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
using ReadArchivePtr = std::unique_ptr<struct archive, ReadArchiveFree>;

ReadArchivePtr open_tar(const std::string& path, std::string* err) {
  ReadArchivePtr a(archive_read_new());
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  archive_read_support_format_gnutar(a.get());
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 20) != ARCHIVE_OK) {
    const char* m = archive_error_string(a.get());
    *err = m ? m : "cannot open";
    return nullptr;
  }
  return a;
}

// The bytes of the tar member the reader is positioned at.
class EntrySource : public ByteSource {
 public:
  explicit EntrySource(struct archive* a) : a_(a) {}
  ssize_t read(const void** data) override {
    size_t n = 0;
    la_int64_t off = 0;
    int r = archive_read_data_block(a_, data, &n, &off);
    if (r == ARCHIVE_EOF) return 0;
    if (r < ARCHIVE_WARN) {
      const char* m = archive_error_string(a_);
      error_ = std::string("corrupt archive: ") + (m ? m : "read error");
      return -1;
    }
    if (off != pos_) {
      error_ = "a sparse member (not a blob)";
      return -1;
    }
    pos_ += static_cast<la_int64_t>(n);
    return static_cast<ssize_t>(n);
  }
  std::string error() const override { return error_; }

 private:
  struct archive* a_;
  la_int64_t pos_ = 0;
  std::string error_;
};

class TarSource : public ImageSource {
 public:
  explicit TarSource(std::string path) : path_(std::move(path)) {}

  // Lists the members and keeps the small structural ones; stops early (a
  // rootfs) at the first name no image archive has.
  Status scan(bool* rootfs) {
    std::string err;
    auto a = open_tar(path_, &err);
    if (!a)
      return bad(std::string(looks_compressed(path_) ? "corrupt archive: "
                                                     : "not an image archive or rootfs tar: ") +
                 err);
    size_t kept = 0;
    bool first = true;
    *rootfs = false;
    for (;;) {
      struct archive_entry* e = nullptr;
      int r = archive_read_next_header(a.get(), &e);
      if (r == ARCHIVE_EOF) break;
      if (r < ARCHIVE_WARN) {
        const char* m = archive_error_string(a.get());
        // A compressed file that fails is corrupt; otherwise, failing at
        // once means it was never a tar.
        const bool compressed = looks_compressed(path_);
        return bad(std::string(first && !compressed ? "not an image archive or rootfs tar: "
                                                    : "corrupt archive: ") +
                   (m ? m : "bad header"));
      }
      first = false;
      const char* raw = archive_entry_pathname(e);
      std::string name = strip_dot(raw ? raw : "");
      if (!structural_name(name)) {
        *rootfs = true;
        return ok_status();
      }
      names_.insert(name);
      if (names_.size() > kMaxMembers)
        return bad("the archive has more than " + std::to_string(kMaxMembers) + " members");
      if (archive_entry_filetype(e) != AE_IFREG) continue;
      const la_int64_t size = archive_entry_size(e);
      if (size < 0 || static_cast<size_t>(size) > kSmallFileMax) continue;
      const bool json_name = name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0;
      const bool meta = json_name || name == "oci-layout" || name == "repositories" ||
                        name.rfind("blobs/", 0) == 0;
      if (!meta) continue;
      std::string data(static_cast<size_t>(size), '\0');
      // Blobs: only JSON ones (manifests, configs) are kept; layers are streamed later.
      size_t want = name.rfind("blobs/", 0) == 0 ? std::min<size_t>(data.size(), 1) : data.size();
      la_ssize_t got = archive_read_data(a.get(), data.data(), want);
      if (got < 0) {
        const char* m = archive_error_string(a.get());
        return bad(std::string("corrupt archive: ") + (m ? m : "read error"));
      }
      if (want < data.size()) {
        if (got != 1 || data[0] != '{') continue;
        la_ssize_t rest = archive_read_data(a.get(), data.data() + 1, data.size() - 1);
        if (rest < 0) {
          const char* m = archive_error_string(a.get());
          return bad(std::string("corrupt archive: ") + (m ? m : "read error"));
        }
        got += rest;
      }
      if (static_cast<size_t>(got) != data.size())
        return bad("corrupt archive: " + name + " is truncated");
      kept += data.size();
      if (kept > kSmallTotalMax)
        return bad("the archive's manifests and configs are larger than 64 MiB");
      files_[name] = std::move(data);
    }
    return ok_status();
  }

  Result<std::string> small_file(const std::string& path) override {
    auto it = files_.find(path);
    if (it == files_.end())
      return Error::make(ErrorCode::kNotFound, has(path) ? path + " is not a small JSON file"
                                                         : "the archive has no " + path);
    return it->second;
  }
  bool has(const std::string& path) const override { return names_.count(path) > 0; }

  Status stream(const std::set<std::string>& paths,
                const std::function<Status(const std::string&, ByteSource&)>& fn) override {
    std::set<std::string> left = paths;
    if (left.count("")) {
      UniqueFd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd) return Error::from_errno("open " + path_);
      FdSource src(fd.get());
      if (auto s = fn("", src); !s.ok()) return s;
      left.erase("");
    }
    if (left.empty()) return ok_status();
    std::string err;
    auto a = open_tar(path_, &err);
    if (!a) return bad("corrupt archive: " + err);
    for (;;) {
      struct archive_entry* e = nullptr;
      int r = archive_read_next_header(a.get(), &e);
      if (r == ARCHIVE_EOF) break;
      if (r < ARCHIVE_WARN) {
        const char* m = archive_error_string(a.get());
        return bad(std::string("corrupt archive: ") + (m ? m : "bad header"));
      }
      const char* raw = archive_entry_pathname(e);
      std::string name = strip_dot(raw ? raw : "");
      if (!left.count(name) || archive_entry_filetype(e) != AE_IFREG) continue;
      EntrySource src(a.get());
      if (auto s = fn(name, src); !s.ok()) return s;
      left.erase(name);
      if (left.empty()) break;
    }
    if (!left.empty()) return bad("the archive has no " + *left.begin());
    return ok_status();
  }

 private:
  std::string path_;
  std::set<std::string> names_;
  std::map<std::string, std::string> files_;
};

int open_beneath(int dirfd, const std::string& path) {
  struct open_how how {};
  how.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof how));
}

// An OCI layout directory. Its files are opened beneath it, never through a
// symlink.
class DirSource : public ImageSource {
 public:
  explicit DirSource(UniqueFd dir) : dir_(std::move(dir)) {}

  Result<std::string> small_file(const std::string& path) override {
    UniqueFd fd(open_beneath(dir_.get(), path));
    if (!fd) {
      if (errno == ENOENT) return Error::make(ErrorCode::kNotFound, "the layout has no " + path);
      return Error::from_errno("open " + path);
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
      return bad(path + " is not a regular file");
    if (static_cast<size_t>(st.st_size) > kSmallFileMax) return bad(path + " is larger than 4 MiB");
    std::string data(static_cast<size_t>(st.st_size), '\0');
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::read(fd.get(), data.data() + off, data.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Error::from_errno("read " + path);
      off += static_cast<size_t>(n);
    }
    return data;
  }
  bool has(const std::string& path) const override {
    struct stat st {};
    return ::fstatat(dir_.get(), path.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  }
  Status stream(const std::set<std::string>& paths,
                const std::function<Status(const std::string&, ByteSource&)>& fn) override {
    for (const auto& p : paths) {
      UniqueFd fd(open_beneath(dir_.get(), p));
      if (!fd)
        return errno == ENOENT ? bad("the layout has no " + p) : Error::from_errno("open " + p);
      struct stat st {};
      if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
        return bad(p + " is not a regular file");
      FdSource src(fd.get());
      if (auto s = fn(p, src); !s.ok()) return s;
    }
    return ok_status();
  }

 private:
  UniqueFd dir_;
};

Result<json> parse_small(const std::string& text, const std::string& what) {
  auto j = parse_json(text, JsonLimits{kSmallFileMax});
  if (!j.ok()) return bad(what + ": " + j.error().context);
  return j;
}

std::string string_field(const json& j, const char* key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Status fill_from_config(ImagePlan& plan, const std::string& config_text, size_t layer_count) {
  auto cfg = parse_small(config_text, "image config");
  if (!cfg.ok()) return cfg.error();
  const json& c = *cfg;
  if (!c.is_object()) return bad("image config: not an object");
  if (auto it = c.find("config"); it != c.end() && !it->is_null()) {
    auto rc = parse_run_config(*it);
    if (!rc.ok()) return rc.error();
    plan.config = std::move(rc).value();
  }
  auto rootfs = c.find("rootfs");
  if (rootfs == c.end() || !rootfs->is_object() || !rootfs->contains("diff_ids") ||
      !(*rootfs)["diff_ids"].is_array())
    return bad("image config: no rootfs.diff_ids");
  const json& ids = (*rootfs)["diff_ids"];
  if (ids.size() != layer_count)
    return bad("image config lists " + std::to_string(ids.size()) + " layers, the manifest " +
               std::to_string(layer_count));
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!ids[i].is_string() || !valid_digest(ids[i].get<std::string>()))
      return bad("image config: diff_ids[" + std::to_string(i) + "] is not a sha256 digest");
    plan.layers[i].diff_id = ids[i].get<std::string>();
  }
  plan.config_json = config_text;
  plan.id = sha256_digest(config_text);
  return ok_status();
}

// A blob named by its digest must hash to it.
Result<std::string> verified_blob(ImageSource& src, const std::string& digest,
                                  const std::string& what) {
  if (!valid_digest(digest))
    return bad(what + ": '" + digest.substr(0, 80) + "' is not a sha256 digest");
  const std::string path = "blobs/sha256/" + digest.substr(7);
  auto data = src.small_file(path);
  if (!data.ok()) return bad(what + ": " + data.error().context);
  if (auto got = sha256_digest(*data); got != digest)
    return bad(what + " " + path + ": digest mismatch: its sha256 is " + got);
  return data;
}

Status plan_docker(ImageSource& src, ImagePlan& plan) {
  auto text = src.small_file("manifest.json");
  if (!text.ok()) return text.error();
  auto m = parse_small(*text, "manifest.json");
  if (!m.ok()) return m.error();
  if (!m->is_array() || m->empty() || !(*m)[0].is_object())
    return bad("manifest.json: not a list of images");
  if (m->size() > 1)
    plan.warnings.push_back("the archive holds " + std::to_string(m->size()) +
                            " images; imported the first");
  const json& img = (*m)[0];
  const std::string config_path = strip_dot(string_field(img, "Config"));
  if (config_path.empty()) return bad("manifest.json: no Config");
  auto layers = img.find("Layers");
  if (layers == img.end() || !layers->is_array()) return bad("manifest.json: no Layers");
  for (const auto& l : *layers) {
    if (!l.is_string()) return bad("manifest.json: a layer that is not a path");
    LayerPlan lp;
    lp.path = strip_dot(l.get<std::string>());
    if (lp.path.rfind("blobs/sha256/", 0) == 0) lp.blob_digest = "sha256:" + lp.path.substr(13);
    plan.layers.push_back(std::move(lp));
  }
  if (auto tags = img.find("RepoTags");
      tags != img.end() && tags->is_array() && !tags->empty() && (*tags)[0].is_string())
    plan.name_hint = (*tags)[0].get<std::string>();
  auto cfg = src.small_file(config_path);
  if (!cfg.ok()) return bad("manifest.json: Config: " + cfg.error().context);
  // Configs are named by their digest ("<hex>.json", "blobs/sha256/<hex>").
  std::string named;
  if (config_path.rfind("blobs/sha256/", 0) == 0)
    named = config_path.substr(13);
  else if (config_path.size() == 69 && config_path.compare(64, 5, ".json") == 0)
    named = config_path.substr(0, 64);
  if (!named.empty() && sha256_digest(*cfg) != "sha256:" + named)
    return bad("config " + config_path + ": digest mismatch: its sha256 is " + sha256_digest(*cfg));
  plan.format = "docker-archive";
  return fill_from_config(plan, *cfg, plan.layers.size());
}

// The manifest of an index that fits this machine (linux/amd64 when it
// names platforms).
Result<json> pick_manifest(ImageSource& src, const json& index, std::string* ref_name, int depth) {
  if (depth > kMaxIndexDepth)
    return bad("index: nested deeper than " + std::to_string(kMaxIndexDepth));
  auto ms = index.find("manifests");
  if (ms == index.end() || !ms->is_array() || ms->empty()) return bad("index: no manifests");
  const json* chosen = nullptr;
  for (const auto& d : *ms) {
    if (!d.is_object()) continue;
    auto p = d.find("platform");
    if (p == d.end() || !p->is_object() ||
        (string_field(*p, "os") == "linux" && string_field(*p, "architecture") == "amd64")) {
      chosen = &d;
      break;
    }
  }
  if (!chosen) return bad("index: no manifest for linux/amd64");
  if (auto ann = chosen->find("annotations"); ann != chosen->end() && ann->is_object()) {
    std::string full = string_field(*ann, "io.containerd.image.name");
    std::string ref = string_field(*ann, "org.opencontainers.image.ref.name");
    if (ref_name->empty()) *ref_name = !full.empty() ? full : ref;
  }
  auto blob = verified_blob(src, string_field(*chosen, "digest"), "manifest");
  if (!blob.ok()) return blob.error();
  auto j = parse_small(*blob, "manifest");
  if (!j.ok()) return j.error();
  if (j->is_object() && j->contains("manifests"))
    return pick_manifest(src, *j, ref_name, depth + 1);
  return j;
}

Status plan_oci(ImageSource& src, ImagePlan& plan) {
  auto text = src.small_file("index.json");
  if (!text.ok()) return text.error();
  auto index = parse_small(*text, "index.json");
  if (!index.ok()) return index.error();
  if (!index->is_object()) return bad("index.json: not an object");
  auto manifest = pick_manifest(src, *index, &plan.name_hint, 0);
  if (!manifest.ok()) return manifest.error();
  const json& m = *manifest;
  if (!m.is_object() || !m.contains("config") || !m["config"].is_object())
    return bad("manifest: no config");
  auto layers = m.find("layers");
  if (layers == m.end() || !layers->is_array()) return bad("manifest: no layers");
  for (const auto& l : *layers) {
    std::string d = string_field(l, "digest");
    if (!valid_digest(d)) return bad("manifest: a layer digest that is not sha256");
    plan.layers.push_back({"blobs/sha256/" + d.substr(7), d, ""});
  }
  auto cfg = verified_blob(src, string_field(m["config"], "digest"), "config");
  if (!cfg.ok()) return cfg.error();
  plan.format = "oci";
  return fill_from_config(plan, *cfg, plan.layers.size());
}

// The file's name without its archive extensions, made a valid image name.
std::string name_from_file(const std::string& path) {
  std::string base = path;
  while (!base.empty() && base.back() == '/') base.pop_back();
  base = base.substr(base.rfind('/') == std::string::npos ? 0 : base.rfind('/') + 1);
  for (std::string_view ext : {".tar.gz", ".tar.zst", ".tar.xz", ".tgz", ".tar", ".oci"})
    if (base.size() > ext.size() && base.compare(base.size() - ext.size(), ext.size(), ext) == 0) {
      base.resize(base.size() - ext.size());
      break;
    }
  for (auto& c : base)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '-';
  base = base.substr(0, 200);
  while (!base.empty() && !std::isalnum(static_cast<unsigned char>(base.front()))) base.erase(0, 1);
  return base.empty() ? "image" : base;
}

}  // namespace

bool valid_image_name(const std::string& name) {
  if (name.empty() || name.size() > 255 || name.rfind("sha256:", 0) == 0) return false;
  if (!std::isalnum(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
          c == '/' || c == ':' || c == '@'))
      return false;
  return true;
}

Result<ImageConfig> parse_run_config(const json& c) {
  if (!c.is_object()) return bad("image config: config is not an object");
  ImageConfig out;
  auto strings = [&](const char* key, std::vector<std::string>* to, size_t max_n) -> Status {
    auto it = c.find(key);
    if (it == c.end() || it->is_null()) return ok_status();
    if (!it->is_array() || it->size() > max_n)
      return bad(std::string("image config: ") + key + " is not a list of at most " +
                 std::to_string(max_n));
    for (const auto& v : *it) {
      if (!v.is_string() || v.get<std::string>().size() > 65536)
        return bad(std::string("image config: ") + key +
                   " has an entry that is not a string of at most 64 KiB");
      to->push_back(v.get<std::string>());
    }
    return ok_status();
  };
  if (auto s = strings("Env", &out.env, 4096); !s.ok()) return s.error();
  for (const auto& e : out.env)
    if (e.find('=') == std::string::npos || e.front() == '=' || e.find('\0') != std::string::npos)
      return bad("image config: Env entry '" + e.substr(0, 80) + "' is not NAME=value");
  if (auto s = strings("Entrypoint", &out.entrypoint, 4096); !s.ok()) return s.error();
  if (auto s = strings("Cmd", &out.cmd, 4096); !s.ok()) return s.error();
  out.working_dir = string_field(c, "WorkingDir");
  if (!out.working_dir.empty() && (out.working_dir.front() != '/' || out.working_dir.size() > 4096))
    return bad("image config: WorkingDir '" + out.working_dir.substr(0, 80) +
               "' is not an absolute path");
  out.user = string_field(c, "User");
  if (out.user.size() > 256 || out.user.find_first_of(std::string("\n\0/", 3)) != std::string::npos)
    return bad("image config: User is not a user name or uid[:gid]");
  return out;
}

Result<ImagePlan> plan_import(const std::string& path, std::unique_ptr<ImageSource>* source) {
  ImagePlan plan;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Error::from_errno("import " + path);
  if (S_ISDIR(st.st_mode)) {
    UniqueFd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir) return Error::from_errno("open " + path);
    auto src = std::make_unique<DirSource>(std::move(dir));
    if (!src->has("index.json") || !src->has("oci-layout"))
      return bad(path +
                 ": a directory that is not an OCI image layout (no index.json and oci-layout); "
                 "for a root filesystem, import a tar of it: tar -C DIR -cf rootfs.tar .");
    if (auto s = plan_oci(*src, plan); !s.ok()) return s.error();
    *source = std::move(src);
  } else if (S_ISREG(st.st_mode)) {
    auto src = std::make_unique<TarSource>(path);
    bool rootfs = false;
    if (auto s = src->scan(&rootfs); !s.ok()) return s.error();
    if (!rootfs && src->has("manifest.json")) {
      if (auto s = plan_docker(*src, plan); !s.ok()) return s.error();
    } else if (!rootfs && src->has("index.json") && src->has("oci-layout")) {
      if (auto s = plan_oci(*src, plan); !s.ok()) return s.error();
    } else {
      plan.format = "rootfs";
      plan.layers.push_back({"", "", ""});
    }
    *source = std::move(src);
  } else {
    return bad(path + ": neither a file nor a directory");
  }
  if (plan.name_hint.empty() || !valid_image_name(plan.name_hint))
    plan.name_hint = name_from_file(path);
  return plan;
}

}  // namespace sandcastle::images

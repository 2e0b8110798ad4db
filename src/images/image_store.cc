// The SQLite-backed image store. Files: <state>/images/layers/sha256/<hex>/
// (one unpacked tree per layer, named by its diff_id), tmp/ (imports under
// way), lock (flock: imports share it, rm and the clean-up at open take it
// alone). Rows: images, image_tags, layers, image_layers, image_use in
// <state>/sandcastle.db.
#include "images/image_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "common/crypto.h"
#include "common/unique_fd.h"
#include "images/archive_formats.h"
#include "images/image_names.h"
#include "images/language_probe.h"
#include "images/layer_unpack.h"

namespace sandcastle::images {

namespace {

using nlohmann::json;

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &st_, nullptr); }
  ~Stmt() { sqlite3_finalize(st_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  Stmt& bind(int i, const std::string& v) {
    sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind(int i, std::int64_t v) {
    sqlite3_bind_int64(st_, i, v);
    return *this;
  }
  int step() { return sqlite3_step(st_); }
  std::string text(int col) {
    auto p = sqlite3_column_text(st_, col);
    return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
  }
  std::int64_t num(int col) { return sqlite3_column_int64(st_, col); }

 private:
  sqlite3_stmt* st_ = nullptr;
  int rc_;
};

Error db_error(sqlite3* db, const std::string& what) {
  return Error::make(ErrorCode::kIo, "image database: " + what + ": " + sqlite3_errmsg(db));
}

json config_to_json(const ImageConfig& c) {
  return json{{"Env", c.env},
              {"WorkingDir", c.working_dir},
              {"User", c.user},
              {"Entrypoint", c.entrypoint},
              {"Cmd", c.cmd}};
}

ImageConfig config_from_json(const std::string& text) {
  ImageConfig c;
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return c;
  auto rc = parse_run_config(j);
  return rc.ok() ? std::move(rc).value() : c;
}

std::string hex_of(const std::string& digest) {
  return digest.substr(digest.find(':') + 1);
}

std::int64_t now_s() {
  return static_cast<std::int64_t>(std::time(nullptr));
}

std::string iso(std::int64_t t) {
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  if (std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) return {};
  return buf;
}

// The image config's "created" (RFC 3339), else now.
std::int64_t created_of(const std::string& raw_config) {
  auto j = json::parse(raw_config, nullptr, false);
  if (j.is_object() && j.contains("created") && j["created"].is_string()) {
    std::tm tm{};
    const std::string s = j["created"].get<std::string>();
    if (strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm))
      return static_cast<std::int64_t>(timegm(&tm));
  }
  return now_s();
}

// An OCI image config for images the store makes itself (rootfs imports,
// builds, saved sandboxes): their id is its digest, as for any other image.
// A rootfs has no creation time in it, so the same tar is the same image.
std::string make_config(const ImageConfig& c, const std::vector<std::string>& diff_ids,
                        bool dated) {
  json cfg = {{"architecture", "amd64"},
              {"os", "linux"},
              {"config", config_to_json(c)},
              {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}}};
  if (dated) cfg["created"] = iso(now_s());
  return cfg.dump();
}

std::string random_name() {
  return crypto::hex(crypto::random_bytes(8));
}

bool process_alive(std::int64_t pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// flock on <images>/lock for one operation.
class FileLock {
 public:
  static Result<FileLock> take(const std::string& path, int op) {
    FileLock l;
    l.fd_.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!l.fd_) return Error::from_errno("open " + path);
    while (::flock(l.fd_.get(), op) != 0) {
      if (errno == EINTR) continue;
      if (errno == EWOULDBLOCK)
        return Error::make(ErrorCode::kUnavailable, "the image store is busy");
      return Error::from_errno("flock " + path);
    }
    return l;
  }

 private:
  UniqueFd fd_;
};

class SqliteImageStore : public ImageStore {
 public:
  SqliteImageStore(sqlite3* db, std::string root, StoreLimits limits)
      : db_(db), root_(std::move(root)), limits_(limits) {}
  ~SqliteImageStore() override { sqlite3_close(db_); }

  Status init();
  Result<ImageRecord> import(const std::string& path, const ImportOptions& opts) override;
  Result<ImageRecord> find(const std::string& ref) const override;
  std::vector<ImageRecord> list() const override;
  Result<std::vector<std::string>> layer_dirs(const ImageRecord& image) const override;
  Status remove(const std::string& ref,
                const std::function<std::vector<std::string>(const std::string&)>& in_use) override;
  Result<ImageRecord> add_layer(const ImageRecord& base, const std::string& layer_tar_path,
                                const std::string& name, const ImageConfig& config,
                                const std::string& source, const std::string& owner) override;
  Status check_name(const std::string& name, const std::string& owner) const override;
  Status mark_in_use(const std::string& image_id, const std::string& sandbox_id) override;
  Status release(const std::string& image_id, const std::string& sandbox_id) override;

 private:
  struct NewLayer {
    std::string diff_id;
    std::string tmp_dir;  // empty: already in the store
    std::uint64_t size = 0;
  };
  struct Commit {
    std::string id;
    std::string name;
    std::string raw_config;
    ImageConfig config;
    std::string source;
    std::optional<std::string> owner;  // of the name; none: the operator's, unchecked
    std::vector<std::string> diff_ids;
    std::vector<NewLayer> layers;  // one per distinct diff_id
    std::vector<std::string> warnings;
  };

  Status exec(const std::string& sql);
  std::string layer_dir(const std::string& diff_id) const {
    return root_ + "/layers/sha256/" + hex_of(diff_id);
  }
  std::optional<std::uint64_t> layer_size(const std::string& diff_id) const;  // takes mu_
  Result<ImageRecord> load(const std::string& id) const;
  // The image a reference names; *tag receives the name it matched, if any.
  std::optional<std::string> id_of(const std::string& ref, std::string* tag = nullptr) const;
  Result<ImageRecord> commit(Commit& c);
  // Requires mu_. kAlreadyExists if `owner` may not take `name`.
  Status name_free(const std::string& name, const std::string& owner) const;
  // owner: who takes the name, checked with name_free; none: the operator,
  // unchecked (import, pull, build from the CLI).
  Status add_tag(const std::string& id, const std::string& name,
                 const std::optional<std::string>& owner);
  void cleanup();

  sqlite3* db_;
  std::string root_;
  StoreLimits limits_;
  mutable std::mutex mu_;
};

Status SqliteImageStore::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return Error::make(ErrorCode::kIo, "image database: " + msg);
  }
  return ok_status();
}

Status SqliteImageStore::init() {
  for (const char* sub : {"", "/layers", "/layers/sha256", "/tmp"}) {
    std::string d = root_ + sub;
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) return Error::from_errno("mkdir " + d);
  }
  if (auto s = exec("PRAGMA journal_mode=WAL"); !s.ok()) return s;
  if (auto s = exec(
          "CREATE TABLE IF NOT EXISTS images (id TEXT PRIMARY KEY, size INTEGER NOT NULL,"
          " created INTEGER NOT NULL, imported INTEGER NOT NULL, source TEXT NOT NULL,"
          " config TEXT NOT NULL, raw_config TEXT NOT NULL, languages TEXT NOT NULL);"
          "CREATE TABLE IF NOT EXISTS image_tags (tag TEXT PRIMARY KEY, image_id TEXT NOT NULL);"
          "CREATE TABLE IF NOT EXISTS layers (digest TEXT PRIMARY KEY, size INTEGER NOT NULL);"
          "CREATE TABLE IF NOT EXISTS image_layers (image_id TEXT NOT NULL, pos INTEGER NOT NULL,"
          " digest TEXT NOT NULL, PRIMARY KEY (image_id, pos));"
          "CREATE TABLE IF NOT EXISTS image_use (image_id TEXT NOT NULL, sandbox_id TEXT NOT NULL,"
          " pid INTEGER NOT NULL, PRIMARY KEY (image_id, sandbox_id))");
      !s.ok())
    return s;
  // Who made each name ("" the operator; older stores' names are the operator's).
  auto has_owner = [this] {
    Stmt cols(db_, "SELECT 1 FROM pragma_table_info('image_tags') WHERE name='owner'");
    return cols.ok() && cols.step() == SQLITE_ROW;
  };
  if (!has_owner())
    if (auto s = exec("ALTER TABLE image_tags ADD COLUMN owner TEXT NOT NULL DEFAULT ''");
        !s.ok() && !has_owner())  // another process may have added it first
      return s;
  cleanup();
  return ok_status();
}

// What a crash left: unfinished imports in tmp/, and layer trees renamed into
// place whose rows were never written. Skipped while another process imports.
void SqliteImageStore::cleanup() {
  auto lock = FileLock::take(root_ + "/lock", LOCK_EX | LOCK_NB);
  if (!lock.ok()) return;
  auto entries = [](const std::string& dir) {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(dir.c_str())) {
      while (auto* de = ::readdir(d))
        if (std::string_view n(de->d_name); n != "." && n != "..") out.emplace_back(n);
      ::closedir(d);
    }
    return out;
  };
  for (const auto& n : entries(root_ + "/tmp")) (void)remove_tree(root_ + "/tmp/" + n);
  for (const auto& n : entries(root_ + "/layers/sha256"))
    if (!layer_size("sha256:" + n)) (void)remove_tree(root_ + "/layers/sha256/" + n);
  // Uses recorded by processes that are gone.
  std::vector<std::int64_t> dead;
  Stmt st(db_, "SELECT DISTINCT pid FROM image_use");
  while (st.ok() && st.step() == SQLITE_ROW)
    if (!process_alive(st.num(0))) dead.push_back(st.num(0));
  for (auto pid : dead) {
    Stmt del(db_, "DELETE FROM image_use WHERE pid=?");
    del.bind(1, pid).step();
  }
}

std::optional<std::uint64_t> SqliteImageStore::layer_size(const std::string& diff_id) const {
  // One statement at a time on the connection: a commit of another thread
  // may be between its BEGIN and COMMIT.
  std::lock_guard lock(mu_);
  Stmt st(db_, "SELECT size FROM layers WHERE digest=?");
  st.bind(1, diff_id);
  if (!st.ok() || st.step() != SQLITE_ROW) return std::nullopt;
  struct stat sb {};
  if (::lstat(layer_dir(diff_id).c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) return std::nullopt;
  return static_cast<std::uint64_t>(st.num(0));
}

Result<ImageRecord> SqliteImageStore::load(const std::string& id) const {
  Stmt st(db_, "SELECT size, created, source, config, languages FROM images WHERE id=?");
  st.bind(1, id);
  if (!st.ok() || st.step() != SQLITE_ROW)
    return Error::make(ErrorCode::kNotFound, "no image " + id);
  ImageRecord r;
  r.id = id;
  r.size_bytes = static_cast<std::uint64_t>(st.num(0));
  r.created = std::chrono::system_clock::from_time_t(static_cast<std::time_t>(st.num(1)));
  r.source = st.text(2);
  r.config = config_from_json(st.text(3));
  auto langs = json::parse(st.text(4), nullptr, false);
  if (langs.is_array())
    for (const auto& l : langs)
      if (l.is_string()) r.languages.push_back(l.get<std::string>());
  Stmt tags(db_, "SELECT tag FROM image_tags WHERE image_id=? ORDER BY rowid");
  tags.bind(1, id);
  while (tags.step() == SQLITE_ROW) r.tags.push_back(tags.text(0));
  if (!r.tags.empty()) {
    r.name = r.tags.front();
    r.tags.erase(r.tags.begin());
  }
  Stmt layers(db_, "SELECT digest FROM image_layers WHERE image_id=? ORDER BY pos");
  layers.bind(1, id);
  while (layers.step() == SQLITE_ROW) r.layers.push_back(layers.text(0));
  return r;
}

std::optional<std::string> SqliteImageStore::id_of(const std::string& ref, std::string* tag) const {
  for (const auto& cand : names_tried(ref)) {
    Stmt st(db_, "SELECT image_id FROM image_tags WHERE tag=?");
    st.bind(1, cand);
    if (st.ok() && st.step() == SQLITE_ROW) {
      if (tag) *tag = cand;
      return st.text(0);
    }
  }
  if (!reads_as_id(ref)) return std::nullopt;
  std::string hex = ref.rfind("sha256:", 0) == 0 ? ref.substr(7) : ref;
  Stmt st(db_, "SELECT id FROM images WHERE substr(id, 1, ?) = ? LIMIT 2");
  st.bind(1, static_cast<std::int64_t>(hex.size() + 7)).bind(2, "sha256:" + hex);
  std::vector<std::string> ids;
  while (st.ok() && st.step() == SQLITE_ROW) ids.push_back(st.text(0));
  if (ids.size() == 1) return ids[0];
  if (ids.size() > 1) return std::string("?ambiguous");
  return std::nullopt;
}

Result<ImageRecord> SqliteImageStore::find(const std::string& ref) const {
  std::lock_guard lock(mu_);
  auto id = id_of(ref);
  if (!id)
    return Error::make(ErrorCode::kNotFound,
                       "no image '" + ref + "' (see `sandcastle image list`)");
  if (*id == "?ambiguous")
    return Error::make(ErrorCode::kInvalidArgument,
                       "'" + ref + "' is the start of more than one image id");
  return load(*id);
}

std::vector<ImageRecord> SqliteImageStore::list() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> ids;
  Stmt st(db_, "SELECT id FROM images ORDER BY imported, rowid");
  while (st.ok() && st.step() == SQLITE_ROW) ids.push_back(st.text(0));
  std::vector<ImageRecord> out;
  for (const auto& id : ids)
    if (auto r = load(id); r.ok()) out.push_back(std::move(r).value());
  return out;
}

Result<std::vector<std::string>> SqliteImageStore::layer_dirs(const ImageRecord& image) const {
  std::vector<std::string> out;
  for (const auto& d : image.layers) {
    std::string dir = layer_dir(d);
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return Error::make(ErrorCode::kNotFound,
                         "image " + image.id + ": layer " + d + " is missing from the store");
    out.push_back(std::move(dir));
  }
  return out;
}

Status SqliteImageStore::name_free(const std::string& name, const std::string& owner) const {
  // Names are global: a name another owner made would, if moved, start
  // everyone's sandboxes of that name on this owner's files. So would a new
  // name that a lookup reaches before theirs ("py" before "py:latest") or
  // before an image id.
  for (const auto& ref : refs_reaching(name)) {
    if (reads_as_id(ref))
      return Error::make(ErrorCode::kInvalidArgument,
                         "image name '" + name + "' reads as an image id: save under another name");
    bool past_name = false;
    for (const auto& cand : names_tried(ref)) {
      past_name = past_name || cand == name;
      Stmt st(db_, "SELECT owner FROM image_tags WHERE tag=?");
      st.bind(1, cand);
      if (!st.ok() || st.step() != SQLITE_ROW) continue;
      const std::string made_by = st.text(0);
      if (past_name && made_by != owner)
        return Error::make(ErrorCode::kAlreadyExists,
                           "image name '" + name + "' is taken (made by " +
                               (made_by.empty()                     ? "the operator"
                                : made_by.rfind("session:", 0) == 0 ? "another session"
                                                                    : "another key") +
                               (cand == name ? "" : " as '" + cand + "'") +
                               "): save under another name");
      break;  // the lookup stops at the first name it finds
    }
  }
  return ok_status();
}

Status SqliteImageStore::check_name(const std::string& name, const std::string& owner) const {
  std::lock_guard lock(mu_);
  return name_free(name, owner);
}

Status SqliteImageStore::add_tag(const std::string& id, const std::string& name,
                                 const std::optional<std::string>& owner) {
  if (owner)
    if (auto s = name_free(name, *owner); !s.ok()) return s;
  Stmt has(db_, "SELECT image_id, owner FROM image_tags WHERE tag=?");
  has.bind(1, name);
  const std::string made_by = owner.value_or("");
  if (has.step() == SQLITE_ROW && has.text(0) == id && has.text(1) == made_by)
    return ok_status();  // keeps its place
  // A name moves to the newest image that takes it, as in docker (for a
  // save, only one its owner made: name_free).
  Stmt st(db_, "INSERT OR REPLACE INTO image_tags(tag, image_id, owner) VALUES(?, ?, ?)");
  st.bind(1, name).bind(2, id).bind(3, made_by);
  if (st.step() != SQLITE_DONE) return db_error(db_, "tag");
  return ok_status();
}

Result<ImageRecord> SqliteImageStore::commit(Commit& c) {
  // Trees first (each rename is atomic), rows second: a crash in between
  // leaves trees without rows, which the next open() deletes.
  for (auto& l : c.layers) {
    if (l.tmp_dir.empty()) continue;
    if (::rename(l.tmp_dir.c_str(), layer_dir(l.diff_id).c_str()) != 0 && errno != EEXIST &&
        errno != ENOTEMPTY)
      return Error::from_errno("move layer " + l.diff_id + " into the store");
  }
  std::vector<std::string> dirs;
  for (const auto& d : c.diff_ids) dirs.push_back(layer_dir(d));
  const auto languages = probe_languages(dirs);
  std::uint64_t size = 0;
  for (const auto& l : c.layers) size += l.size;

  std::lock_guard lock(mu_);
  if (auto s = exec("BEGIN IMMEDIATE"); !s.ok()) return s.error();
  auto fail = [&](Error e) -> Result<ImageRecord> {
    (void)exec("ROLLBACK");
    return e;
  };
  for (const auto& l : c.layers) {
    Stmt st(db_, "INSERT OR IGNORE INTO layers(digest, size) VALUES(?, ?)");
    st.bind(1, l.diff_id).bind(2, static_cast<std::int64_t>(l.size));
    if (st.step() != SQLITE_DONE) return fail(db_error(db_, "insert layer"));
  }
  Stmt exists(db_, "SELECT 1 FROM images WHERE id=?");
  exists.bind(1, c.id);
  if (exists.step() != SQLITE_ROW) {
    Stmt st(db_,
            "INSERT INTO images(id, size, created, imported, source, config, raw_config, languages)"
            " VALUES(?,?,?,?,?,?,?,?)");
    st.bind(1, c.id)
        .bind(2, static_cast<std::int64_t>(size))
        .bind(3, created_of(c.raw_config))
        .bind(4, now_s())
        .bind(5, c.source)
        .bind(6, config_to_json(c.config).dump())
        .bind(7, c.raw_config)
        .bind(8, json(languages).dump());
    if (st.step() != SQLITE_DONE) return fail(db_error(db_, "insert image"));
    for (size_t i = 0; i < c.diff_ids.size(); ++i) {
      Stmt il(db_, "INSERT INTO image_layers(image_id, pos, digest) VALUES(?,?,?)");
      il.bind(1, c.id).bind(2, static_cast<std::int64_t>(i)).bind(3, c.diff_ids[i]);
      if (il.step() != SQLITE_DONE) return fail(db_error(db_, "insert image layer"));
    }
  } else {
    c.warnings.push_back("the store already had this image (" + c.id.substr(0, 19) +
                         "); added the name");
  }
  if (!c.name.empty())
    if (auto s = add_tag(c.id, c.name, c.owner); !s.ok()) return fail(s.take_error());
  if (auto s = exec("COMMIT"); !s.ok()) return fail(s.take_error());
  auto r = load(c.id);
  if (r.ok()) r->warnings = c.warnings;
  return r;
}

// Per-import bookkeeping shared by import() and add_layer().
struct Scratch {
  std::string dir;
  ~Scratch() {
    if (!dir.empty()) (void)remove_tree(dir);
  }
};

void add_unpack_warnings(const LayerResult& r, std::uint64_t* setid, std::uint64_t* devices) {
  *setid += r.setid_stripped;
  *devices += r.devices_skipped;
}

void summarize(std::uint64_t setid, std::uint64_t devices, std::vector<std::string>* warnings) {
  if (setid)
    warnings->push_back("stripped setuid/setgid bits from " + std::to_string(setid) +
                        (setid == 1 ? " file" : " files"));
  if (devices)
    warnings->push_back("skipped " + std::to_string(devices) +
                        (devices == 1 ? " device node" : " device nodes") +
                        " (a sandbox has its own /dev)");
}

Result<ImageRecord> SqliteImageStore::import(const std::string& path, const ImportOptions& opts) {
  auto lock = FileLock::take(root_ + "/lock", LOCK_SH);
  if (!lock.ok()) return lock.error();
  std::unique_ptr<ImageSource> src;
  auto plan = plan_import(path, &src);
  if (!plan.ok()) return plan.error();
  Commit c;
  c.name = opts.name.empty() ? plan->name_hint : opts.name;
  if (!valid_image_name(c.name))
    return Error::make(
        ErrorCode::kInvalidArgument,
        "image name '" + c.name.substr(0, 100) +
            "': use letters, digits and . _ - / : @ (at most 255, not starting with sha256:)");
  c.source = opts.source.empty() ? "import:" + plan->format : opts.source;
  c.config = plan->config;
  c.warnings = plan->warnings;

  Scratch scratch{root_ + "/tmp/" + random_name()};
  if (::mkdir(scratch.dir.c_str(), 0700) != 0) return Error::from_errno("mkdir " + scratch.dir);
  UnpackBudget budget{limits_.max_image_bytes, limits_.max_entries, limits_.max_path_depth};
  const std::string too_big = "the image is larger than its limit (--max-image-bytes " +
                              std::to_string(limits_.max_image_bytes) + ")";
  // Layers the store has are not read again (their diff_id is in the config).
  std::set<std::string> to_read;
  std::set<std::string> known;
  for (const auto& l : plan->layers) {
    if (l.diff_id.empty() || known.count(l.diff_id)) {
      if (l.diff_id.empty()) to_read.insert(l.path);
      continue;
    }
    known.insert(l.diff_id);
    if (auto size = layer_size(l.diff_id)) {
      if (*size > budget.bytes_left) return Error::make(ErrorCode::kResourceExhausted, too_big);
      budget.bytes_left -= *size;
      c.layers.push_back({l.diff_id, "", *size});
    } else {
      to_read.insert(l.path);
    }
  }
  std::map<std::string, std::pair<LayerResult, std::string>> got;  // path -> result, its tree
  std::uint64_t setid = 0, devices = 0;
  int n = 0;
  auto st = src->stream(to_read, [&](const std::string& p, ByteSource& bytes) -> Status {
    std::string dir = scratch.dir + "/" + std::to_string(n++);
    if (::mkdir(dir.c_str(), 0755) != 0) return Error::from_errno("mkdir " + dir);
    const std::string what = p.empty() ? "rootfs" : "layer " + p;
    auto r = unpack_layer(bytes, dir, budget);
    if (!r.ok()) {
      Error e = r.take_error();
      if (e.code == ErrorCode::kResourceExhausted &&
          e.context.find("larger than its limit") != std::string::npos)
        e.context = what + ": " + too_big;
      else
        e.context = what + ": " + e.context;
      return e;
    }
    for (const auto& l : plan->layers)
      if (l.path == p && !l.blob_digest.empty() && l.blob_digest != r->blob_digest)
        return Error::make(ErrorCode::kInvalidArgument, what + ": digest mismatch: its sha256 is " +
                                                            r->blob_digest + ", its name says " +
                                                            l.blob_digest);
    add_unpack_warnings(*r, &setid, &devices);
    got[p] = {std::move(r).value(), dir};
    return ok_status();
  });
  if (!st.ok()) return st.error();
  for (auto& l : plan->layers) {
    auto it = got.find(l.path);
    if (it == got.end()) {
      c.diff_ids.push_back(l.diff_id);
      continue;
    }
    // Not a structured binding: clang 14 cannot capture one in the lambda below.
    const LayerResult& res = it->second.first;
    const std::string& tree = it->second.second;
    if (!l.diff_id.empty() && l.diff_id != res.diff_id)
      return Error::make(ErrorCode::kInvalidArgument,
                         "layer " + l.path + ": digest mismatch: its content's sha256 is " +
                             res.diff_id + ", the config says " + l.diff_id);
    c.diff_ids.push_back(res.diff_id);
    if (!std::any_of(c.layers.begin(), c.layers.end(),
                     [&](const NewLayer& x) { return x.diff_id == res.diff_id; }))
      c.layers.push_back({res.diff_id, layer_size(res.diff_id) ? "" : tree, res.size_bytes});
  }
  if (plan->format == "rootfs") {
    c.raw_config = make_config(c.config, c.diff_ids, false);
    c.id = "sha256:" + crypto::hex(crypto::sha256(c.raw_config));
  } else {
    c.raw_config = plan->config_json;
    c.id = plan->id;
  }
  summarize(setid, devices, &c.warnings);
  return commit(c);
}

Result<ImageRecord> SqliteImageStore::add_layer(const ImageRecord& base,
                                                const std::string& layer_tar_path,
                                                const std::string& name, const ImageConfig& config,
                                                const std::string& source,
                                                const std::string& owner) {
  auto lock = FileLock::take(root_ + "/lock", LOCK_SH);
  if (!lock.ok()) return lock.error();
  if (!name.empty() && !valid_image_name(name))
    return Error::make(ErrorCode::kInvalidArgument,
                       "image name '" + name.substr(0, 100) + "' is not valid");
  // Before the unpack, so a refused name costs nothing; commit checks again.
  if (auto s = check_name(name, owner); !s.ok()) return s.error();
  std::uint64_t base_size = 0;
  {
    std::lock_guard l(mu_);
    auto b = load(base.id);
    if (!b.ok()) return b.error();
    base_size = b->size_bytes;
  }
  if (base_size > limits_.max_image_bytes)
    return Error::make(ErrorCode::kResourceExhausted,
                       "the base image is larger than --max-image-bytes");
  Commit c;
  c.name = name;
  c.source = source;
  c.owner = owner;
  c.config = config;
  Scratch scratch{root_ + "/tmp/" + random_name()};
  if (::mkdir(scratch.dir.c_str(), 0700) != 0) return Error::from_errno("mkdir " + scratch.dir);
  const std::string dir = scratch.dir + "/0";
  if (::mkdir(dir.c_str(), 0755) != 0) return Error::from_errno("mkdir " + dir);
  UniqueFd fd(::open(layer_tar_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Error::from_errno("open " + layer_tar_path);
  FdSource bytes(fd.get());
  UnpackBudget budget{limits_.max_image_bytes - base_size, limits_.max_entries,
                      limits_.max_path_depth};
  auto r = unpack_layer(bytes, dir, budget);
  if (!r.ok()) {
    Error e = r.take_error();
    e.context = "new layer: " + e.context;
    return e;
  }
  std::uint64_t setid = 0, devices = 0;
  add_unpack_warnings(*r, &setid, &devices);
  summarize(setid, devices, &c.warnings);
  std::set<std::string> seen;
  for (const auto& d : base.layers) {
    c.diff_ids.push_back(d);
    if (seen.insert(d).second) c.layers.push_back({d, "", layer_size(d).value_or(0)});
  }
  c.diff_ids.push_back(r->diff_id);
  if (seen.insert(r->diff_id).second)
    c.layers.push_back({r->diff_id, layer_size(r->diff_id) ? "" : dir, r->size_bytes});
  c.raw_config = make_config(config, c.diff_ids, true);
  c.id = "sha256:" + crypto::hex(crypto::sha256(c.raw_config));
  return commit(c);
}

Status SqliteImageStore::remove(
    const std::string& ref,
    const std::function<std::vector<std::string>(const std::string&)>& in_use) {
  // Alone: an import that found a layer in the store must not see it go.
  auto flock = FileLock::take(root_ + "/lock", LOCK_EX);
  if (!flock.ok()) return flock.error();
  auto rec = find(ref);
  if (!rec.ok()) return rec.error();
  {
    // One name of several: only the name goes (as `docker rmi` does).
    std::lock_guard lock(mu_);
    std::string tag;
    if (id_of(ref, &tag) && !tag.empty() && !rec->tags.empty()) {
      Stmt st(db_, "DELETE FROM image_tags WHERE tag=?");
      st.bind(1, tag);
      if (st.step() != SQLITE_DONE) return db_error(db_, "untag");
      return ok_status();
    }
  }
  std::vector<std::string> users = in_use ? in_use(rec->id) : std::vector<std::string>{};
  std::vector<std::string> orphans;
  {
    std::lock_guard lock(mu_);
    Stmt st(db_, "SELECT sandbox_id, pid FROM image_use WHERE image_id=?");
    st.bind(1, rec->id);
    while (st.step() == SQLITE_ROW)
      if (process_alive(st.num(1)) &&
          std::find(users.begin(), users.end(), st.text(0)) == users.end())
        users.push_back(st.text(0));
    if (!users.empty()) {
      std::string list;
      for (const auto& u : users) list += (list.empty() ? "" : ", ") + u;
      return Error::make(ErrorCode::kFailedPrecondition,
                         "image '" + ref + "' is in use by " +
                             (users.size() == 1 ? "sandbox " : "sandboxes ") + list);
    }
    if (auto s = exec("BEGIN IMMEDIATE"); !s.ok()) return s;
    bool ok = true;
    for (const char* sql :
         {"DELETE FROM image_tags WHERE image_id=?", "DELETE FROM image_layers WHERE image_id=?",
          "DELETE FROM images WHERE id=?", "DELETE FROM image_use WHERE image_id=?"}) {
      Stmt d(db_, sql);
      d.bind(1, rec->id);
      ok = ok && d.step() == SQLITE_DONE;
    }
    Stmt o(db_, "SELECT digest FROM layers WHERE digest NOT IN (SELECT digest FROM image_layers)");
    while (ok && o.step() == SQLITE_ROW) orphans.push_back(o.text(0));
    Stmt d(db_, "DELETE FROM layers WHERE digest NOT IN (SELECT digest FROM image_layers)");
    ok = ok && d.step() == SQLITE_DONE;
    if (!ok) {
      auto e = db_error(db_, "remove image");
      (void)exec("ROLLBACK");
      return e;
    }
    if (auto s = exec("COMMIT"); !s.ok()) return s;
  }
  // Rows are gone: the trees follow (a crash here leaves trees open() deletes).
  for (const auto& d : orphans) {
    std::string doomed = root_ + "/tmp/rm-" + random_name();
    if (::rename(layer_dir(d).c_str(), doomed.c_str()) == 0) (void)remove_tree(doomed);
  }
  return ok_status();
}

Status SqliteImageStore::mark_in_use(const std::string& image_id, const std::string& sandbox_id) {
  std::lock_guard lock(mu_);
  Stmt st(db_, "INSERT OR REPLACE INTO image_use(image_id, sandbox_id, pid) VALUES(?,?,?)");
  st.bind(1, image_id).bind(2, sandbox_id).bind(3, static_cast<std::int64_t>(::getpid()));
  if (st.step() != SQLITE_DONE) return db_error(db_, "record image use");
  return ok_status();
}

Status SqliteImageStore::release(const std::string& image_id, const std::string& sandbox_id) {
  std::lock_guard lock(mu_);
  Stmt st(db_, "DELETE FROM image_use WHERE image_id=? AND sandbox_id=?");
  st.bind(1, image_id).bind(2, sandbox_id);
  if (st.step() != SQLITE_DONE) return db_error(db_, "forget image use");
  return ok_status();
}

}  // namespace

Result<std::unique_ptr<ImageStore>> ImageStore::open(const std::string& state_dir,
                                                     StoreLimits limits) {
  std::error_code ec;
  if (!std::filesystem::is_directory(state_dir, ec)) {
    std::filesystem::create_directories(state_dir, ec);
    if (ec)
      return Error::make(ErrorCode::kIo,
                         "create state directory " + state_dir + ": " + ec.message());
    ::chmod(state_dir.c_str(), 0700);
  }
  const std::string path = state_dir + "/sandcastle.db";
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Error::make(ErrorCode::kIo, "open image database " + path + ": " + msg);
  }
  ::chmod(path.c_str(), 0600);
  sqlite3_busy_timeout(db, 10000);
  auto store = std::make_unique<SqliteImageStore>(db, state_dir + "/images", limits);
  if (auto s = store->init(); !s.ok()) return s.error();
  return std::unique_ptr<ImageStore>(std::move(store));
}

}  // namespace sandcastle::images

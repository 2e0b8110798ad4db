#include "service/file_uploads.h"

#include <spdlog/spdlog.h>

#include <set>

#include "common/crypto.h"
#include "service/file_transfer.h"

namespace sandcastle::service {

namespace {

// NAME_MAX is 255: the temp's prefix and suffix take 25 of it.
constexpr std::size_t kTempBaseBytes = 200;

std::string strip_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

// "" is the workdir (a relative path's parent), which always exists.
std::string parent_of(const std::string& path) {
  const std::string p = strip_slashes(path);
  const auto slash = p.rfind('/');
  if (slash == std::string::npos) return "";
  if (slash == 0) return "/";
  return strip_slashes(p.substr(0, slash));
}

bool is_enoent(const Error& e) {
  return e.code == ErrorCode::kSystem && e.sys_errno == ENOENT;
}

// The temp is no longer there (the sandbox's own view).
bool temp_gone(sandbox::Sandbox& sb, const std::string& temp) {
  auto st = sb.stat(temp);
  return !st.ok() && is_enoent(st.error());
}

// Refuses a target that is a directory now; a missing one is fine.
Status check_target(sandbox::Sandbox& sb, const std::string& path) {
  auto st = sb.stat(path);
  if (st.ok() && st->type == sandbox::FileType::kDirectory)
    return Error::from_errno("write " + path + ": it is a directory", EISDIR);
  if (!st.ok() && !is_enoent(st.error())) return st.take_error();
  return ok_status();
}

// The ancestors of `dir` that do not exist, nearest the root first.
Result<std::vector<std::string>> missing_dirs(sandbox::Sandbox& sb, std::string dir) {
  std::vector<std::string> missing;
  while (!dir.empty() && dir != "/") {
    auto st = sb.stat(dir);
    if (st.ok()) break;  // a file here fails the write with its own errno
    if (!is_enoent(st.error())) return st.take_error();
    missing.insert(missing.begin(), dir);
    dir = parent_of(dir);
  }
  return missing;
}

// What one call made, undone when it fails before its renames.
struct Undo {
  sandbox::Sandbox& sb;
  std::vector<std::string> temps;  // written, not yet renamed
  std::vector<std::string> dirs;   // made here, in the order made
  bool armed = true;
  ~Undo() {
    if (!armed) return;
    for (const auto& t : temps) (void)sb.remove(t, false);
    for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) (void)sb.remove(*it, false);
  }
};

}  // namespace

Result<std::string> upload_temp_path(const std::string& path) {
  const std::string p = strip_slashes(path);
  const auto slash = p.rfind('/');
  const std::string base = slash == std::string::npos ? p : p.substr(slash + 1);
  if (base.empty() || base == "." || base == ".." || p == "/")
    return Error::make(ErrorCode::kInvalidArgument, "'" + path + "' does not name a file");
  const std::string suffix = crypto::hex(crypto::random_bytes(8));
  const std::string dir = slash == std::string::npos ? "" : p.substr(0, slash + 1);
  return dir + "." + base.substr(0, kTempBaseBytes) + ".upload-" + suffix;
}

Status write_all_or_none(sandbox::Sandbox& sb, ByteBudget& budget,
                         const std::vector<FileUpload>& files) {
  std::uint64_t total = 0;
  std::vector<std::string> temps;
  for (const auto& f : files) {
    total += f.data.size();
    auto temp = upload_temp_path(f.path);
    if (!temp.ok()) return temp.take_error();
    temps.push_back(std::move(*temp));
  }
  // The bytes are the caller's already; the lease bounds how many uploads
  // are pushed into sandboxes at once, like reads.
  auto lease = reserve_transfer(budget, total);
  if (!lease.ok()) return lease.take_error();
  std::set<std::string> parents;
  for (const auto& f : files) {
    if (auto st = check_target(sb, f.path); !st.ok()) return st;
    parents.insert(parent_of(f.path));
  }
  Undo undo{sb, {}, {}};
  for (const auto& dir : parents) {
    auto missing = missing_dirs(sb, dir);
    if (!missing.ok()) return missing.take_error();
    for (const auto& m : *missing) {
      auto made = sb.mkdir(m, false);
      if (made.ok()) {
        undo.dirs.push_back(m);
      } else if (made.error().code != ErrorCode::kSystem || made.error().sys_errno != EEXIST) {
        return made;
      }
    }
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    // Recorded first: a write that failed halfway may have left the temp.
    undo.temps.push_back(temps[i]);
    if (auto st = sb.write_file(temps[i], files[i].data, 0644, false); !st.ok()) return st;
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (auto st = sb.rename(temps[i], files[i].path); !st.ok()) {
      // An error after the move itself (saving a persistent sandbox's
      // change, a reply lost and the request resent) still moved the file:
      // the temp being gone says so, and the upload goes on.
      if (temp_gone(sb, temps[i])) {
        spdlog::warn("upload: {} is in place, but: {}", files[i].path, st.error().message());
        undo.temps.erase(undo.temps.begin());
        continue;
      }
      if (i == 0) return st;
      undo.dirs.clear();  // they hold files that went through
      Error e = st.take_error();
      e.context = std::to_string(i) + " of " + std::to_string(files.size()) +
                  " files were already in place; " + e.context;
      return e;
    }
    undo.temps.erase(undo.temps.begin());
  }
  undo.armed = false;
  return ok_status();
}

}  // namespace sandcastle::service

#include "service/file_listing.h"

#include "service/sandbox_view.h"

namespace sandcastle::service {

namespace {

const char* type_name(sandbox::FileType t) {
  switch (t) {
    case sandbox::FileType::kRegular: return "file";
    case sandbox::FileType::kDirectory: return "directory";
    case sandbox::FileType::kSymlink: return "symlink";
    case sandbox::FileType::kOther: return "other";
  }
  return "other";
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir == ".") return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

}  // namespace

Result<FileListing> list_files(Env& env, const Caller& c, const std::string& id,
                               const std::string& path, bool recursive, ListStep* failed) {
  if (failed) *failed = ListStep::kSandbox;
  auto e = env.manager.get(id, c.owner);
  if (!e.ok()) return e.error();
  if (failed) *failed = ListStep::kPath;
  EntryUse use(*e);
  sandbox::ListOptions opts;
  opts.recursive = recursive;
  opts.max_entries = env.config.max_listed_files;
  auto listing = use->sandbox().list(path, opts);
  if (!listing.ok()) return listing.error();
  FileListing out;
  out.path = path;
  out.truncated = listing->truncated;
  for (const auto& f : listing->entries)
    out.entries.push_back(FileEntry{
        join(path, f.name), f.name, type_name(f.type), f.size, f.mode,
        iso_time(std::chrono::system_clock::from_time_t(static_cast<std::time_t>(f.mtime_sec)))});
  return out;
}

}  // namespace sandcastle::service

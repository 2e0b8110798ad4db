#include "service/workspace_diff.h"

#include <vector>

namespace sandcastle::service {

WatchedSnapshot snapshot_workspace(sandbox::Sandbox& sb, size_t max_files, bool* truncated) {
  WatchedSnapshot snap;
  sandbox::ListOptions opts;
  opts.recursive = true;
  opts.max_entries = max_files;
  opts.watch = true;
  // sandcastle's own state (installed packages) is not the program's output.
  opts.skip = kSandcastleStateDir;
  auto listing = sb.list(sb.spec().workdir(), opts);
  if (!listing.ok()) return snap;
  if (truncated) *truncated = listing->truncated;
  snap.watch = listing->watch;
  for (auto& f : listing->entries)
    if (f.type == sandbox::FileType::kRegular)
      snap.files[std::move(f.name)] = {f.size, f.mtime_sec, f.mtime_nsec};
  return snap;
}

bool unchanged_since(sandbox::Sandbox& sb, const WatchedSnapshot& snap) {
  return snap.watch != 0 && sb.changed_since(snap.watch) == false;
}

nlohmann::json diff_workspace(const WorkspaceSnapshot& before, const WorkspaceSnapshot& after,
                              size_t max_reported, size_t* changed) {
  auto out = nlohmann::json::array();
  size_t n = 0;
  for (const auto& [path, sig] : after) {
    auto it = before.find(path);
    if (it != before.end() && it->second == sig) continue;
    if (++n > max_reported) continue;
    out.push_back({{"path", path},
                   {"size", sig.size},
                   {"mime_type", mime_type_for(path)},
                   {"status", it == before.end() ? "created" : "modified"}});
  }
  if (changed) *changed = n;
  return out;
}

std::string mime_type_for(const std::string& path) {
  static const std::map<std::string, std::string> kTypes = {{"png", "image/png"},
                                                            {"jpg", "image/jpeg"},
                                                            {"jpeg", "image/jpeg"},
                                                            {"gif", "image/gif"},
                                                            {"svg", "image/svg+xml"},
                                                            {"webp", "image/webp"},
                                                            {"pdf", "application/pdf"},
                                                            {"json", "application/json"},
                                                            {"csv", "text/csv"},
                                                            {"txt", "text/plain"},
                                                            {"md", "text/markdown"},
                                                            {"html", "text/html"},
                                                            {"htm", "text/html"},
                                                            {"xml", "application/xml"},
                                                            {"py", "text/x-python"},
                                                            {"js", "text/javascript"},
                                                            {"c", "text/x-c"},
                                                            {"cpp", "text/x-c++"},
                                                            {"h", "text/x-c"},
                                                            {"sh", "application/x-sh"},
                                                            {"zip", "application/zip"},
                                                            {"gz", "application/gzip"},
                                                            {"tar", "application/x-tar"},
                                                            {"wav", "audio/wav"},
                                                            {"mp3", "audio/mpeg"},
                                                            {"log", "text/plain"},
                                                            {"yaml", "application/yaml"},
                                                            {"yml", "application/yaml"},
                                                            {"toml", "application/toml"}};
  auto dot = path.rfind('.');
  auto slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
    return "application/octet-stream";
  std::string ext = path.substr(dot + 1);
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto it = kTypes.find(ext);
  return it == kTypes.end() ? "application/octet-stream" : it->second;
}

}  // namespace sandcastle::service

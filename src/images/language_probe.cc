#include "images/language_probe.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <deque>

namespace sandcastle::images {

namespace {

constexpr int kMaxSymlinkHops = 40;  // the kernel's own limit

void split_into(const std::string& path, std::deque<std::string>* out, bool front) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) parts.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  if (front)
    out->insert(out->begin(), parts.begin(), parts.end());
  else
    out->insert(out->end(), parts.begin(), parts.end());
}

bool is_whiteout(const struct stat& st) {
  return S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0);
}

bool is_opaque(const std::string& dir) {
  char v = 0;
  return (::lgetxattr(dir.c_str(), "user.overlay.opaque", &v, 1) == 1 && v == 'y') ||
         (::lgetxattr(dir.c_str(), "trusted.overlay.opaque", &v, 1) == 1 && v == 'y');
}

std::string join(const std::string& layer, const std::vector<std::string>& cur,
                 const std::string& name) {
  std::string p = layer;
  for (const auto& c : cur) p += "/" + c;
  return p + "/" + name;
}

}  // namespace

MergedTree::MergedTree(std::vector<std::string> layers_bottom_first)
    : top_first_(std::move(layers_bottom_first)) {
  std::reverse(top_first_.begin(), top_first_.end());
}

std::optional<std::string> MergedTree::resolve_file(const std::string& image_path) const {
  std::deque<std::string> todo;
  split_into(image_path, &todo, false);
  std::vector<std::string> cur;
  // For each depth of `cur`, the layers (top first) where it is a directory
  // that the merge still sees.
  std::vector<std::vector<size_t>> seen;
  std::vector<size_t> all(top_first_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  seen.push_back(all);
  int hops = 0;
  while (!todo.empty()) {
    std::string name = todo.front();
    todo.pop_front();
    if (name == ".") continue;
    if (name == "..") {  // clamped at the image's root
      if (!cur.empty()) {
        cur.pop_back();
        seen.pop_back();
      }
      continue;
    }
    const auto& layers = seen.back();
    size_t hit = layers.size();
    struct stat st {};
    std::string host;
    for (size_t k = 0; k < layers.size(); ++k) {
      host = join(top_first_[layers[k]], cur, name);
      if (::lstat(host.c_str(), &st) == 0) {
        hit = k;
        break;
      }
    }
    if (hit == layers.size() || is_whiteout(st)) return std::nullopt;
    if (S_ISLNK(st.st_mode)) {
      if (++hops > kMaxSymlinkHops) return std::nullopt;
      char buf[4096];
      ssize_t n = ::readlink(host.c_str(), buf, sizeof buf);
      if (n <= 0 || static_cast<size_t>(n) >= sizeof buf) return std::nullopt;
      std::string target(buf, static_cast<size_t>(n));
      if (target.front() == '/') {
        cur.clear();
        seen.resize(1);
      }
      split_into(target, &todo, true);
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      std::vector<size_t> below;
      for (size_t k = hit; k < layers.size(); ++k) {
        std::string p = join(top_first_[layers[k]], cur, name);
        struct stat s2 {};
        if (::lstat(p.c_str(), &s2) != 0) continue;
        if (!S_ISDIR(s2.st_mode)) break;  // a file or whiteout hides what is below
        below.push_back(layers[k]);
        if (is_opaque(p)) break;
      }
      cur.push_back(name);
      seen.push_back(std::move(below));
      continue;
    }
    if (S_ISREG(st.st_mode)) {
      bool more =
          std::any_of(todo.begin(), todo.end(), [](const std::string& c) { return c != "."; });
      if (more) return std::nullopt;
      return host;
    }
    return std::nullopt;
  }
  return std::nullopt;  // a directory
}

bool MergedTree::is_executable(const std::string& image_path) const {
  auto host = resolve_file(image_path);
  if (!host) return false;
  struct stat st {};
  return ::stat(host->c_str(), &st) == 0 && (st.st_mode & 0111) != 0;
}

std::vector<std::string> probe_languages(const std::vector<std::string>& layers_bottom_first) {
  // The binaries tools/languages.cc runs each language with.
  static const std::vector<std::pair<const char*, std::vector<const char*>>> kNeeds = {
      {"python", {"/usr/bin/python3"}},
      {"javascript", {"/usr/bin/node"}},
      {"bash", {"/bin/bash"}},
      {"sh", {"/bin/sh"}},
      {"c", {"/usr/bin/gcc"}},
      {"cpp", {"/usr/bin/g++"}},
      {"go", {"/usr/bin/go"}},
      {"rust", {"/usr/bin/rustc"}},
      {"typescript", {"/usr/bin/tsc", "/usr/bin/node"}},
      {"java", {"/usr/bin/javac", "/usr/bin/java", "/bin/sh"}},
      {"perl", {"/usr/bin/perl"}},
      {"ruby", {"/usr/bin/ruby"}},
  };
  MergedTree tree(layers_bottom_first);
  std::vector<std::string> out;
  for (const auto& [lang, bins] : kNeeds)
    if (std::all_of(bins.begin(), bins.end(), [&](const char* b) { return tree.is_executable(b); }))
      out.emplace_back(lang);
  return out;
}

}  // namespace sandcastle::images

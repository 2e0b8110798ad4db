// Docker-save archives and OCI layouts built in tests from layer tars, as
// podman/docker/skopeo write them (the real round trip is in the integration
// tests).
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tar_builder.h"

namespace sandcastle::images::testing {

using Files = std::map<std::string, std::string>;  // path in the archive -> bytes

inline std::string image_config(const std::vector<std::string>& layer_tars,
                                nlohmann::json config = nullptr) {
  nlohmann::json ids = nlohmann::json::array();
  for (const auto& t : layer_tars) ids.push_back(digest(t));
  nlohmann::json c = {{"architecture", "amd64"},
                      {"os", "linux"},
                      {"created", "2024-05-01T10:00:00Z"},
                      {"rootfs", {{"type", "layers"}, {"diff_ids", ids}}}};
  if (!config.is_null()) c["config"] = config;
  return c.dump();
}

// `docker save` layout (podman's too): <config hex>.json, <diff hex>.tar, manifest.json.
inline Files docker_archive(const std::vector<std::string>& layer_tars, const std::string& repo_tag,
                            nlohmann::json config = nullptr) {
  Files f;
  const std::string cfg = image_config(layer_tars, config);
  const std::string cfg_name = hex_of(digest(cfg)) + ".json";
  f[cfg_name] = cfg;
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& t : layer_tars) {
    std::string name = hex_of(digest(t)) + ".tar";
    f[name] = t;
    layers.push_back(name);
  }
  nlohmann::json m = nlohmann::json::array();
  m.push_back({{"Config", cfg_name},
               {"RepoTags", repo_tag.empty() ? nlohmann::json::array() : nlohmann::json{repo_tag}},
               {"Layers", layers}});
  f["manifest.json"] = m.dump();
  return f;
}

// An OCI image layout with gzip (or as given) compressed layers.
inline Files oci_layout(const std::vector<std::string>& layer_tars, const std::string& ref,
                        const std::string& filter = "gzip", nlohmann::json config = nullptr) {
  Files f;
  auto blob = [&](const std::string& data) {
    std::string d = digest(data);
    f["blobs/sha256/" + hex_of(d)] = data;
    return d;
  };
  const std::string cfg = image_config(layer_tars, config);
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& t : layer_tars) {
    // Recompress the tar's members (the diff_id stays the plain tar's digest).
    std::string packed = t;
    if (!filter.empty()) {
      struct archive* a = archive_write_new();
      archive_write_set_format_raw(a);
      if (filter == "gzip") archive_write_add_filter_gzip(a);
      if (filter == "zstd") archive_write_add_filter_zstd(a);
      std::string out;
      archive_write_open(
          a, &out, nullptr,
          [](struct archive*, void* client, const void* buf, size_t n) -> la_ssize_t {
            static_cast<std::string*>(client)->append(static_cast<const char*>(buf), n);
            return static_cast<la_ssize_t>(n);
          },
          nullptr);
      struct archive_entry* e = archive_entry_new();
      archive_entry_set_filetype(e, AE_IFREG);
      archive_write_header(a, e);
      archive_write_data(a, t.data(), t.size());
      archive_entry_free(e);
      archive_write_close(a);
      archive_write_free(a);
      packed = out;
    }
    std::string d = blob(packed);
    layers.push_back({{"mediaType", "application/vnd.oci.image.layer.v1.tar+gzip"},
                      {"digest", d},
                      {"size", packed.size()}});
  }
  const std::string cd = blob(cfg);
  nlohmann::json manifest = {{"schemaVersion", 2},
                             {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                             {"config",
                              {{"mediaType", "application/vnd.oci.image.config.v1+json"},
                               {"digest", cd},
                               {"size", cfg.size()}}},
                             {"layers", layers}};
  const std::string md = blob(manifest.dump());
  nlohmann::json index = {{"schemaVersion", 2},
                          {"manifests",
                           {{{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                             {"digest", md},
                             {"size", manifest.dump().size()},
                             {"annotations", {{"org.opencontainers.image.ref.name", ref}}}}}}};
  f["index.json"] = index.dump();
  f["oci-layout"] = R"({"imageLayoutVersion":"1.0.0"})";
  return f;
}

inline std::string pack(const Files& files) {
  std::vector<TarEntry> entries;
  for (const auto& [path, data] : files) entries.push_back(file(path, data));
  return make_tar(entries);
}

inline void write_dir(const std::string& dir, const Files& files) {
  for (const auto& [path, data] : files) {
    auto p = std::filesystem::path(dir) / path;
    std::filesystem::create_directories(p.parent_path());
    write_bytes(p.string(), data);
  }
}

}  // namespace sandcastle::images::testing

#include "images/image_pull.h"

#include <algorithm>
#include <array>
#include <set>

#include "common/json_parse.h"
#include "images/oci_layout_writer.h"

namespace sandcastle::images {

namespace {

using nlohmann::json;

constexpr const char* kOciIndex = "application/vnd.oci.image.index.v1+json";
constexpr const char* kOciManifest = "application/vnd.oci.image.manifest.v1+json";
constexpr const char* kDockerList = "application/vnd.docker.distribution.manifest.list.v2+json";
constexpr const char* kDockerManifest = "application/vnd.docker.distribution.manifest.v2+json";
constexpr std::uint64_t kMaxConfigBytes = 4u << 20;
constexpr std::uint64_t kMaxJsonSafeInt = (1ull << 53) - 1;

constexpr std::array kLayerTypes = {
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
};
constexpr std::array kConfigTypes = {
    "application/vnd.oci.image.config.v1+json",
    "application/vnd.docker.container.image.v1+json",
};

Error invalid_image(std::string msg) {
  return Error::make(ErrorCode::kInvalidArgument, std::move(msg));
}

template <std::size_t N>
bool one_of(const std::string& s, const std::array<const char*, N>& set) {
  return std::any_of(set.begin(), set.end(), [&](const char* t) { return s == t; });
}

std::string str_field(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string human_bytes(std::uint64_t n) {
  char buf[32];
  if (n >= (1u << 20)) {
    (void)std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(n) / (1u << 20));
  } else {
    (void)std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(n) / 1024);
  }
  return buf;
}

struct Descriptor {
  std::string media_type, digest;
  std::uint64_t size = 0;
};

Result<Descriptor> descriptor(const json& j, const std::string& what) {
  if (!j.is_object()) return invalid_image(what + " is not an object");
  Descriptor d;
  d.media_type = str_field(j, "mediaType");
  d.digest = str_field(j, "digest");
  if (!is_sha256_digest(d.digest))
    return invalid_image(what + " has digest '" + d.digest.substr(0, 80) +
                         "': only sha256 digests are supported");
  auto s = j.find("size");
  if (s == j.end() || !s->is_number_unsigned() || s->get<std::uint64_t>() > kMaxJsonSafeInt)
    return invalid_image(what + " has no valid size");
  d.size = s->get<std::uint64_t>();
  return d;
}

enum class Kind { kIndex, kManifest };

Result<Kind> classify(const FetchedManifest& m, const json& j) {
  if (!j.is_object()) return invalid_image("manifest " + m.digest + " is not a JSON object");
  std::string type = str_field(j, "mediaType");
  if (type.empty()) type = m.media_type;
  auto sv = j.find("schemaVersion");
  if ((sv != j.end() && *sv == 1) ||
      type.rfind("application/vnd.docker.distribution.manifest.v1", 0) == 0)
    return Error::make(
        ErrorCode::kFailedPrecondition,
        "the image has a Docker schema 1 manifest, which is refused (deprecated, unverifiable "
        "layers): push it again with a current docker/podman/skopeo");
  if (sv == j.end() || *sv != 2)
    return invalid_image("manifest " + m.digest + " has no schemaVersion 2");
  if (type == kOciIndex || type == kDockerList) return Kind::kIndex;
  if (type == kOciManifest || type == kDockerManifest) return Kind::kManifest;
  // The OCI spec makes mediaType optional: fall back on the shape.
  if (type.empty() || type == "application/json") {
    if (j.contains("manifests")) return Kind::kIndex;
    if (j.contains("config") && j.contains("layers")) return Kind::kManifest;
  }
  return invalid_image("unsupported manifest media type '" + type.substr(0, 120) + "'");
}

Result<json> parse_manifest(const FetchedManifest& m, std::size_t limit) {
  auto j = parse_json(m.body,
                      JsonLimits{.max_bytes = limit, .bytes_setting = "the manifest size limit"});
  if (!j.ok()) return invalid_image("manifest " + m.digest + ": " + j.error().context);
  return j;
}

Result<Descriptor> pick_platform(const json& index, const Platform& want,
                                 const std::string& index_digest) {
  auto it = index.find("manifests");
  if (it == index.end() || !it->is_array())
    return invalid_image("index " + index_digest + " has no manifests array");
  if (it->size() > kMaxManifestEntries)
    return invalid_image("index " + index_digest + " has more than " +
                         std::to_string(kMaxManifestEntries) + " entries");
  std::vector<std::string> seen;
  std::optional<Descriptor> best;
  bool best_exact = false;
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& e = (*it)[i];
    if (!e.is_object()) continue;
    const auto p = e.find("platform");
    if (p == e.end() || !p->is_object()) continue;
    const std::string os = str_field(*p, "os"), arch = str_field(*p, "architecture"),
                      variant = str_field(*p, "variant");
    if (seen.size() < 20) seen.push_back(os + "/" + arch + (variant.empty() ? "" : "/" + variant));
    if (os != want.os || arch != want.architecture) continue;
    if (!want.variant.empty() && variant != want.variant) continue;
    // Without a wanted variant, an entry without one (or the first) wins.
    if (best && (best_exact || !variant.empty())) continue;
    auto d = descriptor(e, "index entry " + std::to_string(i));
    if (!d.ok()) return d.take_error();
    best = *d;
    best_exact = variant == want.variant;
  }
  if (!best) {
    std::string list;
    for (const auto& s : seen) list += (list.empty() ? "" : ", ") + s;
    return Error::make(ErrorCode::kNotFound, "no " + want.str() + " image in the index (it has: " +
                                                 (list.empty() ? "none with a platform" : list) +
                                                 "); see --platform");
  }
  return *best;
}

}  // namespace

Result<PullResult> pull_to_layout(const ImageReference& ref, const PullOptions& opts,
                                  const std::string& dir) {
  auto writer = OciLayoutWriter::create(dir);
  if (!writer.ok()) return writer.take_error();
  RegistryClient client(ref, opts.registry);
  auto say = [&](const std::string& line) {
    if (opts.progress) opts.progress(line);
  };
  PullResult out;
  out.reference = ref;

  auto top = client.get_manifest(ref.digest.empty() ? ref.tag : ref.digest);
  if (!top.ok()) return top.take_error();
  auto top_json = parse_manifest(*top, opts.registry.max_manifest_bytes);
  if (!top_json.ok()) return top_json.take_error();
  auto kind = classify(*top, *top_json);
  if (!kind.ok()) return kind.take_error();

  FetchedManifest manifest = std::move(*top);
  json mj = std::move(*top_json);
  if (*kind == Kind::kIndex) {
    out.index_digest = manifest.digest;
    auto chosen = pick_platform(mj, opts.platform, manifest.digest);
    if (!chosen.ok()) return chosen.take_error();
    if (chosen->size > opts.registry.max_manifest_bytes)
      return Error::make(ErrorCode::kResourceExhausted,
                         "manifest " + chosen->digest + " is larger than " +
                             std::to_string(opts.registry.max_manifest_bytes) + " bytes");
    say("index " + manifest.digest + ": " + opts.platform.str() + " is " + chosen->digest);
    auto m = client.get_manifest(chosen->digest);
    if (!m.ok()) return m.take_error();
    if (m->body.size() != chosen->size)
      return invalid_image("manifest " + chosen->digest + " is " + std::to_string(m->body.size()) +
                           " bytes, the index states " + std::to_string(chosen->size));
    auto j = parse_manifest(*m, opts.registry.max_manifest_bytes);
    if (!j.ok()) return j.take_error();
    auto k = classify(*m, *j);
    if (!k.ok()) return k.take_error();
    if (*k != Kind::kManifest)
      return invalid_image("index " + out.index_digest + " points at another index: not supported");
    manifest = std::move(*m);
    mj = std::move(*j);
  }
  out.manifest_digest = manifest.digest;
  out.manifest_media_type = str_field(mj, "mediaType");
  if (out.manifest_media_type.empty())
    out.manifest_media_type =
        manifest.media_type == kDockerManifest ? kDockerManifest : kOciManifest;

  // The manifest's descriptors, all checked before any byte of a blob moves.
  auto config = descriptor(mj.contains("config") ? mj["config"] : json(), "the manifest's config");
  if (!config.ok()) return config.take_error();
  if (!one_of(config->media_type, kConfigTypes))
    return invalid_image("not a container image: config media type '" +
                         config->media_type.substr(0, 120) + "'");
  if (config->size > kMaxConfigBytes)
    return Error::make(ErrorCode::kResourceExhausted,
                       "image config is larger than " + std::to_string(kMaxConfigBytes) + " bytes");
  const auto lit = mj.find("layers");
  if (lit == mj.end() || !lit->is_array())
    return invalid_image("manifest " + manifest.digest + " has no layers array");
  if (lit->size() > kMaxManifestEntries)
    return invalid_image("manifest " + manifest.digest + " has more than " +
                         std::to_string(kMaxManifestEntries) + " layers");
  std::vector<Descriptor> layers;
  std::uint64_t total = config->size;
  std::set<std::string> unique;
  for (std::size_t i = 0; i < lit->size(); ++i) {
    auto d = descriptor((*lit)[i], "layer " + std::to_string(i));
    if (!d.ok()) return d.take_error();
    if (!one_of(d->media_type, kLayerTypes))
      return invalid_image("layer " + std::to_string(i) + " has unsupported media type '" +
                           d->media_type.substr(0, 120) +
                           "' (foreign and non-distributable layers are not pulled)");
    if (unique.insert(d->digest).second) total += d->size;
    layers.push_back(*d);
  }
  if (total > opts.max_image_bytes)
    return Error::make(ErrorCode::kResourceExhausted,
                       "image is " + std::to_string(total) + " bytes compressed, more than " +
                           "--max-image-bytes " + std::to_string(opts.max_image_bytes));

  // The config: small, held in memory to read its platform, then verified as a blob.
  std::string config_bytes;
  if (auto st = client.get_blob(config->digest,
                                [&](std::string_view d) -> Status {
                                  if (d.size() > config->size - config_bytes.size())
                                    return invalid_image("config " + config->digest +
                                                         " is longer than its descriptor states");
                                  config_bytes.append(d);
                                  return ok_status();
                                });
      !st.ok())
    return st.take_error();
  if (auto st = writer->write_blob(config->digest, config_bytes); !st.ok()) return st.take_error();
  auto cj = parse_json(config_bytes, JsonLimits{.max_bytes = kMaxConfigBytes});
  if (!cj.ok() || !cj->is_object())
    return invalid_image("image config " + config->digest + " is not a JSON object");
  out.platform.os = str_field(*cj, "os");
  out.platform.architecture = str_field(*cj, "architecture");
  out.platform.variant = str_field(*cj, "variant");
  // A single-platform manifest says its platform only in the config: an
  // image for another machine is refused here rather than failing at exec.
  if ((!out.platform.os.empty() && out.platform.os != opts.platform.os) ||
      (!out.platform.architecture.empty() &&
       out.platform.architecture != opts.platform.architecture) ||
      (!opts.platform.variant.empty() && !out.platform.variant.empty() &&
       out.platform.variant != opts.platform.variant))
    return Error::make(ErrorCode::kFailedPrecondition, "the image is for " + out.platform.str() +
                                                           ", not " + opts.platform.str() +
                                                           " (see --platform)");
  out.config_digest = config->digest;
  out.bytes += config->size;

  for (const auto& layer : layers) {
    out.layers.push_back(layer.digest);
    if (writer->has_blob(layer.digest)) continue;
    auto sink = writer->begin_blob(layer.digest, layer.size);
    if (!sink.ok()) return sink.take_error();
    if (auto st = client.get_blob(layer.digest, [&](std::string_view d) { return sink->write(d); });
        !st.ok())
      return st.take_error();
    if (auto st = sink->commit(); !st.ok()) return st.take_error();
    out.bytes += layer.size;
    say("layer " + layer.digest + " " + human_bytes(layer.size));
  }

  // A Docker schema 2 manifest is written as its OCI equivalent (same config
  // and layer blobs, OCI media types), as `skopeo copy` to an oci: layout
  // does: OCI layout readers take OCI media types only.
  std::string layout_manifest = manifest.body;
  if (out.manifest_media_type == kDockerManifest) {
    json layer_list = json::array();
    for (const auto& l : layers)
      layer_list.push_back({{"mediaType", "application/vnd.oci.image.layer.v1.tar+gzip"},
                            {"digest", l.digest},
                            {"size", l.size}});
    layout_manifest = json{
        {"schemaVersion", 2},
        {"mediaType", kOciManifest},
        {"config",
         {{"mediaType", "application/vnd.oci.image.config.v1+json"},
          {"digest", config->digest},
          {"size", config->size}}},
        {"layers",
         layer_list}}.dump();
  }
  out.layout_manifest_digest = sha256_digest(layout_manifest);
  if (auto st = writer->write_blob(out.layout_manifest_digest, layout_manifest); !st.ok())
    return st.take_error();
  if (auto st = writer->write_index(kOciManifest, out.layout_manifest_digest,
                                    layout_manifest.size(), ref.tag, out.platform.os,
                                    out.platform.architecture, out.platform.variant);
      !st.ok())
    return st.take_error();
  return out;
}

}  // namespace sandcastle::images

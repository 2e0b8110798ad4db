#include "service/images.h"

#include <algorithm>
#include <cctype>

#include "images/image_store.h"
#include "service/sandbox_view.h"

namespace sandcastle::service {

namespace {

// What the error calls the language's toolchain: "python3", "node".
std::string interpreter_of(const Language& l) {
  if (l.requires_binaries.empty()) return l.name;
  const std::string& p = l.requires_binaries.back() == "/bin/sh" ? l.requires_binaries.front()
                                                                 : l.requires_binaries.back();
  return p.substr(p.rfind('/') + 1);
}

json image_json(const images::ImageRecord& r) {
  return json{{"name", r.name},
              {"id", r.id},
              {"tags", r.tags},
              {"languages", r.languages},
              {"size_bytes", r.size_bytes},
              {"created", iso_time(r.created)},
              {"source", r.source}};
}

}  // namespace

std::string canonical_language(std::string_view name) {
  const Language* l = language_by_name(name);
  return l ? l->name : std::string(name);
}

std::string default_image_for(const Config& config, const std::string& language) {
  const Language* l = language_by_name(language);
  auto it = l ? config.language_images.find(l->name) : config.language_images.end();
  return it == config.language_images.end() ? config.default_image : it->second;
}

Result<const Language*> language_for_image(const Env& env, std::string_view name,
                                           const std::string& image) {
  if (image == "host") return find_language(name);
  if (env.manager.backend().owns_images()) {
    // The engine's image: its interpreters are not probed ahead (a missing
    // one fails the first run, naming the program).
    const Language* lang = language_by_name(name);
    if (!lang)
      return Error::make(ErrorCode::kInvalidArgument,
                         "unknown language '" + std::string(name) + "'");
    return lang;
  }
  if (!env.images)
    return Error::make(ErrorCode::kFailedPrecondition,
                       "image '" + image + "': this server has no image store (only image 'host')");
  auto rec = env.images->find(image);
  if (!rec) {
    if (rec.error().code == ErrorCode::kNotFound)
      return Error::make(ErrorCode::kNotFound,
                         "image '" + image + "' not found: list_images shows the images there are");
    return rec.take_error();
  }
  const Language* lang = language_by_name(name);
  if (!lang) {
    std::string known;
    for (const auto& l : rec->languages) known += (known.empty() ? "" : ", ") + l;
    return Error::make(ErrorCode::kInvalidArgument, "unknown language '" + std::string(name) +
                                                        "'; image '" + image + "' has: " + known);
  }
  if (std::find(rec->languages.begin(), rec->languages.end(), lang->name) == rec->languages.end())
    return Error::make(ErrorCode::kInvalidArgument, "image " + image + " has no " +
                                                        interpreter_of(*lang) +
                                                        ": pick an image with " + lang->name +
                                                        " (list_images), or image 'host'");
  return lang;
}

Result<json> list_images(const Env& env) {
  json list = json::array();
  list.push_back(json{{"name", "host"},
                      {"id", "host"},
                      {"tags", json::array()},
                      {"languages", available_language_names()},
                      {"size_bytes", 0},
                      {"created", ""},
                      {"source", "host"}});
  if (env.manager.backend().owns_images()) {
    auto own = env.manager.backend().list_images();
    if (!own.ok())
      return Error::make(own.error().code, "listing the engine's images: " + own.error().message());
    for (const auto& b : *own)
      list.push_back(
          json{{"name", b.name},
               {"id", b.id},
               {"tags", json::array({b.name})},
               {"languages", json::array()},
               {"size_bytes", b.size_bytes},
               {"created", iso_time(std::chrono::system_clock::from_time_t(b.created_unix))},
               {"source", "engine"}});
  } else if (env.images) {
    for (const auto& r : env.images->list()) list.push_back(image_json(r));
  }
  const std::size_t n = list.size();
  return json{{"images", std::move(list)}, {"count", n}};
}

}  // namespace sandcastle::service

// save_sandbox (issue 15): a sandbox's changes as a new image in the store,
// its base image's layers plus one layer made inside the sandbox
// (sandbox/native/layer_export.h). create_sandbox {image: name} continues
// from it.
//
// A sandbox on image "host" has no base in the store (the host's /usr is no
// image): it is saved only onto a store image named by `base`, with its
// /workspace as the layer; without `base` the call is refused and says how
// to get one (sandcastle image build / import).
#include "service/save.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "common/crypto.h"
#include "images/image_store.h"
#include "service/op_args.h"
#include "service/sandbox_view.h"

namespace sandcastle::service {

namespace {

// The layer's temporary file: removed whatever happens.
struct TempFile {
  std::string path;
  ~TempFile() {
    if (!path.empty()) ::unlink(path.c_str());
  }
};

std::string temp_dir(const Config& config) {
  if (!config.save_tmp_dir.empty()) return config.save_tmp_dir;
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

// On a backend that keeps its own images (a container engine): the image
// is made there, from the sandbox's /workspace on its own image.
Result<json> save_in_backend(EntryUse& use, const std::string& name, const std::string& owner) {
  const auto t0 = std::chrono::steady_clock::now();
  auto saved = use->sandbox().save_image(name, owner);
  if (!saved.ok()) return saved.error();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return json{{"image", {{"name", saved->name}, {"id", saved->id}, {"base", saved->base}}},
              {"sandbox_id", use->id()},
              {"saved", "workspace"},
              {"layer_bytes", saved->workspace_bytes},
              {"consistent", false},
              {"consistency_note", "taken while the sandbox's processes ran"},
              {"warnings", json::array()},
              {"layer_ms", ms}};
}

Result<json> save(Env& env, const Caller& c, const json& args) {
  auto entry = env.manager.get(args["sandbox_id"], c.owner);
  if (!entry.ok()) return entry.error();
  if (EntryUse use(*entry); use->sandbox().saves_own_images()) {
    const std::string name = args.value("name", "");
    if (name.empty() || name == "host")
      return Error::make(ErrorCode::kInvalidArgument,
                         "name: the new image's name is required (not 'host')");
    return save_in_backend(use, name, c.owner);
  }
  if (!env.images)
    return Error::make(ErrorCode::kFailedPrecondition,
                       "this server has no image store: save_sandbox needs one");
  const std::string name = args.value("name", "");
  if (name.empty() || name == "host")
    return Error::make(ErrorCode::kInvalidArgument,
                       "name: the new image's name is required (not 'host')");
  EntryUse use(*entry);
  const std::string image = use->spec().image();
  std::string base_ref = image;
  if (image == "host") {
    if (!args.contains("base"))
      return Error::make(
          ErrorCode::kFailedPrecondition,
          "sandbox " + use->id() +
              " runs on image 'host' (the host's own /usr), which is not in the image store: "
              "give `base`, a store image to put its /workspace on (list_images), or make one "
              "with `sandcastle image build NAME --packages ...` or `sandcastle image import "
              "FILE`");
    base_ref = args["base"].get<std::string>();
  } else if (args.contains("base") && args["base"].get<std::string>() != image) {
    return Error::make(ErrorCode::kInvalidArgument,
                       "base: sandbox " + use->id() + " runs on image '" + image +
                           "'; its changes can only be saved onto that image");
  }
  // A name another tenant (or the operator) made is refused before the
  // layer is taken; add_layer checks again as it tags.
  if (auto st = env.images->check_name(name, c.owner); !st.ok()) return st.error();
  auto base = env.images->find(base_ref);
  if (!base.ok()) {
    Error e = base.take_error();
    if (e.code == ErrorCode::kNotFound)
      e.context =
          "base image '" + base_ref + "' not found (list_images shows the images there are)";
    return e;
  }
  TempFile tmp{temp_dir(env.config) + "/.save-" + crypto::hex(crypto::random_bytes(8)) + ".tar"};
  const auto t0 = std::chrono::steady_clock::now();
  auto layer = use->sandbox().save_layer(
      tmp.path, sandbox::SaveLimits{env.config.max_image_bytes, images::StoreLimits{}.max_entries});
  if (!layer.ok()) {
    // Nothing half-made: the worker's file (if any) goes with tmp.
    return layer.error();
  }
  const auto t1 = std::chrono::steady_clock::now();
  auto rec =
      env.images->add_layer(*base, tmp.path, name, base->config, "save:" + use->id(), c.owner);
  if (!rec.ok()) return rec.error();
  const auto t2 = std::chrono::steady_clock::now();
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  json warnings = rec->warnings;
  if (layer->skipped)
    warnings.push_back("skipped " + std::to_string(layer->skipped) +
                       " fifos, sockets or devices (not in an image)");
  if (layer->unreadable)
    warnings.push_back("skipped " + std::to_string(layer->unreadable) +
                       " files the sandbox user cannot read");
  json out{{"image",
            {{"name", rec->name},
             {"id", rec->id},
             {"base", base->name},
             {"layers", rec->layers.size()},
             {"size_bytes", rec->size_bytes},
             {"languages", rec->languages},
             {"created", iso_time(rec->created)}}},
           {"sandbox_id", use->id()},
           {"saved", layer->whole_root ? "root" : "workspace"},
           {"layer_bytes", layer->bytes},
           {"entries", layer->entries},
           {"skipped", layer->skipped},
           {"unreadable", layer->unreadable},
           {"skipped_paths", layer->skipped_paths},
           {"consistent", layer->consistent},
           {"warnings", warnings},
           {"layer_ms", ms(t1 - t0)},
           {"store_ms", ms(t2 - t1)}};
  if (!layer->consistent) out["consistency_note"] = layer->note;
  return out;
}

}  // namespace

json save_input_schema() {
  return json{{"type", "object"},
              {"properties",
               {{"sandbox_id", {{"type", "string"}, {"description", "Sandbox id or name."}}},
                {"name", {{"type", "string"}, {"description", "Name of the new image."}}},
                {"base",
                 {{"type", "string"},
                  {"description",
                   "For a sandbox on image 'host' only: the store image to put its "
                   "/workspace on."}}}}},
              {"required", {"sandbox_id", "name"}},
              {"additionalProperties", false}};
}

json save_output_schema() {
  return json{{"type", "object"},
              {"properties",
               {{"image", {{"type", "object"}}},
                {"sandbox_id", {{"type", "string"}}},
                {"layer_bytes", {{"type", "integer"}}},
                {"consistent", {{"type", "boolean"}}}}},
              {"required", {"image", "sandbox_id", "layer_bytes", "consistent"}}};
}

Result<json> save_sandbox(Env& env, const Caller& c, const json& raw) {
  auto checked = checked_args("save_sandbox", save_input_schema(), raw);
  if (!checked.ok()) return checked.error();
  return save(env, c, *checked);
}

}  // namespace sandcastle::service

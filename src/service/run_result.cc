// A run's result as JSON (the tools' structured result) and the runs'
// argument schemas.
#include "common/base64.h"
#include "service/runs.h"

namespace sandcastle::service {

namespace {

bool is_image_mime(const std::string& m) {
  return m == "image/png" || m == "image/jpeg" || m == "image/gif" || m == "image/webp" ||
         m == "image/svg+xml";
}

json bundle_json(const MimeBundle& b, ImageForm form, std::size_t* next_index) {
  json out = b.other;
  for (const auto& img : b.images) {
    if (form == ImageForm::kInline)
      out[img.mime_type] = img.base64;
    else
      out[img.mime_type] = {{"content_index", (*next_index)++}, {"bytes", img.bytes}};
  }
  return out;
}

json files_json(const std::vector<CreatedFile>& files) {
  json out = json::array();
  for (const auto& f : files) {
    json j{{"path", f.path}, {"size", f.size}, {"mime_type", f.mime_type}, {"status", f.status}};
    if (!f.uri.empty()) j["uri"] = f.uri;
    if (!f.url.empty()) j["url"] = f.url;
    out.push_back(std::move(j));
  }
  return out;
}

json timeout_schema() {
  return json{{"type", "number"},
              {"minimum", 0.1},
              {"maximum", 3600},
              {"description", "Seconds before the run is killed (default: the sandbox's, 30)."}};
}

}  // namespace

MimeBundle mime_bundle_of(const json& bundle) {
  MimeBundle out;
  if (!bundle.is_object()) return out;
  for (const auto& [mime, v] : bundle.items()) {
    if (is_image_mime(mime) && v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      // SVG arrives as text; the other images as base64 already.
      const bool svg = mime == "image/svg+xml";
      BundleImage img;
      img.mime_type = mime;
      img.base64 = svg ? base64_encode(s) : s;
      img.bytes = svg ? s.size() : img.base64.size() / 4 * 3;
      out.images.push_back(std::move(img));
    } else {
      out.other[mime] = v;
    }
  }
  return out;
}

std::size_t RunResult::image_count() const {
  std::size_t n = result ? result->images.size() : 0;
  for (const auto& d : displays) n += d.images.size();
  return n;
}

json run_result_json(const RunResult& r, ImageForm images, std::size_t first_index) {
  json out{{"stdout", r.stdout_data},
           {"stderr", r.stderr_data},
           {"exit_code", r.exit_code},
           {"signal", r.signal},
           {"duration_ms", static_cast<double>(r.duration.count()) / 1000.0},
           {"truncated", r.truncated},
           {"stdout_bytes", r.stdout_bytes},
           {"stderr_bytes", r.stderr_bytes},
           {"reason", r.reason},
           {"stage", r.stage},
           {"sandbox_id", r.sandbox_id ? json(*r.sandbox_id) : json(nullptr)}};
  if (r.cpu_time) out["cpu_time_ms"] = static_cast<double>(r.cpu_time->count()) / 1000.0;
  if (r.peak_memory_bytes) out["peak_memory_bytes"] = *r.peak_memory_bytes;
  if (!r.mode.empty()) out["mode"] = r.mode;
  if (r.language) out["language"] = *r.language;
  if (r.execution_count) out["execution_count"] = *r.execution_count;
  if (r.kernel) {
    json k{{"state_lost", r.kernel->state_lost},
           {"restarted", r.kernel->restarted},
           {"fresh", r.kernel->fresh}};
    if (!r.kernel->death.empty()) k["death"] = r.kernel->death;
    out["kernel"] = std::move(k);
  }
  std::size_t next = first_index;
  if (r.result) out["result"] = bundle_json(*r.result, images, &next);
  if (!r.error.is_null()) out["error"] = r.error;
  if (!r.displays.empty()) {
    json displays = json::array();
    for (const auto& d : r.displays) displays.push_back(bundle_json(d, images, &next));
    out["displays"] = std::move(displays);
  }
  if (r.files_created) out["files_created"] = files_json(*r.files_created);
  if (r.files_created_total) {
    out["files_created_total"] = *r.files_created_total;
    out["files_created_truncated"] = true;
  }
  if (r.queued_ms) out["queued_ms"] = *r.queued_ms;
  if (!r.hint.empty()) out["hint"] = r.hint;
  if (r.state_lost) out["state_lost"] = true;
  return out;
}

json run_output_schema() {
  return json{
      {"type", "object"},
      {"properties",
       {{"stdout", {{"type", "string"}}},
        {"stderr", {{"type", "string"}}},
        {"exit_code", {{"type", "integer"}}},
        {"duration_ms", {{"type", "number"}}},
        {"truncated", {{"type", "boolean"}}},
        {"reason", {{"type", "string"}}},
        {"stage", {{"type", "string"}}},
        {"files_created", {{"type", "array"}}},
        {"mode", {{"type", "string"}, {"enum", {"kernel", "process"}}}},
        {"execution_count", {{"type", "integer"}}},
        {"result", {{"type", "object"}}},
        {"error", {{"type", "object"}}},
        {"displays", {{"type", "array"}}},
        {"kernel", {{"type", "object"}}},
        {"hint", {{"type", "string"}}},
        {"state_lost", {{"type", "boolean"}}}}},
      {"required", {"stdout", "stderr", "exit_code", "duration_ms", "truncated", "reason"}}};
}

json run_code_input_schema(const Config& config) {
  return json{
      {"type", "object"},
      {"properties",
       {{"code", {{"type", "string"}, {"description", "The source code to run."}}},
        {"language",
         {{"type", "string"},
          {"description",
           "Language (default: the sandbox's, else " + config.default_language + ")."}}},
        {"sandbox_id",
         {{"type", "string"}, {"description", "Sandbox id or name; omit for a one-shot run."}}},
        {"timeout_s", timeout_schema()},
        {"stdin",
         {{"type", "string"}, {"description", "Bytes fed to the program's standard input."}}},
        {"fresh",
         {{"type", "boolean"},
          {"default", false},
          {"description",
           "Run in a new process instead of the sandbox's persistent "
           "kernel (no access to earlier variables)."}}}}},
      {"required", {"code"}},
      {"additionalProperties", false}};
}

json run_command_input_schema() {
  return json{
      {"type", "object"},
      {"properties",
       {{"sandbox_id", {{"type", "string"}, {"description", "Sandbox id or name."}}},
        {"command", {{"type", "string"}, {"minLength", 1}, {"description", "The shell command."}}},
        {"workdir", {{"type", "string"}, {"description", "Working directory inside the sandbox."}}},
        {"timeout_s", timeout_schema()},
        {"env",
         {{"type", "object"},
          {"additionalProperties", {{"type", "string"}}},
          {"description", "Extra environment variables for this command."}}},
        {"stdin", {{"type", "string"}, {"description", "Bytes fed to standard input."}}}}},
      {"required", {"sandbox_id", "command"}},
      {"additionalProperties", false}};
}

}  // namespace sandcastle::service

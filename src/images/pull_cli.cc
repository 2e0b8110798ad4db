#include "images/pull_cli.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "images/image_pull.h"

namespace sandcastle::images {

namespace fs = std::filesystem;

CLI::App* add_image_pull_command(CLI::App& image, PullArgs& args) {
  auto* pull = image.add_subcommand(
      "pull", "pull an image from a registry (OCI distribution API) into the store");
  pull->add_option("ref", args.reference, "[registry[:port]/]repository[:tag][@sha256:digest]")
      ->required();
  pull->add_option("--name", args.name, "name in the store (default: the full reference)");
  pull->add_option("--platform", args.platform,
                   "os/arch[/variant] to take from a multi-platform index")
      ->capture_default_str();
  pull->add_option(
      "--insecure-registry", args.insecure_registries,
      "HOST[:PORT] reached over plain HTTP (repeatable; loopback registries need not be named)");
  pull->add_option("--ca-file", args.ca_file, "PEM file of CAs trusted besides the system's")
      ->check(CLI::ExistingFile);
  pull->add_option("--username", args.username, "registry user (or SANDCASTLE_REGISTRY_USERNAME)");
  pull->add_flag(
      "--password-stdin", args.password_stdin,
      "read the password from the first line of stdin (else SANDCASTLE_REGISTRY_PASSWORD)");
  pull->add_flag("--json", args.json, "print the image record as JSON");
  return pull;
}

namespace {

// The temporary layout: removed however the pull ends.
struct TempDir {
  std::string path;
  ~TempDir() {
    if (path.empty()) return;
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Layouts of pulls whose process is gone (killed mid-pull): pull-<pid>-*.
void remove_stale_pulls(const std::string& tmp_root) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(tmp_root, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("pull-", 0) != 0) continue;
    const long pid = std::strtol(n.c_str() + 5, nullptr, 10);
    if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH))
      fs::remove_all(e.path(), ec);
  }
}

// ImportOptions::source and ImageRecord::warnings arrive with the store's
// implementation; set and print them where they exist.
template <typename Options>
void set_source(Options& o, const std::string& source) {
  if constexpr (requires { o.source = source; }) o.source = source;
}
template <typename Record>
void print_warnings(const Record& r, std::ostream& err) {
  if constexpr (requires { r.warnings.begin(); })
    for (const auto& w : r.warnings) err << "warning: " << w << "\n";
}

nlohmann::json record_json(const ImageRecord& r) {
  return {{"id", r.id},
          {"name", r.name},
          {"tags", r.tags},
          {"layers", r.layers},
          {"size_bytes", r.size_bytes},
          {"created",
           std::chrono::duration_cast<std::chrono::seconds>(r.created.time_since_epoch()).count()},
          {"source", r.source},
          {"languages", r.languages}};
}

}  // namespace

int run_image_pull(const PullArgs& args, ImageStore& store, std::istream& in, std::ostream& out,
                   std::ostream& err) {
  auto ref = parse_reference(args.reference);
  if (!ref.ok()) {
    err << "sandcastle: image pull: " << ref.error().context << "\n";
    return 2;
  }
  auto platform = parse_platform(args.platform);
  if (!platform.ok()) {
    err << "sandcastle: image pull: " << platform.error().context << "\n";
    return 2;
  }
  PullOptions opts;
  opts.platform = *platform;
  opts.max_image_bytes = args.max_image_bytes;
  opts.registry.insecure_registries = args.insecure_registries;
  opts.registry.ca_file = args.ca_file;
  opts.registry.username = args.username;
  if (const char* u = std::getenv("SANDCASTLE_REGISTRY_USERNAME");
      opts.registry.username.empty() && u)
    opts.registry.username = u;
  if (args.password_stdin) {
    if (opts.registry.username.empty()) {
      err << "sandcastle: image pull: --password-stdin needs --username\n";
      return 2;
    }
    std::getline(in, opts.registry.password);
    if (!opts.registry.password.empty() && opts.registry.password.back() == '\r')
      opts.registry.password.pop_back();
  } else if (const char* p = std::getenv("SANDCASTLE_REGISTRY_PASSWORD"); p) {
    opts.registry.password = p;
  }
  if (!opts.registry.username.empty() && opts.registry.password.empty()) {
    err << "sandcastle: image pull: a password is needed with --username (--password-stdin or "
           "SANDCASTLE_REGISTRY_PASSWORD)\n";
    return 2;
  }
  if (!args.json) opts.progress = [&err](const std::string& line) { err << line << "\n"; };

  const std::string tmp_root = args.state_dir + "/tmp";
  std::error_code ec;
  fs::create_directories(tmp_root, ec);
  remove_stale_pulls(tmp_root);
  std::string tmpl = tmp_root + "/pull-" + std::to_string(::getpid()) + "-XXXXXX";
  if (ec || !::mkdtemp(tmpl.data())) {
    err << "sandcastle: image pull: cannot create a directory under " << tmp_root << "\n";
    return 1;
  }
  TempDir tmp{tmpl};

  auto pulled = pull_to_layout(*ref, opts, tmp.path + "/layout");
  if (!pulled.ok()) {
    err << "sandcastle: image pull " << ref->str() << ": " << pulled.error().message() << "\n";
    return 1;
  }
  const std::string name = args.name.empty() ? ref->str() : args.name;
  ImportOptions import_opts;
  import_opts.name = name;
  set_source(import_opts, "pull:" + ref->str());
  auto rec = store.import(tmp.path + "/layout", import_opts);
  if (!rec.ok()) {
    err << "sandcastle: image pull " << ref->str() << ": import: " << rec.error().message() << "\n";
    return 1;
  }
  print_warnings(*rec, err);
  if (args.json) {
    auto j = record_json(*rec);
    j["manifest_digest"] = pulled->manifest_digest;
    if (!pulled->index_digest.empty()) j["index_digest"] = pulled->index_digest;
    out << j.dump() << "\n";
  } else {
    out << "pulled " << ref->str() << " (" << pulled->manifest_digest << ", "
        << pulled->platform.str() << ") as " << rec->name << " " << rec->id << "\n";
  }
  return 0;
}

int run_image_pull(const PullArgs& args) {
  auto store =
      ImageStore::open(args.state_dir, StoreLimits{.max_image_bytes = args.max_image_bytes});
  if (!store.ok()) {
    std::cerr << "sandcastle: image pull: " << store.error().message() << "\n";
    return 1;
  }
  return run_image_pull(args, **store, std::cin, std::cout, std::cerr);
}

}  // namespace sandcastle::images

#include "images/image_cli.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "images/layer_unpack.h"
#include "images/pull_cli.h"

extern char** environ;

namespace sandcastle::images {

namespace {

using nlohmann::json;

std::string iso(std::chrono::system_clock::time_point t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  if (std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) return {};
  return buf;
}

std::string human_size(std::uint64_t b) {
  std::ostringstream s;
  if (b >= (1ull << 30))
    s << std::fixed << std::setprecision(1) << static_cast<double>(b) / (1ull << 30) << " GiB";
  else if (b >= (1ull << 20))
    s << std::fixed << std::setprecision(1) << static_cast<double>(b) / (1ull << 20) << " MiB";
  else if (b >= 1024)
    s << std::fixed << std::setprecision(1) << static_cast<double>(b) / 1024 << " KiB";
  else
    s << b << " B";
  return s.str();
}

std::string short_id(const std::string& id) {
  return id.substr(id.find(':') + 1, 12);
}

std::string joined(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : sep) + x;
  return out;
}

json to_json(const ImageRecord& r) {
  json j = {{"id", r.id},
            {"name", r.name},
            {"tags", r.tags},
            {"layers", r.layers},
            {"size_bytes", r.size_bytes},
            {"created", iso(r.created)},
            {"source", r.source},
            {"config",
             {{"env", r.config.env},
              {"working_dir", r.config.working_dir},
              {"user", r.config.user},
              {"entrypoint", r.config.entrypoint},
              {"cmd", r.config.cmd}}},
            {"languages", r.languages}};
  if (!r.warnings.empty()) j["warnings"] = r.warnings;
  return j;
}

bool valid_word(const std::string& s, const char* extra) {
  if (s.empty() || s.size() > 200 || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && !std::strchr(extra, c)) return false;
  return true;
}

// Runs argv, its output going to ours (mmdebstrap's progress), and returns
// its exit status.
Result<int> run_program(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  // mmdebstrap's progress goes to our stderr, keeping stdout for the result.
  posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return Error::from_errno("run " + argv[0], rc);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return Error::from_errno("wait for " + argv[0]);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

class ImageCliImpl : public ImageCli {
 public:
  explicit ImageCliImpl(CLI::App& app) {
    image_ = app.add_subcommand(
        "image", "manage images sandboxes can start from (kept in <state dir>/images)");
    image_->require_subcommand(1);
    // --json before or after the verb, as for `sandcastle keys`.
    image_->add_flag("--json", json_, "print JSON");
    import_ = image_->add_subcommand(
        "import",
        "import a docker/podman save archive, an OCI layout (dir or tar) or a rootfs tar");
    import_->add_option("path", path_, "the archive or directory")->required();
    import_->add_option("--name", name_,
                        "the image's name (default: from the archive, else the file name)");
    import_->add_flag("--json", json_, "print the image as JSON");
    list_ = image_->add_subcommand("list", "list images");
    list_->add_flag("--json", json_, "print JSON");
    inspect_ = image_->add_subcommand("inspect", "show one image: layers, config, languages");
    inspect_->add_option("ref", ref_, "name, id, or id prefix of 12+ hex digits")->required();
    inspect_->add_flag("--json", json_, "print JSON");
    rm_ = image_->add_subcommand(
        "rm", "delete an image (refused while a sandbox uses it) and its unshared layers");
    rm_->add_option("ref", ref_, "name, id, or id prefix of 12+ hex digits")->required();
    rm_->add_flag("--json", json_, "print JSON");
    build_ = image_->add_subcommand("build", "build a Debian image with mmdebstrap and import it");
    build_->add_option("name", name_, "the new image's name")->required();
    build_->add_option("--suite", suite_, "Debian suite")->default_val("bookworm");
    build_->add_option("--packages", packages_,
                       "comma-separated packages to install (python3,nodejs,...)");
    build_->add_option("--mirror", mirror_, "Debian mirror URL (default: mmdebstrap's)");
    build_->add_flag("--json", json_, "print the image as JSON");
    pull_ = add_image_pull_command(*image_, pull_args_);
  }

  bool parsed() const override { return image_->parsed(); }

  int run(const std::string& state_dir, const StoreLimits& limits, std::ostream& out,
          std::ostream& err) override {
    auto store = ImageStore::open(state_dir, limits);
    if (!store.ok()) {
      err << "sandcastle image: " << store.error().message() << "\n";
      return 1;
    }
    auto& s = **store;
    auto fail = [&](const Error& e) {
      err << "sandcastle image: " << (e.code == ErrorCode::kSystem ? e.message() : e.context)
          << "\n";
      return 1;
    };
    if (pull_->parsed()) {
      pull_args_.state_dir = state_dir;
      pull_args_.max_image_bytes = limits.max_image_bytes;
      return run_image_pull(pull_args_, s, std::cin, out, err);
    }
    if (import_->parsed() || build_->parsed()) {
      Result<ImageRecord> r =
          import_->parsed() ? s.import(path_, ImportOptions{name_, ""}) : build(s, err);
      if (!r.ok()) return fail(r.error());
      if (json_) {
        out << to_json(*r).dump(2) << "\n";
      } else {
        out << (build_->parsed() ? "built " : "imported ") << r->name << " (" << short_id(r->id)
            << "): " << r->layers.size() << (r->layers.size() == 1 ? " layer, " : " layers, ")
            << human_size(r->size_bytes)
            << ", languages: " << (r->languages.empty() ? "none" : joined(r->languages)) << "\n";
        for (const auto& w : r->warnings) err << "warning: " << w << "\n";
      }
      return 0;
    }
    if (list_->parsed()) {
      auto all = s.list();
      if (json_) {
        json j = json::array();
        for (const auto& r : all) j.push_back(to_json(r));
        out << j.dump(2) << "\n";
        return 0;
      }
      out << std::left << std::setw(32) << "NAME" << std::setw(14) << "ID" << std::setw(11)
          << "SIZE" << std::setw(8) << "LAYERS" << std::setw(22) << "SOURCE"
          << "LANGUAGES\n";
      for (const auto& r : all)
        out << std::left << std::setw(32) << (r.name.empty() ? "<none>" : r.name) << std::setw(14)
            << short_id(r.id) << std::setw(11) << human_size(r.size_bytes) << std::setw(8)
            << r.layers.size() << std::setw(22) << r.source << joined(r.languages, ",") << "\n";
      return 0;
    }
    if (inspect_->parsed()) {
      auto r = s.find(ref_);
      if (!r.ok()) return fail(r.error());
      if (json_) {
        out << to_json(*r).dump(2) << "\n";
        return 0;
      }
      out << "id:          " << r->id << "\nname:        " << r->name << "\n";
      if (!r->tags.empty()) out << "tags:        " << joined(r->tags) << "\n";
      out << "source:      " << r->source << "\ncreated:     " << iso(r->created)
          << "\nsize:        " << human_size(r->size_bytes)
          << "\nlanguages:   " << joined(r->languages) << "\nlayers:\n";
      for (const auto& l : r->layers) out << "  " << l << "\n";
      if (!r->config.env.empty()) out << "env:         " << joined(r->config.env, " ") << "\n";
      if (!r->config.working_dir.empty()) out << "working dir: " << r->config.working_dir << "\n";
      if (!r->config.user.empty()) out << "user:        " << r->config.user << "\n";
      if (!r->config.entrypoint.empty())
        out << "entrypoint:  " << json(r->config.entrypoint).dump() << "\n";
      if (!r->config.cmd.empty()) out << "cmd:         " << json(r->config.cmd).dump() << "\n";
      return 0;
    }
    if (rm_->parsed()) {
      auto r = s.find(ref_);
      if (!r.ok()) return fail(r.error());
      // No server to ask from here: the store's image_use rows, written by a
      // running server's sandboxes, are what refuses.
      if (auto st = s.remove(ref_, nullptr); !st.ok()) return fail(st.error());
      const bool untagged = s.find(r->id).ok();
      if (json_) {
        out << json{{untagged ? "untagged" : "removed", untagged ? ref_ : r->id}}.dump() << "\n";
      } else if (untagged) {
        out << "untagged " << ref_ << " (" << short_id(r->id) << " keeps its other names)\n";
      } else {
        out << "removed " << (r->name.empty() ? short_id(r->id) : r->name) << " ("
            << short_id(r->id) << ")\n";
      }
      return 0;
    }
    return 2;
  }

 private:
  Result<ImageRecord> build(ImageStore& s, std::ostream& err) {
    if (!valid_word(suite_, "-"))
      return Error::make(ErrorCode::kInvalidArgument, "--suite: not a Debian suite name");
    std::stringstream ss(packages_);
    std::string p;
    while (std::getline(ss, p, ','))
      if (!valid_word(p, "+.-:=~_"))
        return Error::make(ErrorCode::kInvalidArgument,
                           "--packages: '" + p.substr(0, 80) + "' is not a package name");
    if (!mirror_.empty() &&
        (mirror_.find_first_of(" \t\n\"'") != std::string::npos ||
         !(mirror_.rfind("http://", 0) == 0 || mirror_.rfind("https://", 0) == 0 ||
           mirror_.rfind("file://", 0) == 0)))
      return Error::make(ErrorCode::kInvalidArgument, "--mirror: not an http(s):// or file:// URL");
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "sandcastle-build-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) return Error::from_errno("mkdtemp");
    struct Cleanup {
      std::string dir;
      ~Cleanup() { (void)remove_tree(dir); }
    } cleanup{tmpl};
    const std::string out_tar = tmpl + "/rootfs.tar";
    auto argv = mmdebstrap_argv(suite_, packages_, mirror_, out_tar, ::geteuid() == 0);
    err << "sandcastle image build: " << joined(argv, " ") << "\n";
    auto rc = run_program(argv);
    if (!rc.ok()) return rc.error();
    if (*rc != 0)
      return Error::make(ErrorCode::kUnavailable,
                         "mmdebstrap failed (exit " + std::to_string(*rc) + ")");
    return s.import(out_tar, ImportOptions{name_, "build:" + suite_});
  }

  CLI::App* image_ = nullptr;
  CLI::App* import_ = nullptr;
  CLI::App* list_ = nullptr;
  CLI::App* inspect_ = nullptr;
  CLI::App* rm_ = nullptr;
  CLI::App* build_ = nullptr;
  CLI::App* pull_ = nullptr;
  PullArgs pull_args_;
  std::string path_, name_, ref_, suite_ = "bookworm", packages_, mirror_;
  bool json_ = false;
};

}  // namespace

std::vector<std::string> mmdebstrap_argv(const std::string& suite, const std::string& packages,
                                         const std::string& mirror, const std::string& out_tar,
                                         bool as_root) {
  std::vector<std::string> argv = {"mmdebstrap", "--variant=apt", "--format=tar"};
  // Without root, mmdebstrap builds inside a user namespace of its own.
  if (!as_root) argv.emplace_back("--mode=unshare");
  if (!packages.empty()) argv.push_back("--include=" + packages);
  argv.push_back(suite);
  argv.push_back(out_tar);
  if (!mirror.empty()) argv.push_back(mirror);
  return argv;
}

std::unique_ptr<ImageCli> register_image_cli(CLI::App& app) {
  return std::make_unique<ImageCliImpl>(app);
}

}  // namespace sandcastle::images

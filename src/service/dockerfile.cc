#include "service/dockerfile.h"

#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>

namespace sandcastle::service {

using json = nlohmann::json;  // as the service layer's headers declare it

namespace {

Error invalid(std::string what) {
  return Error::make(ErrorCode::kInvalidArgument, std::move(what));
}

// A JSON string for an exec-form RUN/COPY argument (no shell sees it).
std::string json_quoted(std::string_view s) {
  return json(std::string(s)).dump();
}

std::string exec_form(const std::vector<std::string>& argv) {
  std::string out = "[";
  for (size_t i = 0; i < argv.size(); ++i) out += (i ? ", " : "") + json_quoted(argv[i]);
  return out + "]";
}

bool is_header_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
}

// The first value of header `field` (case-insensitive) in RFC 822 headers.
std::optional<std::string> header(std::string_view text, std::string_view field) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;  // end of the headers: the body is free text
    size_t colon = line.find(':');
    if (colon != std::string_view::npos && colon == field.size()) {
      bool same = true;
      for (size_t i = 0; i < colon; ++i)
        if (!is_header_name_char(line[i]) || std::tolower(static_cast<unsigned char>(line[i])) !=
                                                 std::tolower(static_cast<unsigned char>(field[i])))
          same = false;
      if (same) {
        std::string_view v = line.substr(colon + 1);
        while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
        while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
        // A continuation line would be part of this value: a one-line name
        // or version never has one, so its presence makes the value invalid.
        if (eol != std::string_view::npos && eol + 1 < text.size() &&
            (text[eol + 1] == ' ' || text[eol + 1] == '\t'))
          return std::string(v) + "\n";
        return std::string(v);
      }
    }
    if (eol == std::string_view::npos) break;
    pos = eol + 1;
  }
  return std::nullopt;
}

Result<json> parse_bounded_json(std::string_view text, const char* what) {
  if (text.size() > kMaxRecordBytes)
    return invalid(std::string(what) + " is larger than " + std::to_string(kMaxRecordBytes >> 10) +
                   " KiB");
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return invalid(std::string(what) + " is not a JSON object");
  return j;
}

}  // namespace

bool valid_pip_name(std::string_view name) {
  static const std::regex kName(R"(^([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9])$)");
  return !name.empty() && name.size() <= 200 && std::regex_match(name.begin(), name.end(), kName);
}

bool valid_pep440_version(std::string_view v) {
  // PEP 440's public version (case-insensitive, with its accepted spellings)
  // and an optional local part.
  static const std::regex kVersion(
      R"(^v?([0-9]+!)?[0-9]+(\.[0-9]+)*([-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?[0-9]*)?)"
      R"(((-[0-9]+)|([-_.]?(post|rev|r)[-_.]?[0-9]*))?([-_.]?dev[-_.]?[0-9]*)?(\+[a-z0-9]+([-_.][a-z0-9]+)*)?$)",
      std::regex::icase);
  return !v.empty() && v.size() <= 100 && std::regex_match(v.begin(), v.end(), kVersion);
}

bool valid_npm_name(std::string_view name) {
  static const std::regex kName(R"(^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9~-][a-z0-9._~-]*$)");
  if (name.empty() || name.size() > 214) return false;
  return std::regex_match(name.begin(), name.end(), kName);
}

bool valid_semver(std::string_view v) {
  static const std::regex kSemver(
      R"(^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$)");
  return !v.empty() && v.size() <= 100 && std::regex_match(v.begin(), v.end(), kSemver);
}

Result<PinnedPackage> parse_dist_metadata(std::string_view metadata) {
  if (metadata.size() > kMaxRecordBytes)
    return invalid("METADATA is larger than " + std::to_string(kMaxRecordBytes >> 10) + " KiB");
  auto name = header(metadata, "Name");
  auto version = header(metadata, "Version");
  if (!name) return invalid("METADATA has no Name");
  if (!version) return invalid("METADATA has no Version");
  if (!valid_pip_name(*name)) return invalid("METADATA's Name is not a PEP 508 distribution name");
  if (!valid_pep440_version(*version))
    return invalid("METADATA's Version is not a PEP 440 version");
  return PinnedPackage{*name, *version};
}

Result<std::vector<std::string>> parse_npm_dependencies(std::string_view package_json) {
  auto j = parse_bounded_json(package_json, "package.json");
  if (!j.ok()) return j.error();
  std::vector<std::string> names;
  auto it = j->find("dependencies");
  if (it == j->end()) return names;
  if (!it->is_object()) return invalid("package.json's dependencies is not an object");
  for (const auto& [name, _] : it->items()) {
    if (!valid_npm_name(name))
      return invalid("package.json names a dependency that is not a valid npm name");
    names.push_back(name);
  }
  return names;
}

Result<std::string> parse_npm_installed_version(std::string_view package_json,
                                                std::string_view expected_name) {
  auto j = parse_bounded_json(package_json, "package.json");
  if (!j.ok()) return j.error();
  auto n = j->find("name");
  auto v = j->find("version");
  if (n == j->end() || !n->is_string() || n->get<std::string>() != expected_name)
    return invalid("the installed package.json's name is not the dependency's");
  if (v == j->end() || !v->is_string() || !valid_semver(v->get<std::string>()))
    return invalid("the installed package.json's version is not a semver version");
  return v->get<std::string>();
}

bool valid_image_ref(std::string_view ref) {
  static const std::regex kRef(
      R"(^[a-z0-9]([a-z0-9._-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$)");
  return !ref.empty() && ref.size() <= 255 && std::regex_match(ref.begin(), ref.end(), kRef);
}

std::string base_ref_from_os_release(std::string_view os_release) {
  // os-release is KEY=value with optional quotes.
  auto value = [&](std::string_view key) -> std::string {
    size_t pos = 0;
    while (pos < os_release.size()) {
      size_t eol = os_release.find('\n', pos);
      std::string_view line = os_release.substr(
          pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos);
      if (line.size() > key.size() && line.substr(0, key.size()) == key &&
          line[key.size()] == '=') {
        std::string_view v = line.substr(key.size() + 1);
        if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
          v = v.substr(1, v.size() - 2);
        return std::string(v);
      }
      if (eol == std::string_view::npos) break;
      pos = eol + 1;
    }
    return {};
  };
  std::string id = value("ID");
  std::string tag = value("VERSION_CODENAME");
  if (tag.empty()) tag = value("VERSION_ID");
  if (id.empty() || tag.empty()) return {};
  std::string ref = id + ":" + tag;
  return valid_image_ref(ref) ? ref : std::string();
}

Result<std::string> dockerfile_env_value(std::string_view value) {
  std::string out = "\"";
  for (char c : value) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f)
      return invalid("has a control character (a newline would end the ENV line)");
    if (c == '\\' || c == '"' || c == '$') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string npm_manifest(const std::vector<PinnedPackage>& packages) {
  json deps = json::object();
  for (const auto& p : packages) deps[p.name] = p.version;
  return json{{"name", "sandcastle-export"}, {"private", true}, {"dependencies", deps}}.dump(2) +
         "\n";
}

Result<std::string> render_dockerfile(const DockerfilePlan& plan) {
  if (!valid_image_ref(plan.base_ref))
    return invalid("the base image reference is not a valid image reference");
  static const std::regex kWorkdir(R"(^/[A-Za-z0-9._/+-]*$)");
  if (plan.workdir.size() > 4096 || !std::regex_match(plan.workdir, kWorkdir))
    return invalid("the workdir has characters a Dockerfile would read as syntax");
  static const std::regex kEnvName(R"(^[A-Za-z_][A-Za-z0-9_]*$)");
  std::string d;
  d += "# Made by sandcastle's export_dockerfile from sandbox " + plan.sandbox_id + ".\n";
  d += "# Build from the unpacked context: podman build -t NAME .  (or docker build)\n";
  if (plan.host_userland) {
    d += "# The sandbox ran on the host's userland (image \"host\"); " + plan.base_ref +
         " is the release the host runs.\n";
  }
  d += "FROM " + plan.base_ref + "\n";
  const bool python = plan.language == "python" || !plan.pip.empty();
  const bool node = plan.language == "javascript" || !plan.npm.empty();
  if (plan.host_userland && (python || node)) {
    // The host's interpreters came from Debian packages; the base image may
    // lack them (debian:* has neither). Fixed text: nothing from the sandbox.
    std::string checks;
    if (python) {
      checks += "command -v python3 >/dev/null || missing=\"$missing python3\"; ";
      if (!plan.pip.empty())
        checks += "python3 -m pip --version >/dev/null 2>&1 || missing=\"$missing python3-pip\"; ";
    }
    if (node) {
      checks += "command -v node >/dev/null || missing=\"$missing nodejs\"; ";
      if (!plan.npm.empty()) checks += "command -v npm >/dev/null || missing=\"$missing npm\"; ";
    }
    d += "# The interpreters the host gave the sandbox, from Debian, where the base lacks them.\n";
    d +=
        "RUN missing=; " + checks +
        "if [ -n \"$missing\" ]; then apt-get update && apt-get install -y --no-install-recommends "
        "$missing && rm -rf /var/lib/apt/lists/*; fi\n";
  }
  if (!plan.pip.empty()) {
    // Every distribution found in the sandbox's target dir (dependencies
    // included), each pinned: pip resolves to exactly the sandbox's set.
    // --target as install_packages did, so imports resolve the same way.
    d += "# pip packages installed in the session (from their dist-info METADATA).\n";
    if (!plan.pip_index_url.empty()) d += "ARG PIP_INDEX_URL=" + plan.pip_index_url + "\n";
    if (plan.pip_index_url.rfind("http://", 0) == 0) {
      auto host_start = std::string("http://").size();
      auto host_end = plan.pip_index_url.find_first_of(":/", host_start);
      d += "ARG PIP_TRUSTED_HOST=" + plan.pip_index_url.substr(host_start, host_end - host_start) +
           "\n";
    }
    std::vector<std::string> argv = {"python3",
                                     "-m",
                                     "pip",
                                     "install",
                                     "--no-cache-dir",
                                     "--disable-pip-version-check",
                                     "--target",
                                     plan.python_target};
    for (const auto& p : plan.pip) argv.push_back(p.name + "==" + p.version);
    d += "RUN " + exec_form(argv) + "\n";
  }
  if (!plan.npm.empty()) {
    // A manifest written by the server from the validated name/version
    // pairs (never the sandbox's own package.json or lockfile, whose scripts
    // and resolved URLs the sandbox controls).
    d += "# npm packages installed in the session (versions from node_modules/*/package.json).\n";
    if (!plan.npm_registry.empty()) d += "ARG NPM_CONFIG_REGISTRY=" + plan.npm_registry + "\n";
    d += "COPY " + exec_form({kContextNpmManifest, plan.node_prefix + "/package.json"}) + "\n";
    d += "RUN " +
         exec_form({"npm", "install", "--prefix", plan.node_prefix, "--no-audit", "--no-fund"}) +
         "\n";
  }
  std::map<std::string, std::string> env = plan.env;
  if (!plan.pip.empty()) env["PYTHONPATH"] = plan.python_target;
  if (!plan.npm.empty()) env["NODE_PATH"] = plan.node_prefix + "/node_modules";
  for (const auto& [k, v] : env) {
    if (!std::regex_match(k, kEnvName)) return invalid("an env name is not a valid variable name");
    auto q = dockerfile_env_value(v);
    if (!q.ok()) return invalid("env " + k + " " + q.error().context);
    d += "ENV " + k + "=" + *q + "\n";
  }
  d += "WORKDIR " + plan.workdir + "\n";
  if (plan.has_files) {
    d += "# The files written and created in /workspace.\n";
    d += "COPY " + exec_form({std::string(kContextWorkspaceDir) + "/", "/workspace/"}) + "\n";
  }
  if (!plan.commands.empty()) {
    // Not RUN lines: a command's effect on /workspace is already in the
    // COPY above, and running them again could do anything twice.
    d += "\n# Commands this session ran (execute_command, from its run history), oldest first.\n"
         "# Those that set up the environment can become RUN lines:\n";
    const std::size_t first =
        plan.commands.size() > kMaxCommands ? plan.commands.size() - kMaxCommands : 0;
    if (first > 0) d += "#   (" + std::to_string(first) + " earlier commands left out)\n";
    for (std::size_t i = first; i < plan.commands.size(); ++i)
      d += "#   " + comment_safe(plan.commands[i], kMaxCommandChars) + "\n";
  }
  return d;
}

std::string comment_safe(std::string_view text, std::size_t max_chars) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : text) {
    if (out.size() >= max_chars) {
      out += "...";
      break;
    }
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace sandcastle::service

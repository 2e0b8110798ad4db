// export_dockerfile's pure part: parsing the installers' records read from a
// sandbox (hostile input: bounded, every name and version checked against
// PEP 508 / PEP 440 / npm's rules before it goes anywhere) and writing the
// Dockerfile and the npm manifest of the build context. No I/O here; the
// tool (export_tools.cc) reads the sandbox through its file API.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace sandcastle::service {

// Largest installer record (a METADATA, a package.json) read from a sandbox.
inline constexpr std::size_t kMaxRecordBytes = std::size_t{1} << 20;

struct PinnedPackage {
  std::string name;
  std::string version;
};

// PEP 508 distribution name: letters, digits, '.', '_', '-', starting and
// ending with a letter or digit; at most 200 characters.
bool valid_pip_name(std::string_view name);
// A PEP 440 version (public, optional epoch and local part); at most 100
// characters. Only [A-Za-z0-9.!+_-] can pass, so no shell or Dockerfile
// syntax ever does.
bool valid_pep440_version(std::string_view version);
// npm package name rules: lowercase, at most 214 characters, an optional
// @scope/, no leading '.' or '_', only URL-safe characters.
bool valid_npm_name(std::string_view name);
// An exact semver version (what npm records as installed): 1.2.3, with an
// optional -prerelease and +build of [0-9A-Za-z.-].
bool valid_semver(std::string_view version);

// Name and Version from a dist-info METADATA (RFC 822 headers up to the
// first blank line). kInvalidArgument names the field that failed, never
// echoing its value.
Result<PinnedPackage> parse_dist_metadata(std::string_view metadata);
// The "dependencies" names of the npm prefix's package.json (what the
// session asked npm for).
Result<std::vector<std::string>> parse_npm_dependencies(std::string_view package_json);
// The version of an installed package from its node_modules/<name>/package.json;
// its "name" must be `expected_name`.
Result<std::string> parse_npm_installed_version(std::string_view package_json,
                                                std::string_view expected_name);

// "debian:bookworm" from /etc/os-release text (ID and VERSION_CODENAME, or
// VERSION_ID); "" when neither gives a valid image reference.
std::string base_ref_from_os_release(std::string_view os_release);
// A reference FROM can take: [registry/]path[:tag][@digest], no spaces, no
// shell or Dockerfile syntax.
bool valid_image_ref(std::string_view ref);

// A value as a Dockerfile ENV value: double-quoted, with '\', '"' and '$'
// escaped. Values with control characters (a newline would start a new
// instruction) are refused: nullopt-like empty result with ok=false.
Result<std::string> dockerfile_env_value(std::string_view value);

struct DockerfilePlan {
  std::string sandbox_id;
  std::string base_ref;        // the FROM line
  bool host_userland = false;  // the sandbox ran on the host's /usr (image "host")
  std::string language;        // the sandbox's language ("python", "javascript", ...)
  std::string workdir = "/workspace";
  std::map<std::string, std::string> env;  // already filtered (names valid)
  std::vector<PinnedPackage> pip;
  std::vector<PinnedPackage> npm;
  std::string python_target;  // where install_packages put pip packages
  std::string node_prefix;    // where it put npm packages
  std::string pip_index_url;  // default for the PIP_INDEX_URL build arg ("" = none)
  std::string npm_registry;   // default for NPM_CONFIG_REGISTRY ("" = none)
  bool has_files = false;     // the context has workspace/ to COPY
  // Commands the session ran (execute_command, from the run history), oldest
  // first: written as comments only, for the reader to turn into RUN lines.
  std::vector<std::string> commands;
};

// At most this many commands, each cut to kMaxCommandChars, go in the
// Dockerfile's comment block.
inline constexpr std::size_t kMaxCommands = 50;
inline constexpr std::size_t kMaxCommandChars = 300;
// One command as a single comment line's text: control characters (a
// newline above all, which would end the comment) shown as \n, \t, \xNN.
std::string comment_safe(std::string_view text, std::size_t max_chars);

// Context paths the Dockerfile refers to.
inline constexpr const char* kContextWorkspaceDir = "workspace";
inline constexpr const char* kContextNpmManifest = "sandcastle-npm/package.json";

// The Dockerfile. Fails only on a value that cannot be written safely (an
// env value with a control character), naming its variable.
Result<std::string> render_dockerfile(const DockerfilePlan& plan);
// The package.json the npm step installs from: each package pinned to the
// exact version the sandbox had.
std::string npm_manifest(const std::vector<PinnedPackage>& packages);

}  // namespace sandcastle::service

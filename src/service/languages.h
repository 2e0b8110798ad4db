// The languages execute_code understands, as data: how a snippet is stored,
// compiled and run, and which package manager serves it. Adding a language is
// adding a row to the table in languages.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace sandcastle::service {

struct Language {
  std::string name;                  // canonical: "python"
  std::vector<std::string> aliases;  // "py", "python3"
  std::string source_file;           // "main.py": the snippet's file name
  // argv templates; "{src}" is the source path, "{bin}" the compiled output,
  // "{dir}" the snippet's directory, "{memory_mb}" the sandbox's memory limit
  // (an argument naming it is left out when there is none). An empty compile
  // step means interpreted.
  std::vector<std::string> compile;
  std::vector<std::string> run;
  std::string package_manager;  // "pip", "npm" or "" (none)
  // Binaries that must exist for the language to be offered (absolute paths,
  // as the sandbox sees the host's /usr).
  std::vector<std::string> requires_binaries;
};

// Every language in the table, available or not.
const std::vector<Language>& all_languages();

// Whether the toolchain of `lang` is present on this host.
bool language_available(const Language& lang);

// The canonical names of the available languages, in table order.
std::vector<std::string> available_language_names();

// By name or alias (case-insensitive), whether or not the host has its
// toolchain; null when there is no such language.
const Language* language_by_name(std::string_view name);

// Finds a language by name or alias (case-insensitive). An unknown or
// unavailable language is an error naming the available ones.
Result<const Language*> find_language(std::string_view name);
// The same over another table (a test's, with a toolchain no host has).
Result<const Language*> find_language(std::string_view name, const std::vector<Language>& table);
std::vector<std::string> available_language_names(const std::vector<Language>& table);

// Substitutes {src}, {bin}, {dir} and {memory_mb} in an argv template;
// memory_bytes 0 (no limit) drops the arguments that name {memory_mb}.
std::vector<std::string> expand_argv(const std::vector<std::string>& tmpl, const std::string& dir,
                                     const std::string& src, const std::string& bin,
                                     std::uint64_t memory_bytes = 0);

}  // namespace sandcastle::service

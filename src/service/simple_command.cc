#include "service/simple_command.h"

#include <algorithm>
#include <iterator>

namespace sandcastle::service {
namespace {

bool word_char(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '_':
    case '.':
    case '/':
    case ',':
    case ':':
    case '+':
    case '@':
    case '%':
    case '=':
    case '-': return true;
    default: return false;
  }
}

// Names bash resolves before a PATH search (builtins and reserved words):
// running the program of the same name could behave differently.
constexpr std::string_view kBashNames[] = {
    "!",        ".",        "[",      "[[",      "]]",    "alias",    "bg",      "bind",
    "break",    "builtin",  "caller", "case",    "cd",    "command",  "compgen", "complete",
    "compopt",  "continue", "coproc", "declare", "dirs",  "disown",   "do",      "done",
    "echo",     "elif",     "else",   "enable",  "esac",  "eval",     "exec",    "exit",
    "export",   "fc",       "fg",     "fi",      "for",   "function", "getopts", "hash",
    "help",     "history",  "if",     "in",      "jobs",  "kill",     "let",     "local",
    "logout",   "mapfile",  "popd",   "printf",  "pushd", "pwd",      "read",    "readarray",
    "readonly", "return",   "select", "set",     "shift", "shopt",    "source",  "suspend",
    "test",     "then",     "time",   "times",   "trap",  "type",     "typeset", "ulimit",
    "umask",    "unalias",  "unset",  "until",   "wait"};

}  // namespace

std::optional<std::vector<std::string>> simple_command_words(std::string_view command) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < command.size()) {
    char c = command[i];
    if (c == ' ' || c == '\t') {
      ++i;
      continue;
    }
    if (!word_char(c)) return std::nullopt;
    std::size_t start = i;
    while (i < command.size() && word_char(command[i])) ++i;
    words.emplace_back(command.substr(start, i - start));
  }
  if (words.empty()) return std::nullopt;
  const std::string& first = words.front();
  // An assignment (NAME=value) or a word bash treats specially.
  if (first.find('=') != std::string::npos) return std::nullopt;
  if (first == "true" || first == "false" || first == ":") {
    if (words.size() != 1) return std::nullopt;  // the programs take --help; the builtins do not
    if (first == ":") words.front() = "true";
    return words;
  }
  if (first.front() == '%') return std::nullopt;  // a job
  if (std::find(std::begin(kBashNames), std::end(kBashNames), first) != std::end(kBashNames))
    return std::nullopt;
  return words;
}

bool environment_allows_direct_exec(const std::map<std::string, std::string>& env) {
  for (const char* name :
       {"BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PWD", "SHLVL", "_", "POSIXLY_CORRECT"})
    if (env.count(name)) return false;
  auto it = env.lower_bound("BASH_FUNC_");
  return it == env.end() || it->first.rfind("BASH_FUNC_", 0) != 0;
}

}  // namespace sandcastle::service

// execute_command runs `bash -c COMMAND`. Most commands an assistant sends are
// one program and its arguments ("ls -la", "python3 main.py"), for which bash
// does nothing but a PATH search and an execve of its own, after a start-up
// that costs more than the program (1 ms against 0.3 ms for /bin/true). Such a
// command is executed directly, with the variables bash would have added
// (PWD, SHLVL, _); anything bash would treat differently goes to bash.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandcastle::service {

// The words of COMMAND when bash would run it as exactly one external
// program with those arguments: only words of [A-Za-z0-9_./,:+@%=-] separated by
// spaces or tabs, a first word that is neither an assignment nor a bash
// builtin or reserved word. `true`/`false`/`:` without arguments count (the
// program behaves as the builtin). nullopt: run it with bash.
std::optional<std::vector<std::string>> simple_command_words(std::string_view command);

// False when the environment would make bash do more than exec the program:
// a start-up file (BASH_ENV, ENV), shell options, exported functions, or the
// variables bash itself sets for the program (PWD, SHLVL, _).
bool environment_allows_direct_exec(const std::map<std::string, std::string>& env);

}  // namespace sandcastle::service

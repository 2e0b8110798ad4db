#include "service/languages.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "common/text.h"

namespace sandcastle::service {

namespace {

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
  return s;
}

// Java as `java Main.java` takes it: any class name, the public class (else
// the first one) being the program. javac wants a public class in a file of
// its name, so the snippet is copied to one; the class to run is left for
// the run step in .main-class. Arguments: dir, source, then javac's argv.
constexpr const char* kJavaCompile = R"sh(set -e; d=$1; s=$2; shift 2
k='\(class\|interface\|enum\|record\)[[:space:]]\+\([A-Za-z_$][A-Za-z0-9_$]*\)'
p=$(sed -n "s/^[[:space:]]*public[[:space:]]\+\([a-z]\+[[:space:]]\+\)*$k.*/\3/p" "$s" | head -n 1)
c=${p:-$(sed -n "s/^[^/\"*]*\<$k.*/\2/p" "$s" | head -n 1)}
if [ -n "$p" ] && [ "$p" != Main ]; then cp "$s" "$d/$p.java"; s=$d/$p.java; fi
printf '%s\n' "${c:-Main}" > "$d/.main-class"
exec "$@" "$s")sh";
// Arguments: dir, then java's argv.
constexpr const char* kJavaRun = R"sh(d=$1; shift; exec "$@" -cp "$d" "$(cat "$d/.main-class")")sh";

}  // namespace

const std::vector<Language>& all_languages() {
  // Interpreters run unbuffered (-u, stdbuf-free) so streamed output arrives
  // as the program prints it.
  static const std::vector<Language> kTable = {
      {"python",
       {"py", "python3"},
       "main.py",
       {},
       {"/usr/bin/python3", "-u", "{src}"},
       "pip",
       {"/usr/bin/python3"}},
      {"javascript",
       {"js", "node", "nodejs"},
       "main.js",
       {},
       {"/usr/bin/node", "{src}"},
       "npm",
       {"/usr/bin/node"}},
      {"bash", {"shell"}, "main.sh", {}, {"/bin/bash", "{src}"}, "", {"/bin/bash"}},
      {"sh", {"posix-sh", "dash"}, "main.sh", {}, {"/bin/sh", "{src}"}, "", {"/bin/sh"}},
      {"c",
       {"gcc"},
       "main.c",
       {"/usr/bin/gcc", "-O2", "-pipe", "-o", "{bin}", "{src}", "-lm"},
       {"{bin}"},
       "",
       {"/usr/bin/gcc"}},
      {"cpp",
       {"c++", "cxx", "g++"},
       "main.cpp",
       {"/usr/bin/g++", "-O2", "-pipe", "-std=c++20", "-o", "{bin}", "{src}"},
       {"{bin}"},
       "",
       {"/usr/bin/g++"}},
      {"go",
       {"golang"},
       "main.go",
       {"/usr/bin/go", "build", "-o", "{bin}", "{src}"},
       {"{bin}"},
       "",
       {"/usr/bin/go"}},
      {"rust",
       {"rs"},
       "main.rs",
       {"/usr/bin/rustc", "-O", "-o", "{bin}", "{src}"},
       {"{bin}"},
       "",
       {"/usr/bin/rustc"}},
      {"typescript",
       {"ts"},
       "main.ts",
       {"/usr/bin/tsc", "--outDir", "{dir}", "{src}"},
       {"/usr/bin/node", "{dir}/main.js"},
       "npm",
       {"/usr/bin/tsc", "/usr/bin/node"}},
      // javac first, so a compile error is reported as one (stage "compile");
      // the compiler is a short run, so its JVM skips the optimising JIT.
      // Both JVMs size their heaps from the sandbox's memory limit, not from
      // the host's RAM, which is all they would see (a sandbox has no /sys):
      // garbage is collected before the limit instead of the JVM being killed.
      // The serial collector is the one the JVM picks for a machine of one
      // core and little memory, which a sandbox is; G1's own tables would not
      // fit a 128 MiB limit where it is a per-process RLIMIT_DATA.
      {"java",
       {},
       "Main.java",
       {"/bin/sh", "-c", kJavaCompile, "sh", "{dir}", "{src}", "/usr/bin/javac",
        "-J-XX:+UseSerialGC", "-J-XX:TieredStopAtLevel=1", "-J-XX:-UsePerfData",
        "-J-XX:MaxRAM={memory_mb}m", "-encoding", "UTF-8", "-d", "{dir}"},
       {"/bin/sh", "-c", kJavaRun, "sh", "{dir}", "/usr/bin/java", "-XX:-UsePerfData",
        "-XX:+UseSerialGC", "-XX:MaxRAM={memory_mb}m", "-XX:MaxRAMPercentage=50"},
       "",
       {"/usr/bin/javac", "/usr/bin/java", "/bin/sh"}},
      {"perl", {"pl"}, "main.pl", {}, {"/usr/bin/perl", "{src}"}, "", {"/usr/bin/perl"}},
      {"ruby", {"rb"}, "main.rb", {}, {"/usr/bin/ruby", "{src}"}, "", {"/usr/bin/ruby"}},
  };
  return kTable;
}

bool language_available(const Language& lang) {
  return std::all_of(lang.requires_binaries.begin(), lang.requires_binaries.end(),
                     [](const std::string& p) { return ::access(p.c_str(), X_OK) == 0; });
}

std::vector<std::string> available_language_names() {
  return available_language_names(all_languages());
}

std::vector<std::string> available_language_names(const std::vector<Language>& table) {
  std::vector<std::string> names;
  for (const auto& l : table)
    if (language_available(l)) names.push_back(l.name);
  return names;
}

namespace {

// By name or alias in `table` (its names are lower case), whether or not
// the host has its toolchain.
const Language* by_name(std::string_view name, const std::vector<Language>& table) {
  const std::string want = ascii_lower(name);
  for (const auto& l : table)
    if (l.name == want || std::find(l.aliases.begin(), l.aliases.end(), want) != l.aliases.end())
      return &l;
  return nullptr;
}

}  // namespace

const Language* language_by_name(std::string_view name) {
  return by_name(name, all_languages());
}

Result<const Language*> find_language(std::string_view name) {
  return find_language(name, all_languages());
}

Result<const Language*> find_language(std::string_view name, const std::vector<Language>& table) {
  // Probed only for an error message: every call would otherwise stat each
  // language's binaries.
  auto avail = [&table] {
    std::string s;
    for (const auto& n : available_language_names(table)) s += (s.empty() ? "" : ", ") + n;
    return s;
  };
  if (const Language* l = by_name(name, table)) {
    if (!language_available(*l))
      return Error::make(ErrorCode::kUnavailable,
                         "language '" + l->name + "' is not installed on this host (missing " +
                             l->requires_binaries.front() + "); available languages: " + avail());
    return l;
  }
  return Error::make(ErrorCode::kInvalidArgument,
                     "unknown language '" + std::string(name) + "'; available languages: " + avail());
}

std::vector<std::string> expand_argv(const std::vector<std::string>& tmpl, const std::string& dir,
                                     const std::string& src, const std::string& bin,
                                     std::uint64_t memory_bytes) {
  const std::uint64_t mb = memory_bytes >> 20;
  std::vector<std::string> out;
  out.reserve(tmpl.size());
  for (const auto& a : tmpl) {
    if (mb == 0 && a.find("{memory_mb}") != std::string::npos) continue;
    std::string x =
        replace_all(replace_all(replace_all(a, "{src}", src), "{bin}", bin), "{dir}", dir);
    out.push_back(replace_all(std::move(x), "{memory_mb}", std::to_string(mb)));
  }
  return out;
}

}  // namespace sandcastle::service

// Unit tests exercise error paths on purpose; keep their logs off the output
// unless SANDCASTLE_TEST_LOG asks for them.
#include <spdlog/spdlog.h>

#include <cstdlib>

namespace {
const bool kQuiet = [] {
  const char* level = std::getenv("SANDCASTLE_TEST_LOG");
  spdlog::set_level(level ? spdlog::level::from_str(level) : spdlog::level::off);
  return true;
}();
}  // namespace

// Logging goes to stderr only: stdout carries the stdio transport.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace sandcastle {

// Installs the process-wide stderr logger; level is trace|debug|info|warn|error|off.
void init_logging(const std::string& level);

}  // namespace sandcastle

#include "common/log.h"

#include <spdlog/sinks/stdout_sinks.h>

namespace sandcastle {

void init_logging(const std::string& level) {
  auto logger = spdlog::stderr_logger_mt("sandcastle");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace sandcastle

#include "service/env.h"

namespace sandcastle::service {

std::vector<std::string> Config::pip_hosts() const {
  std::vector<std::string> hosts = {pip_index_url};
  // The public index serves files from a second host.
  if (pip_index_url.find("pypi.org") != std::string::npos)
    hosts.push_back("https://files.pythonhosted.org");
  return hosts;
}

std::vector<std::string> Config::npm_hosts() const {
  return {npm_registry};
}

}  // namespace sandcastle::service

// Route-table helpers shared by the web unit tests.
#pragma once

#include <string>

namespace sandcastle::web::testing {

// A concrete path for a route template: every {param} filled in ("p1").
inline std::string concrete(const std::string& tmpl) {
  std::string out;
  for (std::size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] == '{') {
      i = tmpl.find('}', i);
      out += "p1";
    } else {
      out.push_back(tmpl[i]);
    }
  }
  return out;
}

}  // namespace sandcastle::web::testing

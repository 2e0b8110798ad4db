#include "images/image_names.h"

#include <algorithm>

namespace sandcastle::images {

std::vector<std::string> names_tried(const std::string& ref) {
  const auto slash = ref.rfind('/');
  const bool tagged = ref.find(':', slash == std::string::npos ? 0 : slash) != std::string::npos;
  std::vector<std::string> names = {ref, "localhost/" + ref};
  if (!tagged) {
    names.push_back(ref + ":latest");
    names.push_back("localhost/" + ref + ":latest");
  }
  return names;
}

// The references whose lookup may reach `name` (names_tried of each holds it).
std::vector<std::string> refs_reaching(const std::string& name) {
  auto strip_local = [](const std::string& n) {
    return n.rfind("localhost/", 0) == 0 ? n.substr(10) : n;
  };
  auto strip_latest = [](const std::string& n) {
    const bool latest = n.size() > 7 && n.compare(n.size() - 7, 7, ":latest") == 0;
    return latest ? n.substr(0, n.size() - 7) : n;
  };
  std::vector<std::string> refs;
  for (const auto& r :
       {name, strip_local(name), strip_latest(name), strip_local(strip_latest(name))}) {
    const auto tried = names_tried(r);
    if (!r.empty() && std::find(refs.begin(), refs.end(), r) == refs.end() &&
        std::find(tried.begin(), tried.end(), name) != tried.end())
      refs.push_back(r);
  }
  return refs;
}

// A reference looked up as an image id (prefix) when no name matches.
bool reads_as_id(const std::string& ref) {
  std::string hex = ref.rfind("sha256:", 0) == 0 ? ref.substr(7) : ref;
  return hex.size() >= 12 && hex.size() <= 64 && std::all_of(hex.begin(), hex.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace sandcastle::images

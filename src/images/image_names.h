// How a reference reaches an image name: the names it is looked up as (as
// given, then as docker/podman complete it), and, the other way round, the
// references that reach a name (so a new name never shadows another's).
#pragma once

#include <string>
#include <vector>

namespace sandcastle::images {

// The names a reference is looked up as, in order.
std::vector<std::string> names_tried(const std::string& ref);
// The references whose lookup may reach `name` (names_tried of each holds it).
std::vector<std::string> refs_reaching(const std::string& name);
// A reference looked up as an image id (prefix) when no name matches.
bool reads_as_id(const std::string& ref);

}  // namespace sandcastle::images

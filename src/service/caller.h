// Who asks a service operation.
#pragma once

#include <string>

namespace sandcastle::service {

// The owner whose sandboxes the call may see ("" for the local user, an API
// key's owner otherwise) and the key it came with (audit).
struct Caller {
  std::string owner;
  std::string key_id;
};

}  // namespace sandcastle::service

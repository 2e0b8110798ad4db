// ImageStore::open until the store itself is built in (issue 15, helper H1):
// a weak definition, so the store's own (strong) one replaces it at link
// time. Delete this file when the store's implementation is merged.
#include "images/image_store.h"

namespace sandcastle::images {

__attribute__((weak)) Result<std::unique_ptr<ImageStore>> ImageStore::open(const std::string&,
                                                                           StoreLimits) {
  return Error::make(ErrorCode::kUnavailable, "the image store is not part of this build");
}

}  // namespace sandcastle::images

#include "common/result.h"

#include <string.h>

namespace sandcastle {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kAlreadyExists: return "already_exists";
    case ErrorCode::kPermissionDenied: return "permission_denied";
    case ErrorCode::kResourceExhausted: return "resource_exhausted";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kCancelled: return "cancelled";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kSystem: return "system";
    case ErrorCode::kFailedPrecondition: return "failed_precondition";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

const char* errno_name(int err) {
  // strerrorname_np is glibc >= 2.32 (Debian 12 has 2.36).
  const char* name = strerrorname_np(err);
  return name ? name : "E?";
}

const char* errno_text(int err) {
  const char* text = strerrordesc_np(err);
  return text ? text : "unknown error";
}

std::string Error::message() const {
  if (sys_errno == 0) return context;
  std::string out = context;
  out += ": ";
  out += errno_text(sys_errno);
  out += " (";
  out += errno_name(sys_errno);
  out += ")";
  return out;
}

}  // namespace sandcastle

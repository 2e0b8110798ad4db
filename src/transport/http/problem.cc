#include "transport/http/problem.h"

#include <nlohmann/json.hpp>

namespace sandcastle::transport::http {

namespace {

ErrorCode effective(const Error& e) {
  if (e.code != ErrorCode::kSystem) return e.code;
  switch (e.sys_errno) {
    case ENOENT:
    case ENOTDIR: return ErrorCode::kNotFound;
    case EACCES:
    case EPERM: return ErrorCode::kPermissionDenied;
    case EEXIST: return ErrorCode::kAlreadyExists;
    case ENOTEMPTY:
    case EISDIR:
    case EBUSY: return ErrorCode::kFailedPrecondition;
    case EINVAL:
    case ENAMETOOLONG: return ErrorCode::kInvalidArgument;
    case ENOSPC:
    case EDQUOT:
    case EFBIG: return ErrorCode::kResourceExhausted;
    default: return ErrorCode::kSystem;
  }
}

}  // namespace

Response problem(int status, const std::string& code, const std::string& detail) {
  nlohmann::json body{{"type", std::string(kProblemBase) + code},
                      {"title", reason_phrase(status)},
                      {"status", status},
                      {"detail", detail},
                      {"code", code}};
  Response r = Response::text(
      status, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), kProblemType);
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

int status_for(const Error& e) {
  switch (effective(e)) {
    case ErrorCode::kOk: return 200;
    case ErrorCode::kInvalidArgument: return 400;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kAlreadyExists: return 409;
    case ErrorCode::kPermissionDenied: return 403;
    case ErrorCode::kResourceExhausted: return 429;
    case ErrorCode::kTimeout: return 504;
    case ErrorCode::kCancelled: return 409;
    case ErrorCode::kUnavailable: return 503;
    case ErrorCode::kFailedPrecondition: return 409;
    case ErrorCode::kIo:
    case ErrorCode::kSystem:
    case ErrorCode::kInternal: return 500;
  }
  return 500;
}

std::string problem_code(const Error& e) {
  return error_code_name(effective(e));
}

Response problem(const Error& e) {
  return problem(status_for(e), problem_code(e), e.message());
}

}  // namespace sandcastle::transport::http

// Result<T>: an expected-style return type carrying an error code, the errno
// that caused it and a human-readable context ("mount /proc"), so the cause of
// a failure travels unchanged from the syscall to the caller that reports it.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <variant>

namespace sandcastle {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kPermissionDenied,
  kResourceExhausted,
  kTimeout,
  kCancelled,
  kUnavailable,
  kIo,
  kSystem,  // a syscall failed: see errno
  kFailedPrecondition,  // the target is not of a kind the operation handles (a FIFO for a read)
  kInternal,
};

const char* error_code_name(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  int sys_errno = 0;
  std::string context;

  // "context: strerror (ENAME)" — the form every log line and tool error uses.
  std::string message() const;

  static Error from_errno(std::string context, int err = errno) {
    return Error{ErrorCode::kSystem, err, std::move(context)};
  }
  static Error make(ErrorCode code, std::string context) {
    return Error{code, 0, std::move(context)};
  }
};

// Symbolic errno name ("EPERM"); strerror text is locale dependent, names are not.
const char* errno_name(int err);
// strerror's text without its shared buffer, so safe from any thread.
const char* errno_text(int err);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<1>(v_); }
  Error&& take_error() { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }
  Error&& take_error() { return std::move(error_); }

 private:
  Error error_{};
  bool ok_ = true;
};

using Status = Result<void>;

inline Status ok_status() { return Status{}; }

}  // namespace sandcastle

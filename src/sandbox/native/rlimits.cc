#include "sandbox/native/rlimits.h"

#include <sys/resource.h>

namespace sandcastle::sandbox::native {
namespace {

std::optional<StepError> set_limit(int resource, const char* name, rlim_t value) {
  struct rlimit lim {value, value};
  if (setrlimit(resource, &lim) == 0) return std::nullopt;
  // Without CAP_SYS_RESOURCE a hard limit cannot be raised: clamp to it.
  struct rlimit cur {};
  if (errno == EPERM && getrlimit(resource, &cur) == 0 && cur.rlim_max != RLIM_INFINITY &&
      cur.rlim_max < value) {
    lim = {cur.rlim_max, cur.rlim_max};
    if (setrlimit(resource, &lim) == 0) return std::nullopt;
  }
  return step_failed(std::string("setrlimit ") + name);
}

}  // namespace

std::optional<StepError> apply_exec_rlimits(const ExecWire& req) {
  if (auto e = set_limit(RLIMIT_CORE, "RLIMIT_CORE", 0)) return e;
  if (auto e = set_limit(RLIMIT_NOFILE, "RLIMIT_NOFILE", req.rlimit_nofile)) return e;
  if (req.rlimit_fsize)
    if (auto e = set_limit(RLIMIT_FSIZE, "RLIMIT_FSIZE", req.rlimit_fsize)) return e;
  if (req.rlimit_nproc)
    if (auto e = set_limit(RLIMIT_NPROC, "RLIMIT_NPROC", req.rlimit_nproc)) return e;
  // RLIMIT_DATA, not RLIMIT_AS: runtimes such as V8 reserve large PROT_NONE
  // ranges that RLIMIT_AS would count but that use no memory.
  if (req.rlimit_data)
    if (auto e = set_limit(RLIMIT_DATA, "RLIMIT_DATA", req.rlimit_data)) return e;
  return std::nullopt;
}

}  // namespace sandcastle::sandbox::native

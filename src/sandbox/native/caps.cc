#include "sandbox/native/caps.h"

#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace sandcastle::sandbox::native {
namespace {

int capget_raw(__user_cap_data_struct (&data)[2]) {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  return static_cast<int>(syscall(SYS_capget, &hdr, data));
}

int capset_raw(__user_cap_data_struct (&data)[2]) {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  return static_cast<int>(syscall(SYS_capset, &hdr, data));
}

}  // namespace

int keep_caps_across_exec() {
  __user_cap_data_struct data[2] = {};
  if (capget_raw(data) != 0) return errno;
  data[0].inheritable = data[0].permitted;
  data[1].inheritable = data[1].permitted;
  if (capset_raw(data) != 0) return errno;
  // The kernel rejects unknown capability numbers with EINVAL: that is the end.
  for (unsigned long cap = 0; cap < 64; ++cap) {
    if (syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) != 0) {
      if (errno == EINVAL) break;
      return errno;
    }
  }
  return 0;
}

std::optional<StepError> drop_bounding_and_ambient() {
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
    return step_failed("clear ambient capabilities");
  for (unsigned long cap = 0; cap < 64; ++cap) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      if (errno == EINVAL) break;
      return step_failed("drop bounding capability " + std::to_string(cap));
    }
  }
  return std::nullopt;
}

std::optional<StepError> drop_all_caps() {
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
    return step_failed("clear ambient capabilities");
  // Belt and braces: a bounding set that still holds CAP_SYS_ADMIN means
  // init's drop did not happen; refuse to run the command.
  if (prctl(PR_CAPBSET_READ, CAP_SYS_ADMIN, 0, 0, 0) != 0)
    return step_failed("bounding set not empty", EPERM);
  __user_cap_data_struct data[2] = {};
  if (capset_raw(data) != 0) return step_failed("capset (drop all)");
  return std::nullopt;
}

int load_seccomp_filter(std::string_view bpf) {
  struct sock_fprog prog {};
  prog.len = static_cast<unsigned short>(bpf.size() / sizeof(struct sock_filter));
  prog.filter = reinterpret_cast<struct sock_filter*>(const_cast<char*>(bpf.data()));
  return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0 ? 0 : errno;
}

}  // namespace sandcastle::sandbox::native

#include "escape.h"
/* The /proc masks and read-only binds stay: no unmount, no bind over them,
 * no read-write remount. */
int main(void) {
  report(umount2("/proc/timer_list", MNT_DETACH));
  report(mount("/proc/self/status", "/proc/timer_list", NULL, MS_BIND, NULL));
  return report(mount(NULL, "/proc/sys", NULL, MS_REMOUNT | MS_BIND, NULL));
}

#include "escape.h"
#include <linux/reboot.h>
int main(void) { return report(syscall(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2, LINUX_REBOOT_CMD_POWER_OFF, 0)); }

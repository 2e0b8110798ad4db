#include "escape.h"
#include <sys/fanotify.h>
/* Unprivileged fanotify (FAN_REPORT_FID) exists since Linux 5.13. */
int main(void) { return report(fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_FID, O_RDONLY)); }

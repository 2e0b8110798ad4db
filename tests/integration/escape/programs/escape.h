/* Shared by the hostile programs: each tries one thing and prints the errno
 * name of the failure ("EPERM"), or "OK <value>" if the attempt succeeded —
 * which the test treats as an escape. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static int report(long rc) {
  if (rc < 0) printf("%s\n", strerrorname_np(errno));
  else printf("OK %ld\n", rc);
  return 0;
}

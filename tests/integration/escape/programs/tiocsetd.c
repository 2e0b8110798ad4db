#include "escape.h"
/* Attaching a line discipline: a module autoload away from n_gsm, n_hdlc. */
int main(void) {
  int fd = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return report(fd);
  int ldisc = 0; /* N_TTY */
  return report(ioctl(fd, TIOCSETD, &ldisc));
}

#include "escape.h"
int main(void) {
  char buf[16];
  return report(syscall(SYS_modify_ldt, 0, buf, sizeof buf));
}

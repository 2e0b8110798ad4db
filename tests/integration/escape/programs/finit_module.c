#include "escape.h"
int main(void) { int fd = open("/bin/true", O_RDONLY); return report(syscall(SYS_finit_module, fd, "", 0)); }

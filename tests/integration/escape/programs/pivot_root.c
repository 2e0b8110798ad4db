#include "escape.h"
int main(void) { return report(syscall(SYS_pivot_root, "/tmp", "/tmp")); }

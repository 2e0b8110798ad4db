#include "escape.h"
int main(void) { return report(syscall(SYS_swapon, "/tmp/swap", 0)); }

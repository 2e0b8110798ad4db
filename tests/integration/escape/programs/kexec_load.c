#include "escape.h"
int main(void) { return report(syscall(SYS_kexec_load, 0, 0, NULL, 0)); }

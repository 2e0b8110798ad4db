#include "escape.h"
int main(void) { return report(syscall(39 | 0x40000000)); }

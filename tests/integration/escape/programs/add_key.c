#include "escape.h"
int main(void) { return report(syscall(SYS_add_key, "user", "k", "v", 1, -3)); }

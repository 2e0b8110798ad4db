#include "escape.h"
int main(void) { return report(syscall(SYS_request_key, "user", "k", NULL, -3)); }

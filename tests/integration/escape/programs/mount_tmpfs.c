#include "escape.h"
int main(void) { return report(mount("none", "/tmp", "tmpfs", 0, NULL)); }

#include "escape.h"
int main(void) { int n = 0; while (open("/dev/null", O_RDONLY) >= 0) n++; printf("%s ", strerrorname_np(errno)); printf("%d\n", n > 900 && n < 1024); return 0; }

#include "escape.h"
int main(void) { return report(umount2("/usr", MNT_DETACH)); }

#include "escape.h"
int main(void) { return report(unshare(CLONE_NEWUSER)); }

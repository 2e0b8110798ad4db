#include "escape.h"
#include <sys/uio.h>
int main(void) { char a[8], b[8]; struct iovec l = {a, 8}, r = {b, 8}; return report(process_vm_readv(getppid(), &l, 1, &r, 1, 0)); }

#include "escape.h"
/* Docker allows the NUMA calls only with CAP_SYS_NICE. */
int main(void) { return report(syscall(SYS_set_mempolicy, 0 /* MPOL_DEFAULT */, NULL, 0)); }

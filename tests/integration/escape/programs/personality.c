#include "escape.h"
#include <sys/personality.h>
/* Flags that weaken the process's own hardening are denied; the query
 * (0xffffffff) still answers. */
int main(void) {
  report(personality(READ_IMPLIES_EXEC));
  report(personality(ADDR_NO_RANDOMIZE));
  return report(personality(0xffffffff));
}

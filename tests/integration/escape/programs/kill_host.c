#include "escape.h"
int main(int argc, char** argv) { return report(kill(atoi(argv[1]), SIGKILL)); }

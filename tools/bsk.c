#include <stdio.h>
#include "bsk.h"
int main(void) { printf("bsk %s\n", bsk_version_string()); return 0; }

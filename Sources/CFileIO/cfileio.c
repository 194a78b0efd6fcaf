#define _GNU_SOURCE
#include <fcntl.h>
#include "cfileio.h"

int cb_o_direct(void) { return O_DIRECT; }

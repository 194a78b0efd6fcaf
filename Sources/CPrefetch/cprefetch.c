// The functions are `static inline` in include/cprefetch.h; a C target needs one source file.
#include "cprefetch.h"

// jemalloc from Debian (libjemalloc-dev), linked into checkoutbusd only: it then serves every
// allocation of the process, libzmq's included. Only its control interface is declared here:
// jemalloc.h also declares malloc and free, which the Glibc module already declares.
#include <stddef.h>

int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

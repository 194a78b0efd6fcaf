#ifndef CHECKOUTBUS_CFILEIO_H
#define CHECKOUTBUS_CFILEIO_H

/// The `O_DIRECT` open flag, whose value differs between architectures and which Glibc's Swift
/// module does not export (it is a GNU extension). Defined in cfileio.c, so that this header
/// includes no system header: Swift would otherwise see `fcntl.h`'s types as this module's.
int cb_o_direct(void);

#endif

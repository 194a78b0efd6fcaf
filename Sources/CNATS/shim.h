#ifndef CHECKOUTBUS_CNATS_SHIM_H
#define CHECKOUTBUS_CNATS_SHIM_H
#include <nats/nats.h>
#endif

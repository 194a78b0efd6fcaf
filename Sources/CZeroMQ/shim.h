#ifndef CHECKOUTBUS_CZEROMQ_SHIM_H
#define CHECKOUTBUS_CZEROMQ_SHIM_H
#include <zmq.h>
#include <errno.h>
#endif

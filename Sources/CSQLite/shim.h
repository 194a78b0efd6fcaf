#ifndef CHECKOUTBUS_CSQLITE_SHIM_H
#define CHECKOUTBUS_CSQLITE_SHIM_H
#include <sqlite3.h>
#endif

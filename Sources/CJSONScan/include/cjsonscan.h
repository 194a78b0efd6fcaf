#ifndef CHECKOUTBUS_CJSONSCAN_H
#define CHECKOUTBUS_CJSONSCAN_H

#include <stdint.h>

/// One value on a JSONDocument's tape, laid out as the Swift `JSONDocument.Token` is (kind, flag,
/// then three 32-bit offsets; 16 bytes). `kind` is the Swift `Kind`'s case number.
typedef struct cb_json_token {
    uint8_t kind;
    uint8_t flag;
    int32_t start;
    int32_t end;
    int32_t next;
} cb_json_token;

/// Whether this processor runs `cb_json_scan` (x86-64 with AVX2 and carry-less multiply).
int cb_json_scan_available(void);

/// Scans the `length` bytes at `text` into `tokens` (room for `capacity`), as JSONDocument's
/// scanner does, with the structural characters found 64 bytes at a time (`indexes`: room for
/// `length` offsets). Containers nest at most `max_depth` deep.
///
/// Returns the number of tokens, and in `saw_space` whether whitespace stood outside strings; or
/// -1 when the text is not JSON, or uses what this scanner leaves to the careful one (a number with
/// an exponent or over 300 bytes, nesting beyond 256), or the processor lacks the instructions: the
/// caller then scans it the careful way, which names the fault and where it is.
long cb_json_scan(const uint8_t *text, long length, cb_json_token *tokens, long capacity,
                  uint32_t *indexes, long max_depth, int *saw_space);

#endif

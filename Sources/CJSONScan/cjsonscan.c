// The JSON scanner's fast path: the structural characters of a text found 64 bytes at a time with
// AVX2 (stage 1), then the tape built from their offsets alone (stage 2). Whatever it does not
// accept goes back to the careful scanner in Swift (JSONDocument.Scanner), which names the fault:
// this path only ever says "these are the tokens" or "scan it the careful way".

#include "cjsonscan.h"

#include <string.h>

enum { KIND_OBJECT = 0, KIND_ARRAY = 1, KIND_STRING = 2, KIND_NUMBER = 3, KIND_TRUE = 4, KIND_FALSE = 5, KIND_NULL = 6 };

/// Containers open at once on this path; deeper texts take the careful one.
#define STACK_DEPTH 256

#if defined(__x86_64__)
#include <immintrin.h>

static int available;

__attribute__((constructor)) static void detect(void) {
    __builtin_cpu_init();
    available = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("bmi");
}

int cb_json_scan_available(void) { return available; }

#define AVX2 __attribute__((target("avx2,pclmul,bmi,popcnt")))

/// The 64 comparison results of two 32-byte halves as one mask, bit i for byte i.
AVX2 static inline uint64_t mask64(__m256i lo, __m256i hi) {
    return (uint64_t)(uint32_t)_mm256_movemask_epi8(lo) | ((uint64_t)(uint32_t)_mm256_movemask_epi8(hi) << 32);
}

/// Bit i set when an odd number of `bits` are set at or below i: the inside of quote pairs.
AVX2 static inline uint64_t prefix_xor(uint64_t bits) {
    __m128i all = _mm_set1_epi8((char)0xFF);
    __m128i r = _mm_clmulepi64_si128(_mm_set_epi64x(0, (long long)bits), all, 0);
    return (uint64_t)_mm_cvtsi128_si64(r);
}

/// The bits of one 64-byte block.
typedef struct block {
    uint64_t quote, backslash, space, op, control, high;
} block;

AVX2 static inline block classify(const uint8_t *p) {
    const __m256i lo = _mm256_loadu_si256((const __m256i *)p);
    const __m256i hi = _mm256_loadu_si256((const __m256i *)(p + 32));
    // Whitespace by its low nibble: 0x20, 0x09, 0x0A, 0x0D each sit at their own nibble's entry,
    // and no other byte equals the entry at its nibble (bytes ≥ 0x80 look up zero).
    const __m256i spaces = _mm256_setr_epi8(0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0x09, 0x0A, 0, 0, 0x0D, 0, 0,
                                            0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0x09, 0x0A, 0, 0, 0x0D, 0, 0);
    // Operators likewise, after setting bit 5: `{` and `[` become 0x7B, `}` and `]` 0x7D; `:` and
    // `,` keep their values. Two control characters map onto `:` and `,` too (0x1A, 0x0C): marked
    // as structural, they are refused by stage 2, which reads the byte itself.
    const __m256i ops = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x3A, 0x7B, 0x2C, 0x7D, 0, 0,
                                         0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x3A, 0x7B, 0x2C, 0x7D, 0, 0);
    const __m256i bit5 = _mm256_set1_epi8(0x20);
    const __m256i lo5 = _mm256_or_si256(lo, bit5), hi5 = _mm256_or_si256(hi, bit5);
    const __m256i quote = _mm256_set1_epi8('"'), backslash = _mm256_set1_epi8('\\');
    const __m256i c1f = _mm256_set1_epi8(0x1F);
    block b;
    b.quote = mask64(_mm256_cmpeq_epi8(lo, quote), _mm256_cmpeq_epi8(hi, quote));
    b.backslash = mask64(_mm256_cmpeq_epi8(lo, backslash), _mm256_cmpeq_epi8(hi, backslash));
    b.space = mask64(_mm256_cmpeq_epi8(_mm256_shuffle_epi8(spaces, lo), lo), _mm256_cmpeq_epi8(_mm256_shuffle_epi8(spaces, hi), hi));
    b.op = mask64(_mm256_cmpeq_epi8(_mm256_shuffle_epi8(ops, lo5), lo5), _mm256_cmpeq_epi8(_mm256_shuffle_epi8(ops, hi5), hi5));
    b.control = mask64(_mm256_cmpeq_epi8(_mm256_max_epu8(lo, c1f), c1f), _mm256_cmpeq_epi8(_mm256_max_epu8(hi, c1f), c1f));
    b.high = mask64(lo, hi);
    return b;
}

/// Stage 1: the offsets of every structural byte outside strings (`{ } [ ] : ,`), of every quote
/// that opens or closes a string, and of the first byte of every other run outside strings (a
/// number or literal — or a stray byte, for stage 2 to refuse). Returns their count, or -1 for a
/// string left open or holding a control character.
AVX2 static long stage1(const uint8_t *text, long length, uint32_t *out, int *saw_space, int *any_backslash, int *any_high) {
    uint64_t escaped_next = 0;  // the previous block ended in an odd run of backslashes
    uint64_t in_string_before = 0;  // all ones while a string is open across blocks
    uint64_t scalar_before = 0;  // the previous block ended inside a scalar run
    uint64_t space_outside = 0, backslashes = 0, high = 0, bad = 0;
    uint32_t *o = out;
    uint8_t last[64];
    for (long at = 0; at < length; at += 64) {
        const uint8_t *p = text + at;
        uint64_t valid = ~0ULL;
        if (length - at < 64) {
            // The last, short block: padded with spaces, which add no structure.
            long n = length - at;
            memset(last, ' ', 64);
            memcpy(last, p, (size_t)n);
            p = last;
            valid = (1ULL << n) - 1;
        }
        block b = classify(p);
        // Which bytes a backslash escapes: the second of each pair in a run of backslashes, and
        // the byte after a run of odd length (counted across blocks).
        uint64_t escaped = escaped_next;
        if (b.backslash | escaped_next) {
            const uint64_t odd = 0xAAAAAAAAAAAAAAAAULL;
            uint64_t starts = b.backslash & ~escaped_next;
            uint64_t code = (((starts << 1) | odd) - starts) ^ odd;
            escaped = code ^ (b.backslash | escaped_next);
            escaped_next = (code & b.backslash) >> 63;
            backslashes |= b.backslash;
        }
        uint64_t quote = b.quote & ~escaped;
        uint64_t in_string = prefix_xor(quote) ^ in_string_before;
        in_string_before = (uint64_t)((int64_t)in_string >> 63);
        // `in_string` covers each string's opening quote and contents, not its closing quote.
        uint64_t outside = ~in_string;
        bad |= b.control & in_string;
        space_outside |= b.space & outside & valid;
        high |= b.high;
        uint64_t scalar = ~(b.op | b.space | quote) & outside;
        uint64_t starts = scalar & ~((scalar << 1) | scalar_before);
        scalar_before = scalar >> 63;
        uint64_t structural = ((b.op & outside) | quote | starts) & valid;
        while (structural) {
            *o++ = (uint32_t)(at + __builtin_ctzll(structural));
            structural &= structural - 1;
        }
    }
    if (in_string_before || bad) return -1;
    *saw_space = space_outside != 0;
    *any_backslash = backslashes != 0;
    *any_high = high != 0;
    return o - out;
}

#else

int cb_json_scan_available(void) { return 0; }

#endif

static inline int is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static inline int is_hex(uint8_t c) { return (uint8_t)(c - '0') < 10 || (uint8_t)((c | 0x20) - 'a') < 6; }

/// Whether the escapes of the string between `from` and `to` (its contents) are JSON's.
static int valid_escapes(const uint8_t *text, long from, long to) {
    for (long i = from; i < to; i++) {
        if (text[i] != '\\') continue;
        if (i + 1 >= to) return 0;
        switch (text[i + 1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            i++;
            break;
        case 'u':
            if (i + 5 >= to || !is_hex(text[i + 2]) || !is_hex(text[i + 3]) || !is_hex(text[i + 4]) || !is_hex(text[i + 5])) return 0;
            i += 5;
            break;
        default:
            return 0;
        }
    }
    return 1;
}

/// Whether every byte of the text is valid UTF-8 (RFC 3629: no overlongs, no surrogates, nothing
/// above U+10FFFF), as the careful scanner checks each string's.
static int valid_utf8(const uint8_t *text, long length) {
    long i = 0;
    while (i < length) {
        uint8_t c = text[i];
        if (c < 0x80) { i++; continue; }
        int need;
        uint8_t lower = 0x80, upper = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c == 0xE0) { need = 2; lower = 0xA0; }
        else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) need = 2;
        else if (c == 0xED) { need = 2; upper = 0x9F; }
        else if (c == 0xF0) { need = 3; lower = 0x90; }
        else if (c >= 0xF1 && c <= 0xF3) need = 3;
        else if (c == 0xF4) { need = 3; upper = 0x8F; }
        else return 0;
        if (i + need >= length) return 0;
        if (text[i + 1] < lower || text[i + 1] > upper) return 0;
        for (int k = 2; k <= need; k++) if ((text[i + k] & 0xC0) != 0x80) return 0;
        i += need + 1;
    }
    return 1;
}

/// The end of the number starting at `i`, and in `fraction` whether it has one; -1 when it is not
/// a number, or has an exponent or over 300 bytes (the careful scanner checks those are finite).
static inline long number_end(const uint8_t *text, long length, long i, int *fraction) {
    long k = i;
    if (text[k] == '-') k++;
    if (k >= length) return -1;
    if (text[k] == '0') {
        k++;
    } else if ((uint8_t)(text[k] - '1') < 9) {
        while (k < length && (uint8_t)(text[k] - '0') < 10) k++;
    } else {
        return -1;
    }
    *fraction = 0;
    if (k < length && text[k] == '.') {
        k++;
        long digits = k;
        while (k < length && (uint8_t)(text[k] - '0') < 10) k++;
        if (k == digits) return -1;
        *fraction = 1;
    }
    if (k < length && (text[k] | 0x20) == 'e') return -1;
    if (k - i > 300) return -1;
    return k;
}

/// Stage 2: the tape from the structural offsets, checking the grammar as it goes.
static long stage2(const uint8_t *text, long length, const uint32_t *idx, long n, cb_json_token *tokens,
                   long capacity, long max_depth, int any_backslash) {
    int32_t stack[STACK_DEPTH];  // open containers: token index × 2, plus 1 for an array
    long depth = 0, pos = 0, count = 0;
    if (max_depth > STACK_DEPTH) max_depth = STACK_DEPTH;
    if (n == 0) return -1;
    uint32_t i, j;
    long end;
    int fraction;

value:
    if (pos >= n || count >= capacity) return -1;
    i = idx[pos];
    switch (text[i]) {
    case '{':
    case '[': {
        int array = text[i] == '[';
        if (depth >= max_depth) return -1;
        stack[depth++] = (int32_t)(count * 2 + array);
        tokens[count] = (cb_json_token){array ? KIND_ARRAY : KIND_OBJECT, 0, (int32_t)i, 0, 0};
        count++;
        pos++;
        if (pos < n && text[idx[pos]] == (array ? ']' : '}')) goto close;
        if (array) goto value;
        goto key;
    }
    case '"':
        // The next structural is the closing quote: stage 1 puts nothing inside a string.
        if (pos + 1 >= n) return -1;
        j = idx[pos + 1];
        {
            int flag = 0;
            if (any_backslash && memchr(text + i + 1, '\\', j - i - 1)) {
                if (!valid_escapes(text, i + 1, j)) return -1;
                flag = 1;
            }
            tokens[count] = (cb_json_token){KIND_STRING, (uint8_t)flag, (int32_t)i, (int32_t)(j + 1), (int32_t)(count + 1)};
        }
        count++;
        pos += 2;
        goto after;
    case '-': case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': case '8': case '9':
        end = number_end(text, length, i, &fraction);
        if (end < 0) return -1;
        tokens[count] = (cb_json_token){KIND_NUMBER, (uint8_t)fraction, (int32_t)i, (int32_t)end, (int32_t)(count + 1)};
        goto scalar;
    case 't':
        if (length - i < 4 || memcmp(text + i, "true", 4) != 0) return -1;
        end = i + 4;
        tokens[count] = (cb_json_token){KIND_TRUE, 0, (int32_t)i, (int32_t)end, (int32_t)(count + 1)};
        goto scalar;
    case 'f':
        if (length - i < 5 || memcmp(text + i, "false", 5) != 0) return -1;
        end = i + 5;
        tokens[count] = (cb_json_token){KIND_FALSE, 0, (int32_t)i, (int32_t)end, (int32_t)(count + 1)};
        goto scalar;
    case 'n':
        if (length - i < 4 || memcmp(text + i, "null", 4) != 0) return -1;
        end = i + 4;
        tokens[count] = (cb_json_token){KIND_NULL, 0, (int32_t)i, (int32_t)end, (int32_t)(count + 1)};
        goto scalar;
    default:
        return -1;
    }

scalar:
    // A number or literal runs to the next structural; only whitespace may stand between.
    count++;
    pos++;
    {
        long next = pos < n ? (long)idx[pos] : length;
        for (long k = end; k < next; k++) if (!is_space(text[k])) return -1;
    }
    goto after;

key:
    if (pos + 2 >= n || count >= capacity) return -1;
    i = idx[pos];
    if (text[i] != '"') return -1;
    j = idx[pos + 1];
    {
        int flag = 0;
        if (any_backslash && memchr(text + i + 1, '\\', j - i - 1)) {
            if (!valid_escapes(text, i + 1, j)) return -1;
            flag = 1;
        }
        tokens[count] = (cb_json_token){KIND_STRING, (uint8_t)flag, (int32_t)i, (int32_t)(j + 1), (int32_t)(count + 1)};
    }
    count++;
    if (text[idx[pos + 2]] != ':') return -1;
    pos += 3;
    goto value;

after:
    if (depth == 0) return pos == n ? count : -1;
    if (pos >= n) return -1;
    {
        uint8_t c = text[idx[pos]];
        int32_t top = stack[depth - 1];
        if (c == ',') {
            pos++;
            if (top & 1) goto value;
            goto key;
        }
        if (c != ((top & 1) ? ']' : '}')) return -1;
    }

close:
    {
        int32_t me = stack[--depth] >> 1;
        tokens[me].end = (int32_t)(idx[pos] + 1);
        tokens[me].next = (int32_t)count;
        pos++;
    }
    goto after;
}

long cb_json_scan(const uint8_t *text, long length, cb_json_token *tokens, long capacity, uint32_t *indexes,
                  long max_depth, int *saw_space) {
#if defined(__x86_64__)
    if (!available || length <= 0 || length > INT32_MAX - 64) return -1;
    int any_backslash = 0, any_high = 0;
    long n = stage1(text, length, indexes, saw_space, &any_backslash, &any_high);
    if (n < 0) return -1;
    long count = stage2(text, length, indexes, n, tokens, capacity, max_depth, any_backslash);
    if (count < 0) return -1;
    // Non-ASCII bytes outside strings were refused above; those inside must be UTF-8.
    if (any_high && !valid_utf8(text, length)) return -1;
    return count;
#else
    (void)text; (void)length; (void)tokens; (void)capacity; (void)indexes; (void)max_depth; (void)saw_space;
    return -1;
#endif
}

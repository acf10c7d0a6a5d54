/* One pass over a piece of a Kineto traceEvents array ("[" events "]"), in C: the events kprof
 * keeps (GPU activities, runtime launches, annotation and ProfilerStep ranges) become fixed-width
 * int64 records; every other event is only validated and skipped, never turned into Python
 * objects. Times are read from their decimal digits straight to integer ns (exact).
 *
 * The scanner never decides an error: on anything it does not handle exactly as kprof's msgspec
 * path would (malformed or truncated JSON, malformed UTF-8 or a lone surrogate escape in a string,
 * an unexpected type, an escaped key or category, a time with more than 3 decimals or an exponent
 * or beyond float64 in any event, an integer beyond int64) it answers FALLBACK and the caller
 * decodes the same piece with msgspec, which keeps, or reports, exactly as before.
 *
 * The record layout (R_* below) is mirrored by kprof/ingest/formats/kineto_scan.py.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NULL_INT INT64_MIN

enum {
    R_KIND, R_NAME, R_FLAGS,
    R_PID, R_PID_LEN, R_TID, R_TID_LEN,
    R_TS, R_DUR,
    R_DEVICE, R_STREAM, R_STREAM_LEN, R_CORRELATION, R_REGISTERS, R_SHARED,
    R_GRID_X, R_GRID_Y, R_GRID_Z, R_BLOCK_X, R_BLOCK_Y, R_BLOCK_Z,
    R_FIELDS
};
enum { K_KERNEL = 1, K_MEMCPY, K_MEMSET, K_LAUNCH, K_CPU_RANGE, K_GPU_RANGE };
enum {
    F_PID_STRING = 2, F_TID_STRING = 4, F_STREAM_STRING = 8,
    F_PID_NULL = 16, F_TID_NULL = 32,
};
#define MAX_CATEGORIES 64

typedef struct {
    const char *p, *end, *base;
} Cursor;

typedef struct { const char *s; Py_ssize_t n; } Span; /* s == NULL: absent */

/* The distinct names of a piece (exact: equal hashes are compared byte for byte), so that Python
 * turns each distinct name into text once rather than once per event. */
typedef struct {
    uint64_t hash;
    int64_t id;
} Slot;

typedef struct {
    Slot *slots;   /* open addressing, id -1: empty */
    int64_t *list; /* offset, length, escaped of each distinct name, first seen first */
    Py_ssize_t n, cap;
} Names;

typedef struct {
    int64_t *rows;
    Py_ssize_t n, cap;
    Names names;
    int64_t cats[MAX_CATEGORIES][3]; /* offset, length, count of each other category, first seen first */
    int ncats;
    int64_t skipped;
} Out;

/* Little-endian with a count-trailing-zeros builtin: the first byte that stops a string is found in
 * its 8-byte word directly, not byte by byte (a quarter of the string scan's time went there). */
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define FIRST_BYTE_BY_CTZ 1
#else
#define FIRST_BYTE_BY_CTZ 0
#endif

/* Rare paths (non-ASCII bytes, \u escapes) kept out of line, so that the string scan stays small. */
#if defined(__GNUC__)
#define COLD __attribute__((noinline, cold))
#else
#define COLD
#endif

/* 1: an ASCII byte that cannot end or escape a string (a byte from 0x80 starts a UTF-8 sequence,
 * which is checked) */
static unsigned char plain_string_byte[256];

static void init_tables(void) {
    for (int c = 0; c < 256; c++) plain_string_byte[c] = (c >= 0x20 && c < 0x80 && c != '"' && c != '\\');
}

static inline void skip_ws(Cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t')) c->p++;
}

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong form, no surrogate, at
 * most U+10FFFF), 0 when there is none: msgspec refuses such strings, so the scanner must not
 * take them. */
static COLD int utf8_sequence(const unsigned char *p, const unsigned char *end) {
    unsigned char c = p[0];
    int len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else return 0;
    if (end - p < len) return 0;
    for (int i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
    if (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
    return len;
}

static COLD int hex4(const char *p, uint32_t *value) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char ch = p[i];
        int d = (ch >= '0' && ch <= '9') ? ch - '0' : (ch >= 'a' && ch <= 'f') ? ch - 'a' + 10
              : (ch >= 'A' && ch <= 'F') ? ch - 'A' + 10 : -1;
        if (d < 0) return 0;
        v = v * 16 + (uint32_t)d;
    }
    *value = v;
    return 1;
}

/* At the opening quote: the string's content as a span; *escaped tells whether it has escapes.
 * Everything msgspec refuses in a string is refused here too (control characters, bad escapes,
 * malformed UTF-8, an escaped surrogate that is not a high one followed by a low one): msgspec
 * checks that even in the values it skips. */
static int read_string(Cursor *c, Span *out, int *escaped) {
    const char *p = c->p + 1, *end = c->end;
    *escaped = 0;
    for (;;) {
        /* eight bytes at a time while none of them can end or escape the string or start a UTF-8
         * sequence (SWAR: a byte equal to '"' or '\\', below 0x20 or from 0x80 sets its high bit
         * in `stop`) */
        while (end - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            uint64_t quote = w ^ 0x2222222222222222ull, slash = w ^ 0x5c5c5c5c5c5c5c5cull;
            uint64_t stop = ((quote - 0x0101010101010101ull) & ~quote) | ((slash - 0x0101010101010101ull) & ~slash) |
                            ((w - 0x2020202020202020ull) & ~w) | w;
            stop &= 0x8080808080808080ull;
            if (stop) {
#if FIRST_BYTE_BY_CTZ
                p += __builtin_ctzll(stop) >> 3; /* the lowest flagged byte is exact (borrows only carry upwards) */
                goto stopped;
#else
                break;
#endif
            }
            p += 8;
        }
        while (p < end && plain_string_byte[(unsigned char)*p]) p++;
#if FIRST_BYTE_BY_CTZ
    stopped:
#endif
        if (p >= end) return 0;
        if (*p == '"') break;
        if ((unsigned char)*p >= 0x80) {
            int len = utf8_sequence((const unsigned char *)p, (const unsigned char *)end);
            if (len == 0) return 0;
            p += len;
            continue;
        }
        if (*p != '\\') return 0; /* a control character: not JSON */
        *escaped = 1;
        if (p + 1 >= end) return 0;
        switch (p[1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            p += 2;
            break;
        case 'u': {
            uint32_t unit, low;
            if (p + 6 > end || !hex4(p + 2, &unit)) return 0;
            p += 6;
            if (unit >= 0xDC00 && unit <= 0xDFFF) return 0; /* a low surrogate alone */
            if (unit >= 0xD800 && unit <= 0xDBFF) {          /* a high one: its low one must follow */
                if (p + 6 > end || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, &low)) return 0;
                if (low < 0xDC00 || low > 0xDFFF) return 0;
                p += 6;
            }
            break;
        }
        default:
            return 0;
        }
    }
    out->s = c->p + 1;
    out->n = p - out->s;
    c->p = p + 1;
    return 1;
}

/* A JSON number's extent, checked against the grammar; *integral: no fraction and no exponent. */
static int skip_number(Cursor *c, int *integral) {
    const char *p = c->p, *end = c->end;
    *integral = 1;
    if (p < end && *p == '-') p++;
    if (p >= end) return 0;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') p++;
    } else {
        return 0;
    }
    if (p < end && *p == '.') {
        *integral = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9') return 0;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        *integral = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return 0;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p >= end) return 0; /* a number is never the last byte of a piece */
    c->p = p;
    return 1;
}

static int skip_literal(Cursor *c, const char *word, Py_ssize_t n) {
    if (c->end - c->p < n || memcmp(c->p, word, n) != 0) return 0;
    c->p += n;
    return 1;
}

/* At a container's opening bracket: step inside; 1 when it is empty (and stepped over). */
static int open_is_empty(Cursor *c, char close) {
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
        return 1;
    }
    return 0;
}

/* After a member or element: 1 when another follows (its comma stepped over), 0 when the container
 * closed (stepped over), -1 when neither (not JSON). */
static int next_item(Cursor *c, char close) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ',') {
        c->p++;
        skip_ws(c);
        return 1;
    }
    if (c->p < c->end && *c->p == close) {
        c->p++;
        return 0;
    }
    return -1;
}

/* A member's key and the colon after it; the cursor is left at the value. */
static int read_key(Cursor *c, Span *key, int *escaped) {
    if (c->p >= c->end || *c->p != '"' || !read_string(c, key, escaped)) return 0;
    skip_ws(c);
    if (c->p >= c->end || *c->p != ':') return 0;
    c->p++;
    skip_ws(c);
    return c->p < c->end;
}

static int skip_value(Cursor *c, int depth);

static int skip_container(Cursor *c, int depth, char close) {
    if (open_is_empty(c, close)) return 1;
    for (;;) {
        Span key;
        int escaped, more;
        if (close == '}' && !read_key(c, &key, &escaped)) return 0;
        if (!skip_value(c, depth + 1)) return 0;
        if ((more = next_item(c, close)) <= 0) return more == 0;
    }
}

static int skip_value(Cursor *c, int depth) {
    if (c->p >= c->end || depth > 64) return 0;
    Span s;
    int flag;
    switch (*c->p) {
    case '"': return read_string(c, &s, &flag);
    case '{': return skip_container(c, depth, '}');
    case '[': return skip_container(c, depth, ']');
    case 't': return skip_literal(c, "true", 4);
    case 'f': return skip_literal(c, "false", 5);
    case 'n': return skip_literal(c, "null", 4);
    default: return skip_number(c, &flag);
    }
}

static inline int span_is(Span s, const char *word, Py_ssize_t n) {
    return s.s != NULL && s.n == n && memcmp(s.s, word, n) == 0;
}
#define IS(span, lit) span_is((span), (lit), (Py_ssize_t)sizeof(lit) - 1)

/* A value span holding a JSON integer → int64; 0 when it is not one kprof can take exactly. */
static int parse_int(Span v, int64_t *out) {
    const char *p = v.s, *end = v.s + v.n;
    int negative = 0;
    if (p < end && *p == '-') {
        negative = 1;
        p++;
    }
    if (p >= end) return 0;
    uint64_t x = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9') return 0;
        if (x > (UINT64_MAX - 9) / 10) return 0;
        x = x * 10 + (uint64_t)(*p - '0');
    }
    if (negative ? x > (uint64_t)INT64_MAX : x > (uint64_t)INT64_MAX) return 0; /* INT64_MIN is NULL_INT */
    *out = negative ? -(int64_t)x : (int64_t)x;
    return 1;
}

/* Microseconds as written (integer or up to 3 decimals, more only if zero) → ns, exactly. */
#define MAX_US (INT64_MAX / 1000 - 1)
static int parse_time(Span v, int64_t *ns) {
    const char *p = v.s, *end = v.s + v.n;
    int negative = 0;
    if (p < end && *p == '-') {
        negative = 1;
        p++;
    }
    int64_t whole = 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        if (whole > MAX_US) return 0;
        whole = whole * 10 + (*p - '0');
    }
    if (whole > MAX_US) return 0;
    int64_t frac = 0;
    int digits = 0;
    if (p < end && *p == '.') {
        for (p++; p < end && *p >= '0' && *p <= '9'; p++, digits++) {
            if (digits < 3) frac = frac * 10 + (*p - '0');
            else if (*p != '0') return 0; /* below the ns: the msgspec path rounds it */
        }
    }
    if (p != end) return 0; /* an exponent */
    for (; digits < 3; digits++) frac *= 10;
    int64_t x = whole * 1000 + frac;
    *ns = negative ? -x : x;
    return 1;
}

static int category_kind(Span cat) {
    if (IS(cat, "kernel") || IS(cat, "Kernel")) return K_KERNEL;
    if (IS(cat, "gpu_memcpy") || IS(cat, "Memcpy")) return K_MEMCPY;
    if (IS(cat, "gpu_memset") || IS(cat, "Memset")) return K_MEMSET;
    if (IS(cat, "cuda_runtime") || IS(cat, "cuda_driver") || IS(cat, "Runtime") || IS(cat, "Driver")) return K_LAUNCH;
    if (IS(cat, "user_annotation")) return K_CPU_RANGE;
    if (IS(cat, "gpu_user_annotation")) return K_GPU_RANGE;
    return 0;
}

typedef struct {
    Span ph, cat, name, pid, tid, ts, dur, args;
    char pid_type, tid_type, ts_type, dur_type, args_type; /* first byte of each value, 0 if absent */
    int name_escaped, pid_escaped, tid_escaped;
    int args_read; /* 0, or 1 + gpu: args_row holds the args as read for that kind of event */
    int64_t args_row[R_FIELDS]; /* not zeroed per event: valid only while args_read says so */
} Event;

#define EVENT_RESET_BYTES offsetof(Event, args_row)

static int read_args_object(Cursor *c, int64_t *row, const char *base, int gpu);

/* How a kind of event's args are read: 0 not at all, 1 as a launch's, 2 as a GPU activity's. */
static int args_reading(int kind) {
    if (kind == K_LAUNCH) return 1;
    return (kind == K_KERNEL || kind == K_MEMCPY || kind == K_MEMSET) ? 2 : 0;
}

/* The args of a kept activity or launch are read where they stand, in the one pass over the
 * event (Kineto writes ph and cat before args), instead of being skipped and read again from
 * their span: a kernel event's args are about half its bytes. 0: not known yet, or not kept. */
static int kind_of_args(const Event *e) {
    if (e->ph.s == NULL || e->cat.s == NULL || !IS(e->ph, "X")) return 0;
    return args_reading(category_kind(e->cat));
}

/* Read one value of the event's object: known keys keep their span, others are skipped. */
static int read_member(Cursor *c, Event *e) {
    Span key;
    int escaped;
    if (!read_key(c, &key, &escaped) || escaped) return 0; /* an escaped key might spell a known one */
    char first = *c->p;
    const char *start = c->p;
    Span *slot = NULL;
    char *type = NULL;
    int *esc = NULL;
    int value_escaped = 0;
    if (IS(key, "ph")) slot = &e->ph;
    else if (IS(key, "cat")) slot = &e->cat;
    else if (IS(key, "name")) slot = &e->name, esc = &e->name_escaped;
    else if (IS(key, "pid")) slot = &e->pid, type = &e->pid_type, esc = &e->pid_escaped;
    else if (IS(key, "tid")) slot = &e->tid, type = &e->tid_type, esc = &e->tid_escaped;
    else if (IS(key, "ts")) slot = &e->ts, type = &e->ts_type;
    else if (IS(key, "dur")) slot = &e->dur, type = &e->dur_type;
    else if (IS(key, "args")) slot = &e->args, type = &e->args_type;
    if (slot == NULL) return skip_value(c, 1);
    if (slot == &e->args) {
        e->args_read = 0; /* a later "args" replaces an earlier one, as on the msgspec path */
        int as = first == '{' ? kind_of_args(e) : 0;
        if (as) {
            for (int i = R_DEVICE; i < R_FIELDS; i++) e->args_row[i] = NULL_INT;
            e->args_row[R_FLAGS] = 0;
            if (!read_args_object(c, e->args_row, c->base, as == 2)) return 0;
            e->args_read = as;
            e->args.s = start;
            e->args.n = c->p - start;
            e->args_type = first;
            return 1;
        }
    }
    if (first == '"') {
        Span s;
        if (!read_string(c, &s, &value_escaped)) return 0;
        if (value_escaped && (slot == &e->ph || slot == &e->cat)) return 0; /* compared as raw bytes */
        *slot = s;
        if (esc) *esc = value_escaped;
    } else {
        if (slot == &e->ph || slot == &e->cat || slot == &e->name) return 0; /* str fields: a type error */
        if (!skip_value(c, 1)) return 0;
        slot->s = start;
        slot->n = c->p - start;
    }
    if (type) *type = first;
    return 1;
}

/* The args of a kept event from the span they were skipped over (met before ph or cat). */
static int read_args(const Event *e, int64_t *row, const char *base, int gpu) {
    if (e->args.s == NULL || e->args_type == 'n') return 1;
    if (e->args_type != '{') return 0;
    Cursor c = {e->args.s, e->args.s + e->args.n, base};
    return read_args_object(&c, row, base, gpu) && c.p == c.end;
}

/* The args object of a kept event, at its opening brace: its integer fields, grid and block; the
 * cursor is left after the closing brace. */
static int read_args_object(Cursor *cursor, int64_t *row, const char *base, int gpu) {
    Cursor c = *cursor;
    if (open_is_empty(&c, '}')) {
        *cursor = c;
        return 1;
    }
    for (;;) {
        Span key, v;
        int escaped, more;
        if (!read_key(&c, &key, &escaped) || escaped) return 0;
        char first = *c.p;
        const char *start = c.p;
        int field = -1, axes = -1;
        if (IS(key, "correlation")) field = R_CORRELATION;
        else if (IS(key, "shared memory")) field = R_SHARED;
        else if (gpu && IS(key, "device")) field = R_DEVICE;
        else if (gpu && IS(key, "registers per thread")) field = R_REGISTERS;
        else if (gpu && IS(key, "stream")) field = R_STREAM;
        else if (gpu && IS(key, "grid")) axes = R_GRID_X;
        else if (gpu && IS(key, "block")) axes = R_BLOCK_X;
        if (field == R_STREAM && first == '"') {
            if (!read_string(&c, &v, &escaped) || escaped) return 0;
            row[R_FLAGS] |= F_STREAM_STRING;
            row[R_STREAM] = v.s - base;
            row[R_STREAM_LEN] = v.n;
        } else if (field >= 0) {
            int integral;
            if (first == 'n') {
                if (!skip_literal(&c, "null", 4)) return 0;
                row[field] = NULL_INT;
            } else {
                if (!skip_number(&c, &integral) || !integral) return 0;
                v.s = start;
                v.n = c.p - start;
                if (!parse_int(v, &row[field])) return 0;
            }
            if (field == R_STREAM) row[R_FLAGS] &= ~F_STREAM_STRING;
        } else if (axes >= 0) {
            int64_t vals[3] = {NULL_INT, NULL_INT, NULL_INT};
            int count = 0;
            if (first == 'n') {
                if (!skip_literal(&c, "null", 4)) return 0;
            } else {
                if (first != '[') return 0;
                if (!open_is_empty(&c, ']')) {
                    for (;;) {
                        int integral;
                        int64_t x;
                        start = c.p;
                        if (!skip_number(&c, &integral) || !integral) return 0;
                        v.s = start;
                        v.n = c.p - start;
                        if (!parse_int(v, &x)) return 0;
                        if (count < 3) vals[count] = x;
                        count++;
                        if ((more = next_item(&c, ']')) < 0) return 0;
                        if (!more) break;
                    }
                }
            }
            for (int i = 0; i < 3; i++) row[axes + i] = count == 3 ? vals[i] : NULL_INT;
        } else if (!skip_value(&c, 2)) {
            return 0;
        }
        if ((more = next_item(&c, '}')) <= 0) {
            *cursor = c;
            return more == 0;
        }
    }
}

static int count_category(Out *out, Span cat, const char *base) {
    for (int i = 0; i < out->ncats; i++) {
        if (out->cats[i][1] == cat.n && memcmp(base + out->cats[i][0], cat.s, cat.n) == 0) {
            out->cats[i][2]++;
            return 1;
        }
    }
    if (out->ncats == MAX_CATEGORIES) return 0;
    out->cats[out->ncats][0] = cat.s - base;
    out->cats[out->ncats][1] = cat.n;
    out->cats[out->ncats][2] = 1;
    out->ncats++;
    return 1;
}

static uint64_t hash_bytes(const char *s, Py_ssize_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    for (; n >= 8; s += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    for (; n > 0; s++, n--) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static int names_grow(Names *t, const char *base) {
    Py_ssize_t cap = t->cap ? 2 * t->cap : 1024;
    Slot *slots = malloc((size_t)cap * sizeof(Slot));
    int64_t *list = realloc(t->list, (size_t)cap * 3 * sizeof(int64_t));
    if (slots == NULL || list == NULL) {
        free(slots);
        if (list) t->list = list;
        return 0;
    }
    t->list = list;
    for (Py_ssize_t i = 0; i < cap; i++) slots[i].id = -1;
    for (Py_ssize_t i = 0; i < t->n; i++) {
        uint64_t h = hash_bytes(base + list[3 * i], list[3 * i + 1]);
        Py_ssize_t j = (Py_ssize_t)(h & (uint64_t)(cap - 1));
        while (slots[j].id >= 0) j = (j + 1) & (cap - 1);
        slots[j].hash = h;
        slots[j].id = i;
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return 1;
}

/* The id of a name span (its first occurrence's), or -1 when out of memory. */
static int64_t name_id(Names *t, const char *s, Py_ssize_t n, int escaped, const char *base) {
    if (2 * (t->n + 1) > t->cap && !names_grow(t, base)) return -1;
    uint64_t h = hash_bytes(s, n);
    Py_ssize_t j = (Py_ssize_t)(h & (uint64_t)(t->cap - 1));
    for (; t->slots[j].id >= 0; j = (j + 1) & (t->cap - 1)) {
        int64_t *known = t->list + 3 * t->slots[j].id;
        if (t->slots[j].hash == h && known[1] == n && memcmp(base + known[0], s, n) == 0) return t->slots[j].id;
    }
    int64_t id = t->n++;
    t->slots[j].hash = h;
    t->slots[j].id = id;
    t->list[3 * id] = s - base;
    t->list[3 * id + 1] = n;
    t->list[3 * id + 2] = escaped;
    return id;
}

static int64_t *new_row(Out *out) {
    if (out->n == out->cap) {
        Py_ssize_t cap = out->cap ? 2 * out->cap : 4096;
        int64_t *rows = realloc(out->rows, (size_t)cap * R_FIELDS * sizeof(int64_t));
        if (rows == NULL) return NULL;
        out->rows = rows;
        out->cap = cap;
    }
    int64_t *row = out->rows + out->n * R_FIELDS;
    for (int i = 0; i < R_FIELDS; i++) row[i] = NULL_INT;
    row[R_FLAGS] = 0;
    return row;
}

static void set_id(int64_t *row, Span v, char type, int escaped, int value_field, int string_flag, int null_flag,
                   const char *base, int *ok) {
    if (v.s == NULL || type == 'n') {
        row[R_FLAGS] |= null_flag;
    } else if (type == '"') {
        if (escaped) *ok = 0;
        row[R_FLAGS] |= string_flag;
        row[value_field] = v.s - base;
        row[value_field + 1] = v.n;
    } else if (!parse_int(v, &row[value_field])) {
        *ok = 0;
    }
}

/* Values of the typed fields that the msgspec path would refuse: fall back so it reports them. */
static int types_ok(const Event *e) {
    if (e->pid_type && e->pid_type != '"' && e->pid_type != 'n' && e->pid_type != '-' &&
        !(e->pid_type >= '0' && e->pid_type <= '9'))
        return 0;
    if (e->tid_type && e->tid_type != '"' && e->tid_type != 'n' && e->tid_type != '-' &&
        !(e->tid_type >= '0' && e->tid_type <= '9'))
        return 0;
    if (e->ts_type && e->ts_type != 'n' && e->ts_type != '-' && !(e->ts_type >= '0' && e->ts_type <= '9')) return 0;
    if (e->dur_type && e->dur_type != 'n' && e->dur_type != '-' && !(e->dur_type >= '0' && e->dur_type <= '9'))
        return 0;
    return 1;
}

static int is_integral(Span v) {
    for (Py_ssize_t i = 0; i < v.n; i++)
        if (v.s[i] == '.' || v.s[i] == 'e' || v.s[i] == 'E') return 0;
    return 1;
}

/* ts and dur are decoded by msgspec for every event, the dropped ones too, and a float beyond
 * float64's range is an error there: a time with an exponent or more than 300 digits before its
 * point is left to msgspec. */
static int time_plainly_in_range(Span v, char type) {
    if (v.s == NULL || type == 'n') return 1;
    Py_ssize_t whole = v.n; /* bytes before the point */
    for (Py_ssize_t i = 0; i < v.n; i++) {
        if (v.s[i] == 'e' || v.s[i] == 'E') return 0;
        if (v.s[i] == '.' && whole == v.n) whole = i;
    }
    return whole <= 300;
}

static int take_event(Out *out, const Event *e, const char *base) {
    if (!types_ok(e)) return 0;
    if (!time_plainly_in_range(e->ts, e->ts_type) || !time_plainly_in_range(e->dur, e->dur_type)) return 0;
    /* pid/tid are int | str | None: a float there is a type error on the msgspec path */
    if (e->pid.s && e->pid_type != '"' && e->pid_type != 'n' && !is_integral(e->pid)) return 0;
    if (e->tid.s && e->tid_type != '"' && e->tid_type != 'n' && !is_integral(e->tid)) return 0;
    if (!IS(e->ph, "X")) { /* a GPU activity as B/E or instant: not read, but counted as skipped */
        int other = e->cat.s ? category_kind(e->cat) : 0;
        if (other == K_KERNEL || other == K_MEMCPY || other == K_MEMSET) out->skipped++;
        return 1;
    }
    int kind = category_kind(e->cat);
    if (kind == 0) {
        if (e->name_escaped) return 0; /* "ProfilerStep#" behind escapes: let msgspec read the name */
        if (e->name.s && e->name.n >= 13 && memcmp(e->name.s, "ProfilerStep#", 13) == 0) {
            kind = K_CPU_RANGE;
        } else {
            Span cat = e->cat;
            if (cat.s == NULL) cat.s = base, cat.n = 0;
            return count_category(out, cat, base);
        }
    }
    int has_ts = e->ts.s != NULL && e->ts_type != 'n';
    int has_dur = e->dur.s != NULL && e->dur_type != 'n';
    if (kind == K_LAUNCH) {
        if (!has_ts) return 1;
    } else if (!has_ts || !has_dur) {
        out->skipped++;
        return 1;
    }
    int64_t *row = new_row(out);
    if (row == NULL) return -1;
    int ok = 1;
    row[R_KIND] = kind;
    /* an absent name is the empty default, as on the msgspec path */
    row[R_NAME] = e->name.s ? name_id(&out->names, e->name.s, e->name.n, e->name_escaped, base)
                            : name_id(&out->names, base, 0, 0, base);
    if (row[R_NAME] < 0) return -1;
    set_id(row, e->pid, e->pid_type, e->pid_escaped, R_PID, F_PID_STRING, F_PID_NULL, base, &ok);
    set_id(row, e->tid, e->tid_type, e->tid_escaped, R_TID, F_TID_STRING, F_TID_NULL, base, &ok);
    if (!parse_time(e->ts, &row[R_TS])) ok = 0;
    if (kind != K_LAUNCH && !parse_time(e->dur, &row[R_DUR])) ok = 0;
    int as = args_reading(kind);
    if (as) {
        if (e->args_read == as) {
            for (int i = R_DEVICE; i < R_FIELDS; i++) row[i] = e->args_row[i];
            row[R_FLAGS] |= e->args_row[R_FLAGS];
        } else if (!read_args(e, row, base, as == 2)) {
            ok = 0;
        }
    }
    out->n++;
    return ok;
}

/* 1: done; 0: fall back to msgspec; -1: out of memory. */
static int scan_events(const char *buf, Py_ssize_t len, Out *out) {
    Cursor c = {buf, buf + len, buf};
    int more;
    skip_ws(&c);
    if (c.p >= c.end || *c.p != '[') return 0;
    if (!open_is_empty(&c, ']')) {
        for (;;) {
            if (c.p >= c.end || *c.p != '{') return 0;
            Event e;
            memset(&e, 0, EVENT_RESET_BYTES);
            if (!open_is_empty(&c, '}')) {
                for (;;) {
                    if (!read_member(&c, &e)) return 0;
                    if ((more = next_item(&c, '}')) < 0) return 0;
                    if (!more) break;
                }
            }
            int taken = take_event(out, &e, buf);
            if (taken <= 0) return taken;
            if ((more = next_item(&c, ']')) < 0) return 0;
            if (!more) break;
        }
    }
    skip_ws(&c);
    return c.p == c.end;
}

PyDoc_STRVAR(scan_doc,
             "scan(piece) -> (records, names, categories, skipped) or None\n\n"
             "piece: a bytes-like '[' events ']'. records: bytes of int64 rows of the kept events;\n"
             "names: bytes of int64 (offset, length, escaped) of each distinct name the rows point to;\n"
             "categories: bytes of int64 (offset, length, count) of the other categories of 'X' events;\n"
             "skipped: kept-kind events without ts/dur, and GPU activities that are not complete (ph X) events. None: decode this piece with msgspec instead.");

static PyObject *scan(PyObject *Py_UNUSED(self), PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    Out out;
    memset(&out, 0, sizeof out);
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = scan_events((const char *)view.buf, view.len, &out);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (status < 0) {
        PyErr_NoMemory();
    } else if (status == 0) {
        result = Py_NewRef(Py_None);
    } else {
        result = Py_BuildValue("(y#y#y#L)", out.rows ? (const char *)out.rows : "",
                               (Py_ssize_t)(out.n * R_FIELDS * sizeof(int64_t)),
                               out.names.list ? (const char *)out.names.list : "",
                               (Py_ssize_t)(out.names.n * 3 * sizeof(int64_t)), (const char *)out.cats,
                               (Py_ssize_t)(out.ncats * 3 * sizeof(int64_t)), (long long)out.skipped);
    }
    free(out.rows);
    free(out.names.slots);
    free(out.names.list);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_O, scan_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kineto_scan", "Compiled scanner of Kineto traceEvents pieces.", -1, methods, NULL, NULL, NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__kineto_scan(void) {
    init_tables();
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "FIELDS", R_FIELDS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

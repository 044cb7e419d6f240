/* recjudge._native: the two inner loops numpy cannot do at memory speed.
 *
 * Scanner, a streaming tokenizer for whitespace-separated TREC files (runs, qrels) behind
 * recjudge.data.trec's readers (with Dictionary, ids shared by the runs of one evaluation). It turns each id column into int32 codes in first-seen order (one hash lookup per row, no Python
 * object per row), parses integer and decimal columns, and checks that a pair of id columns (query,
 * document) is unique. It accepts only input the careful Python reader would accept with the same
 * result; on anything else (a wrong field count, a control byte, invalid UTF-8, Unicode whitespace
 * inside a token, a number outside its simple grammar, a non-finite score) it stops and reports
 * failure, and the caller lets the careful reader name the line. Decimals are correctly rounded
 * (equal to Python's float()): Clinger's exact fast path, else strtod in the C locale.
 *
 * The parse runs without the GIL, so another thread can score the previous run meanwhile.
 *
 * join, the join of ranked rows to judgments behind recjudge.evaluation.measures: a binary search
 * inside the row's query segment of the judgments (a few hundred entries, in cache while the
 * query's rows are looked up) instead of one over every judgment, keeping only the rows found.
 *
 * Both have numpy / pandas equivalents that the Python side uses when this module was not built.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GLIBC__) || defined(__APPLE__) || defined(__FreeBSD__)
#include <locale.h>
#if defined(__APPLE__) || defined(__FreeBSD__)
#include <xlocale.h>
#endif
#define RJ_HAVE_STRTOD_L 1
#endif

#define MAX_COLS 16

/* ------------------------------------------------------------------------------ growable buffers */

typedef struct {
    char *data;
    size_t len; /* bytes used */
    size_t cap;
} Buf;

static int buf_reserve(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

static inline int buf_put(Buf *b, const void *src, size_t n) {
    if (b->len + n > b->cap && buf_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

static void buf_free(Buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ------------------------------------------------------------------------------- id columns */

typedef struct {
    uint64_t key; /* a token of up to 8 bytes itself (zero padded), a longer one's hash */
    uint32_t len;
    int32_t code; /* -1: empty slot */
} Slot;

typedef struct {
    Buf arena;    /* the distinct tokens' bytes, back to back */
    Buf offsets;  /* uint64 per distinct token: start in arena */
    Buf lengths;  /* uint32 per distinct token */
    Slot *slots;  /* open addressing, linear probing; one cache line holds a short token's whole entry */
    size_t mask;
    size_t n;     /* distinct tokens */
    int32_t last; /* code of the previous row's token (consecutive rows often repeat a query) */
    uint64_t last_key;
    uint32_t last_len;
} IdCol;

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    x ^= x >> 31;
    return x;
}

static inline uint64_t token_key(const unsigned char *p, size_t n) {
    uint64_t w = 0;
    if (n <= 8) {
        memcpy(&w, p, n);
        return w;
    }
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    while (n >= 8) {
        memcpy(&w, p, 8);
        h = mix64(h ^ w);
        p += 8;
        n -= 8;
    }
    w = 0;
    memcpy(&w, p, n);
    return mix64(h ^ w ^ 0xD6E8FEB86659FD93ULL);
}

static inline size_t slot_of(uint64_t key, uint32_t len, size_t mask) {
    return (size_t)mix64(key ^ ((uint64_t)len << 56)) & mask;
}

static Slot *empty_slots(size_t n) {
    Slot *slots = malloc(n * sizeof(Slot));
    if (!slots) return NULL;
    for (size_t i = 0; i < n; i++) slots[i].code = -1;
    return slots;
}

static int idcol_init(IdCol *c) {
    memset(c, 0, sizeof(*c));
    c->mask = 1023;
    c->slots = empty_slots(c->mask + 1);
    if (!c->slots) return -1;
    c->last = -1;
    return 0;
}

static void idcol_free(IdCol *c) {
    buf_free(&c->arena);
    buf_free(&c->offsets);
    buf_free(&c->lengths);
    free(c->slots);
    c->slots = NULL;
}

static int idcol_grow(IdCol *c) {
    size_t cap = (c->mask + 1) * 2;
    Slot *slots = empty_slots(cap);
    if (!slots) return -1;
    for (size_t i = 0; i <= c->mask; i++) {
        Slot s = c->slots[i];
        if (s.code < 0) continue;
        size_t j = slot_of(s.key, s.len, cap - 1);
        while (slots[j].code >= 0) j = (j + 1) & (cap - 1);
        slots[j] = s;
    }
    free(c->slots);
    c->slots = slots;
    c->mask = cap - 1;
    return 0;
}

/* The code of a token, adding it when new; -1 on memory failure, -2 past 2^31 - 1 distinct tokens. */
static inline int32_t idcol_code(IdCol *c, const char *tok, size_t len) {
    if (len > 0xFFFFFFFFu) return -2;
    uint64_t key = token_key((const unsigned char *)tok, len);
    uint32_t len32 = (uint32_t)len;
    const uint64_t *offsets = (const uint64_t *)c->offsets.data;
    /* the previous row's token, compared without touching the tables (a query repeats row after row) */
    if (c->last >= 0 && c->last_key == key && c->last_len == len32 &&
        (len <= 8 || memcmp(c->arena.data + offsets[c->last], tok, len) == 0))
        return c->last;
    size_t i = slot_of(key, len32, c->mask);
    for (;;) {
        Slot *s = &c->slots[i];
        if (s->code < 0) break;
        if (s->key == key && s->len == len32 &&
            (len <= 8 || memcmp(c->arena.data + offsets[s->code], tok, len) == 0)) {
            c->last = s->code;
            c->last_key = key;
            c->last_len = len32;
            return s->code;
        }
        i = (i + 1) & c->mask;
    }
    if (c->n >= 0x7FFFFFFF) return -2;
    uint64_t off = c->arena.len;
    if (buf_put(&c->arena, tok, len) < 0 || buf_put(&c->offsets, &off, 8) < 0 || buf_put(&c->lengths, &len32, 4) < 0)
        return -1;
    int32_t u = (int32_t)c->n++;
    c->slots[i].key = key;
    c->slots[i].len = len32;
    c->slots[i].code = u;
    c->last = u;
    c->last_key = key;
    c->last_len = len32;
    if (c->n * 2 > c->mask + 1 && idcol_grow(c) < 0) return -1;
    return u;
}

/* ------------------------------------------------------------------------------- numbers */

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

#ifdef RJ_HAVE_STRTOD_L
static locale_t c_locale;
#endif

/* [+-]?digits, at most 18 significant digits. 0 on success. */
static inline int parse_int(const char *s, size_t n, int64_t *out) {
    size_t i = 0;
    int neg = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (i == n) return -1;
    while (i < n && s[i] == '0' && i + 1 < n) i++; /* leading zeros */
    if (n - i > 18) return -1;
    int64_t v = 0;
    for (; i < n; i++) {
        unsigned d = (unsigned char)s[i] - '0';
        if (d > 9) return -1;
        v = v * 10 + d;
    }
    *out = neg ? -v : v;
    return 0;
}

/* [+-]?(d+(.d*)?|.d+)([eE][+-]?d+)?, finite; correctly rounded. 0 on success. */
static int parse_double(const char *s, size_t n, double *out, PyThreadState **save) {
#ifdef RJ_HAVE_STRTOD_L
    (void)save;
#endif
    size_t i = 0;
    int neg = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    uint64_t m = 0;
    int digits = 0, any = 0, dropped = 0;
    long e10 = 0;
    while (i < n && (unsigned)(s[i] - '0') <= 9) {
        unsigned d = s[i] - '0';
        any = 1;
        if (m == 0 && d == 0) {
        } else if (digits < 19) {
            m = m * 10 + d;
            digits++;
        } else {
            e10++;
            dropped |= d != 0;
        }
        i++;
    }
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && (unsigned)(s[i] - '0') <= 9) {
            unsigned d = s[i] - '0';
            any = 1;
            if (m == 0 && d == 0) {
                e10--;
            } else if (digits < 19) {
                m = m * 10 + d;
                digits++;
                e10--;
            } else {
                dropped |= d != 0;
            }
            i++;
        }
    }
    if (!any) return -1;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        int eneg = 0;
        if (i < n && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
        if (i == n) return -1;
        long e = 0;
        for (; i < n && (unsigned)(s[i] - '0') <= 9; i++)
            if (e < 100000) e = e * 10 + (s[i] - '0');
        e10 += eneg ? -e : e;
    }
    if (i != n) return -1;
    double v;
    if (m == 0) {
        v = 0.0;
    } else if (!dropped && m <= (1ULL << 53) && e10 >= -22 && e10 <= 22) {
        /* both operands exact, one IEEE operation: correctly rounded (Clinger 1990) */
        v = e10 < 0 ? (double)m / POW10[-e10] : (double)m * POW10[e10];
    } else {
        char small[64];
        char *tmp = n < sizeof(small) ? small : malloc(n + 1);
        if (!tmp) return -1;
        memcpy(tmp, s, n);
        tmp[n] = '\0';
#ifdef RJ_HAVE_STRTOD_L
        v = strtod_l(tmp + (s[0] == '+' || s[0] == '-'), NULL, c_locale);
#else
        PyEval_RestoreThread(*save);
        v = PyOS_string_to_double(tmp + (s[0] == '+' || s[0] == '-'), NULL, NULL);
        if (v == -1.0 && PyErr_Occurred()) PyErr_Clear();
        *save = PyEval_SaveThread();
#endif
        if (tmp != small) free(tmp);
    }
    if (!isfinite(v)) return -1;
    *out = neg ? -v : v;
    return 0;
}

/* ----------------------------------------------------------------------------------- tokens */

/* Bytes Python's str.split() would split on, encoded in UTF-8, beyond ASCII: U+0085, U+00A0,
 * U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000. */
static int has_unicode_space(const unsigned char *p, size_t n) {
    for (size_t i = 0; i + 1 < n; i++) {
        unsigned char a = p[i], b = p[i + 1];
        if (a == 0xC2 && (b == 0x85 || b == 0xA0)) return 1;
        if (i + 2 < n) {
            unsigned char c = p[i + 2];
            if (a == 0xE1 && b == 0x9A && c == 0x80) return 1;
            if (a == 0xE2 && b == 0x80 && ((c >= 0x80 && c <= 0x8A) || c == 0xA8 || c == 0xA9 || c == 0xAF)) return 1;
            if (a == 0xE2 && b == 0x81 && c == 0x9F) return 1;
            if (a == 0xE3 && b == 0x80 && c == 0x80) return 1;
        }
    }
    return 0;
}

/* Strict UTF-8 (no overlongs, no surrogates, at most U+10FFFF), as Python's decoder. */
static int valid_utf8(const unsigned char *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            k = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            k = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            k = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (i + k >= n) return 0; /* truncated sequence */
        for (size_t j = 1; j <= k; j++) {
            if ((p[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (p[i + j] & 0x3F);
        }
        if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += k + 1;
    }
    return 1;
}

/* ------------------------------------------------------------------------------- dictionary */

static PyTypeObject *dictionary_type;

/* Distinct ids shared by scanners: runs read one after another with one Dictionary give each id
 * one code for all of them, so what depends only on the id (its code in the judgments) is worked
 * out once per id instead of once per run. */
typedef struct {
    PyObject_HEAD
    IdCol col;
    int busy; /* a scanner is filling it */
} Dictionary;

static int dictionary_init(Dictionary *d, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "", kwlist)) return -1;
    if (d->col.slots) return 0;
    if (idcol_init(&d->col) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void dictionary_dealloc(Dictionary *d) {
    idcol_free(&d->col);
    PyTypeObject *tp = Py_TYPE(d);
    tp->tp_free((PyObject *)d);
    Py_DECREF(tp);
}

static Py_ssize_t dictionary_len(Dictionary *d) { return (Py_ssize_t)d->col.n; }

static PyObject *distinct_strings(IdCol *c, size_t start);

static PyObject *dictionary_strings(Dictionary *d, PyObject *args) {
    Py_ssize_t start = 0;
    if (!PyArg_ParseTuple(args, "|n", &start)) return NULL;
    if (d->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the Dictionary is being filled by a scanner");
        return NULL;
    }
    if (!d->col.slots) {
        PyErr_SetString(PyExc_ValueError, "Dictionary not initialised");
        return NULL;
    }
    return distinct_strings(&d->col, start < 0 ? 0 : (size_t)start);
}

static PyMethodDef dictionary_methods[] = {
    {"strings", (PyCFunction)dictionary_strings, METH_VARARGS,
     "strings(start=0) -> list[str]: the ids with codes start, start + 1, ..."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot dictionary_slots[] = {
    {Py_tp_doc, "Dictionary(): distinct ids shared by the scanners given it (Scanner(..., shared={column: it}))."},
    {Py_tp_init, dictionary_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, dictionary_dealloc},
    {Py_tp_methods, dictionary_methods},
    {Py_sq_length, dictionary_len},
    {0, NULL},
};

static PyType_Spec dictionary_spec = {
    "recjudge._native.Dictionary", sizeof(Dictionary), 0, Py_TPFLAGS_DEFAULT, dictionary_slots,
};

/* ---------------------------------------------------------------------------------- scanner */

typedef struct {
    PyObject_HEAD
    int ncols;
    char kinds[MAX_COLS]; /* 's' id, 'i' int64, 'f' float64, '-' any token (not kept) */
    IdCol ids[MAX_COLS];    /* the scanner's own distinct ids per id column ... */
    IdCol *table[MAX_COLS]; /* ... or a Dictionary's, shared with other scanners */
    PyObject *shared[MAX_COLS];
    Buf codes[MAX_COLS];    /* int32 per row */
    Buf nums[MAX_COLS];
    Buf pending; /* an incomplete last line, carried to the next chunk */
    int64_t rows;
    int64_t line; /* lines seen, blank ones included */
    int failed;   /* 1: input the careful reader must see; 2: out of memory */
    int64_t fail_line;
    const char *fail_reason;
    int busy;
    int finished;
    /* unique (pair_a, pair_b) codes: checked per contiguous group of pair_a */
    int pair_a, pair_b;
    Buf closed;  /* uint8 per pair_a code: its group has ended */
    /* the pair_b codes of the current group: a small open-addressing set (in L1 for the usual
     * hundreds of rows per query), emptied slot by slot when the group ends */
    int32_t *gset;
    size_t gmask;
    Buf gused;   /* uint32 slot indices in use */
    int32_t group_code;
    int grouped;
    int64_t dup_row;
} Scanner;

static void fail(Scanner *sc, const char *reason) {
    if (!sc->failed) {
        sc->failed = 1;
        sc->fail_line = sc->line;
        sc->fail_reason = reason;
    }
}

static void oom(Scanner *sc) {
    sc->failed = 2;
    sc->fail_line = sc->line;
    sc->fail_reason = "out of memory";
}

static int grow_zeroed(Buf *b, size_t n_bytes) {
    if (b->len >= n_bytes) return 0;
    size_t old = b->len;
    if (buf_reserve(b, n_bytes - old) < 0) return -1;
    memset(b->data + old, 0, n_bytes - old);
    b->len = n_bytes;
    return 0;
}

static int gset_grow(Scanner *sc) {
    size_t cap = sc->gset ? (sc->gmask + 1) * 2 : 256;
    int32_t *set = malloc(cap * sizeof(int32_t));
    if (!set) return -1;
    memset(set, 0xff, cap * sizeof(int32_t));
    uint32_t *used = (uint32_t *)sc->gused.data;
    size_t n = sc->gused.len / 4;
    for (size_t i = 0; i < n; i++) { /* re-insert the group's codes */
        int32_t b = sc->gset[used[i]];
        size_t j = (size_t)mix64((uint64_t)b) & (cap - 1);
        while (set[j] >= 0) j = (j + 1) & (cap - 1);
        set[j] = b;
        used[i] = (uint32_t)j;
    }
    free(sc->gset);
    sc->gset = set;
    sc->gmask = cap - 1;
    return 0;
}

static void check_pair(Scanner *sc, int32_t a, int32_t b) {
    if (!sc->grouped || sc->dup_row >= 0) return;
    if (a != sc->group_code) {
        if (grow_zeroed(&sc->closed, (size_t)a + 1) < 0) return oom(sc);
        if (sc->group_code >= 0) ((uint8_t *)sc->closed.data)[sc->group_code] = 1;
        if (((uint8_t *)sc->closed.data)[a]) {
            sc->grouped = 0; /* a query seen again after another one: the caller checks pairs */
            return;
        }
        sc->group_code = a;
        uint32_t *used = (uint32_t *)sc->gused.data;
        for (size_t i = 0, n = sc->gused.len / 4; i < n; i++) sc->gset[used[i]] = -1;
        sc->gused.len = 0;
    }
    if ((sc->gused.len / 4 + 1) * 2 > (sc->gset ? sc->gmask + 1 : 0) && gset_grow(sc) < 0) return oom(sc);
    size_t j = (size_t)mix64((uint64_t)b) & sc->gmask;
    while (sc->gset[j] >= 0) {
        if (sc->gset[j] == b) {
            sc->dup_row = sc->rows;
            return;
        }
        j = (j + 1) & sc->gmask;
    }
    sc->gset[j] = b;
    uint32_t slot = (uint32_t)j;
    if (buf_put(&sc->gused, &slot, 4) < 0) oom(sc);
}

static void scan_line(Scanner *sc, const char *p, const char *end, PyThreadState **save) {
    sc->line++;
    if (end > p && end[-1] == '\r') end--;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    if (p == end) return; /* blank */
    int col = 0;
    int32_t codes[MAX_COLS];
    while (p < end) {
        const char *tok = p;
        int high = 0;
        while (p < end) {
            unsigned char c = (unsigned char)*p;
            if (c == ' ' || c == '\t') break;
            if (c < 0x20) return fail(sc, "a control character");
            high |= c >= 0x80;
            p++;
        }
        size_t len = (size_t)(p - tok);
        if (col >= sc->ncols) return fail(sc, "too many fields");
        if (high && (!valid_utf8((const unsigned char *)tok, len) || has_unicode_space((const unsigned char *)tok, len)))
            return fail(sc, "invalid UTF-8 or Unicode whitespace");
        char kind = sc->kinds[col];
        if (kind == 's') {
            int32_t code = idcol_code(sc->table[col], tok, len);
            if (code == -1) return oom(sc);
            if (code == -2) return fail(sc, "too many distinct ids");
            codes[col] = code;
        } else if (kind == 'i') {
            int64_t v;
            if (parse_int(tok, len, &v) < 0) return fail(sc, "not an integer");
            if (buf_put(&sc->nums[col], &v, 8) < 0) return oom(sc);
        } else if (kind == 'f') {
            double v;
            if (parse_double(tok, len, &v, save) < 0) return fail(sc, "not a finite decimal");
            if (buf_put(&sc->nums[col], &v, 8) < 0) return oom(sc);
        }
        col++;
        while (p < end && (*p == ' ' || *p == '\t')) p++;
    }
    if (col != sc->ncols) return fail(sc, "too few fields");
    for (int c = 0; c < sc->ncols; c++)
        if (sc->kinds[c] == 's' && buf_put(&sc->codes[c], &codes[c], 4) < 0) return oom(sc);
    if (sc->pair_a >= 0) check_pair(sc, codes[sc->pair_a], codes[sc->pair_b]);
    sc->rows++;
}

/* Parse every complete line of data[0:n]; the incomplete tail goes to pending. */
static void scan_chunk(Scanner *sc, const char *data, size_t n, PyThreadState **save) {
    const char *p = data, *end = data + n;
    if (sc->pending.len) {
        const char *nl = memchr(p, '\n', n);
        if (!nl) {
            if (buf_put(&sc->pending, p, n) < 0) oom(sc);
            return;
        }
        if (buf_put(&sc->pending, p, (size_t)(nl - p)) < 0) return oom(sc);
        scan_line(sc, sc->pending.data, sc->pending.data + sc->pending.len, save);
        sc->pending.len = 0;
        p = nl + 1;
    }
    while (p < end && !sc->failed) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) {
            if (buf_put(&sc->pending, p, (size_t)(end - p)) < 0) oom(sc);
            return;
        }
        scan_line(sc, p, nl, save);
        p = nl + 1;
    }
}

/* Mark the scanner's Dictionaries as being filled (with the GIL held): one scanner at a time. */
static int claim_shared(Scanner *sc) {
    for (int c = 0; c < sc->ncols; c++) {
        if (sc->shared[c] && ((Dictionary *)sc->shared[c])->busy) {
            PyErr_SetString(PyExc_RuntimeError, "a Dictionary is being filled by another scanner");
            for (int k = 0; k < c; k++)
                if (sc->shared[k]) ((Dictionary *)sc->shared[k])->busy = 0;
            return -1;
        }
        if (sc->shared[c]) ((Dictionary *)sc->shared[c])->busy = 1;
    }
    return 0;
}

static void release_shared(Scanner *sc) {
    for (int c = 0; c < sc->ncols; c++)
        if (sc->shared[c]) ((Dictionary *)sc->shared[c])->busy = 0;
}

static PyObject *scanner_feed(Scanner *sc, PyObject *arg) {
    Py_buffer view;
    if (sc->finished) {
        PyErr_SetString(PyExc_ValueError, "scanner already finished");
        return NULL;
    }
    if (sc->busy) {
        PyErr_SetString(PyExc_RuntimeError, "scanner used from two threads at once");
        return NULL;
    }
    if (claim_shared(sc) < 0) return NULL;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        release_shared(sc);
        return NULL;
    }
    sc->busy = 1;
    if (!sc->failed) {
        PyThreadState *save = PyEval_SaveThread();
        scan_chunk(sc, (const char *)view.buf, (size_t)view.len, &save);
        PyEval_RestoreThread(save);
    }
    sc->busy = 0;
    release_shared(sc);
    PyBuffer_Release(&view);
    if (sc->failed == 2) return PyErr_NoMemory();
    return PyBool_FromLong(!sc->failed);
}

/* A Block owns a finished column's memory and lends it through the buffer protocol, so
 * numpy.frombuffer wraps it without a copy (the memory lives as long as the arrays on it). */
typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t len;
    Py_ssize_t exports;
} Block;

static PyTypeObject *block_type;

static int block_getbuffer(Block *b, Py_buffer *view, int flags) {
    if (PyBuffer_FillInfo(view, (PyObject *)b, b->data, b->len, 0, flags) < 0) return -1;
    b->exports++;
    return 0;
}

static void block_releasebuffer(Block *b, Py_buffer *Py_UNUSED(view)) { b->exports--; }

static Py_ssize_t block_len(Block *b) { return b->len; }

static void block_dealloc(Block *b) {
    free(b->data);
    PyTypeObject *tp = Py_TYPE(b);
    tp->tp_free((PyObject *)b);
    Py_DECREF(tp);
}

static PyType_Slot block_slots[] = {
    {Py_tp_doc, "A finished column's bytes (wrap with numpy.frombuffer)."},
    {Py_tp_dealloc, block_dealloc},
    {Py_bf_getbuffer, block_getbuffer},
    {Py_bf_releasebuffer, block_releasebuffer},
    {Py_sq_length, block_len},
    {0, NULL},
};

static PyType_Spec block_spec = {"recjudge._native.Block", sizeof(Block), 0, Py_TPFLAGS_DEFAULT, block_slots};

/* The buffer's memory handed to a Block (the buffer is left empty). */
static PyObject *block_of(Buf *buf) {
    Block *b = PyObject_New(Block, block_type);
    if (!b) return NULL;
    b->data = buf->data ? buf->data : malloc(1);
    b->len = (Py_ssize_t)buf->len;
    b->exports = 0;
    buf->data = NULL;
    buf->len = buf->cap = 0;
    if (!b->data) {
        Py_DECREF(b);
        return PyErr_NoMemory();
    }
    return (PyObject *)b;
}

/* The distinct tokens from ``start`` on, as str. */
static PyObject *distinct_strings(IdCol *c, size_t start) {
    if (start > c->n) start = c->n;
    PyObject *list = PyList_New((Py_ssize_t)(c->n - start));
    if (!list) return NULL;
    const uint64_t *offsets = (const uint64_t *)c->offsets.data;
    const uint32_t *lengths = (const uint32_t *)c->lengths.data;
    for (size_t u = start; u < c->n; u++) {
        PyObject *s = PyUnicode_DecodeUTF8(c->arena.data + offsets[u], (Py_ssize_t)lengths[u], "strict");
        if (!s) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)(u - start), s);
    }
    return list;
}

/* finish() -> None when the input needs the careful reader, else
 * (rows, columns, duplicate_row, grouped): columns[i] is (int32 codes, [distinct str] or None for a
 * shared column) for an id column, int64 or float64 values for a number column, None for a skipped
 * one (the arrays as Blocks);
 * duplicate_row is the 0-based row repeating an earlier (pair_a, pair_b), -1 when none was found;
 * grouped is False when pair_a's values are not in contiguous groups (then pairs were not checked). */
static PyObject *scanner_finish(Scanner *sc, PyObject *Py_UNUSED(ignored)) {
    if (sc->busy) {
        PyErr_SetString(PyExc_RuntimeError, "scanner used from two threads at once");
        return NULL;
    }
    if (sc->finished) {
        PyErr_SetString(PyExc_ValueError, "scanner already finished");
        return NULL;
    }
    if (!sc->failed && sc->pending.len) {
        if (claim_shared(sc) < 0) return NULL;
        PyThreadState *save = PyEval_SaveThread();
        scan_line(sc, sc->pending.data, sc->pending.data + sc->pending.len, &save);
        PyEval_RestoreThread(save);
        release_shared(sc);
        sc->pending.len = 0;
    }
    sc->finished = 1;
    if (sc->failed == 2) return PyErr_NoMemory();
    if (sc->failed || sc->rows == 0) Py_RETURN_NONE;
    PyObject *cols = PyList_New(sc->ncols);
    if (!cols) return NULL;
    for (int c = 0; c < sc->ncols; c++) {
        PyObject *item;
        if (sc->kinds[c] == 's') {
            PyObject *codes = block_of(&sc->codes[c]);
            /* a shared column's strings are the Dictionary's (Dictionary.strings) */
            PyObject *strings = !codes ? NULL : sc->shared[c] ? Py_NewRef(Py_None) : distinct_strings(&sc->ids[c], 0);
            item = strings ? PyTuple_Pack(2, codes, strings) : NULL;
            Py_XDECREF(codes);
            Py_XDECREF(strings);
            idcol_free(&sc->ids[c]);
        } else if (sc->kinds[c] == 'i' || sc->kinds[c] == 'f') {
            item = block_of(&sc->nums[c]);
        } else {
            item = Py_NewRef(Py_None);
        }
        if (!item) {
            Py_DECREF(cols);
            return NULL;
        }
        PyList_SET_ITEM(cols, c, item);
    }
    return Py_BuildValue("(LNLO)", (long long)sc->rows, cols, (long long)sc->dup_row,
                         sc->grouped ? Py_True : Py_False);
}

static PyObject *scanner_error(Scanner *sc, void *Py_UNUSED(closure)) {
    if (!sc->failed) Py_RETURN_NONE;
    return Py_BuildValue("(Ls)", (long long)sc->fail_line, sc->fail_reason);
}

static int scanner_init(Scanner *sc, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"kinds", "pair", "shared", "rows_hint", NULL};
    const char *kinds;
    int pa = -1, pb = -1;
    PyObject *shared = NULL;
    Py_ssize_t rows_hint = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "s|(ii)On", kwlist, &kinds, &pa, &pb, &shared, &rows_hint)) return -1;
    size_t n = strlen(kinds);
    if (sc->ncols) {
        PyErr_SetString(PyExc_ValueError, "scanner already initialised");
        return -1;
    }
    if (n == 0 || n > MAX_COLS) {
        PyErr_SetString(PyExc_ValueError, "kinds: 1 to 16 of 's', 'i', 'f', '-'");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (!strchr("sif-", kinds[i])) {
            PyErr_SetString(PyExc_ValueError, "kinds: 1 to 16 of 's', 'i', 'f', '-'");
            return -1;
        }
    }
    if (pa >= 0 && (pa >= (int)n || pb < 0 || pb >= (int)n || pa == pb || kinds[pa] != 's' || kinds[pb] != 's')) {
        PyErr_SetString(PyExc_ValueError, "pair: two different id columns");
        return -1;
    }
    if (shared && shared != Py_None) {
        if (!PyDict_Check(shared)) {
            PyErr_SetString(PyExc_TypeError, "shared: a dict {id column: Dictionary}");
            return -1;
        }
        PyObject *key, *value;
        Py_ssize_t at = 0;
        while (PyDict_Next(shared, &at, &key, &value)) {
            long col = PyLong_Check(key) ? PyLong_AsLong(key) : -1;
            if (col < 0 || col >= (long)n || kinds[col] != 's' || !PyObject_TypeCheck(value, dictionary_type)) {
                PyErr_SetString(PyExc_ValueError, "shared: a dict {id column: Dictionary}");
                return -1;
            }
            Py_INCREF(value);
            Py_XSETREF(sc->shared[col], value);
        }
    }
    sc->ncols = (int)n;
    memcpy(sc->kinds, kinds, n);
    for (size_t i = 0; i < n; i++) {
        if (kinds[i] == 's' && idcol_init(&sc->ids[i]) < 0) {
            PyErr_NoMemory();
            return -1;
        }
        sc->table[i] = sc->shared[i] ? &((Dictionary *)sc->shared[i])->col : &sc->ids[i];
    }
    /* columns sized once for the rows expected (untouched pages cost nothing): no regrowth copies,
     * no fresh pages faulted in at every doubling */
    if (rows_hint > 0 && rows_hint < ((Py_ssize_t)1 << 34)) {
        for (size_t i = 0; i < n; i++) {
            Buf *col = kinds[i] == 's' ? &sc->codes[i] : (kinds[i] == 'i' || kinds[i] == 'f') ? &sc->nums[i] : NULL;
            size_t width = kinds[i] == 's' ? 4 : 8;
            if (col && buf_reserve(col, (size_t)rows_hint * width) < 0) {
                PyErr_NoMemory();
                return -1;
            }
        }
    }
    sc->pair_a = pa;
    sc->pair_b = pb;
    sc->group_code = -1;
    sc->grouped = 1;
    sc->dup_row = -1;
    return 0;
}

static void scanner_dealloc(Scanner *sc) {
    for (int c = 0; c < MAX_COLS; c++) {
        idcol_free(&sc->ids[c]);
        buf_free(&sc->nums[c]);
        buf_free(&sc->codes[c]);
        Py_CLEAR(sc->shared[c]);
    }
    buf_free(&sc->pending);
    buf_free(&sc->closed);
    buf_free(&sc->gused);
    free(sc->gset);
    PyTypeObject *tp = Py_TYPE(sc);
    tp->tp_free((PyObject *)sc);
    Py_DECREF(tp);
}

static PyMethodDef scanner_methods[] = {
    {"feed", (PyCFunction)scanner_feed, METH_O,
     "feed(buffer) -> bool: parse the complete lines of a chunk (the GIL is released); False once the "
     "input needs the careful reader."},
    {"finish", (PyCFunction)scanner_finish, METH_NOARGS,
     "finish() -> None or (rows, columns, duplicate_row, grouped)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef scanner_getset[] = {
    {"error", (getter)scanner_error, NULL, "(line, reason) of the first line the scanner refused, or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot scanner_slots[] = {
    {Py_tp_doc, "Scanner(kinds, pair=(-1, -1), shared=None, rows_hint=0): one whitespace-separated file, fed in "
                "chunks; shared maps an id column to a Dictionary whose codes it uses; rows_hint sizes the columns."},
    {Py_tp_init, scanner_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, scanner_dealloc},
    {Py_tp_methods, scanner_methods},
    {Py_tp_getset, scanner_getset},
    {0, NULL},
};

static PyType_Spec scanner_spec = {
    "recjudge._native.Scanner", sizeof(Scanner), 0, Py_TPFLAGS_DEFAULT, scanner_slots,
};

/* ------------------------------------------------------------------------------- the join */

static int get_vector(PyObject *obj, Py_buffer *view, const char *what, Py_ssize_t itemsize, int writable) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    int ok = view->ndim == 1 && view->itemsize == itemsize && strchr("bhilqBHILQ", *f) && f[1] == '\0';
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%s: a contiguous vector of %zd-byte integers", what, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* join(starts, docs, qmap, dmap, qidx, didx, out_row, out_j, out_q) -> n_found
 *
 * Row r of a ranked run names a query qmap[qidx[r]] and a document dmap[didx[r]] of the judgments
 * (a negative index or code: absent). The judgments are sorted by query, then document:
 * docs[starts[q]:starts[q + 1]] are query q's document codes, ascending. For each row found there,
 * in row order, out_row gets r, out_j its index in docs and out_q its query; the count is returned.
 * starts int64 (n_queries + 1), docs int32, qmap int64, dmap int32, qidx int32, didx int32,
 * out_row, out_j and out_q int64 with one entry per row. */
static PyObject *join(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *o[9];
    if (!PyArg_ParseTuple(args, "OOOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8]))
        return NULL;
    static const char *names[9] = {"starts", "docs", "qmap", "dmap", "qidx", "didx", "out_row", "out_j", "out_q"};
    static const Py_ssize_t sizes[9] = {8, 4, 8, 4, 4, 4, 8, 8, 8};
    Py_buffer b[9];
    int got = 0;
    PyObject *result = NULL;
    for (; got < 9; got++)
        if (get_vector(o[got], &b[got], names[got], sizes[got], got >= 6) < 0) goto done;
    Py_ssize_t nq = b[0].len / 8 - 1, ndocs = b[1].len / 4, nqmap = b[2].len / 8, ndmap = b[3].len / 4;
    Py_ssize_t n = b[4].len / 4;
    if (nq < 0 || b[5].len / 4 != n || b[6].len / 8 != n || b[7].len / 8 != n || b[8].len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "qidx, didx and the outputs need one entry per row; starts one per query + 1");
        goto done;
    }
    const int64_t *starts = b[0].buf, *qmap = b[2].buf;
    const int32_t *docs = b[1].buf, *dmap = b[3].buf, *qidx = b[4].buf, *didx = b[5].buf;
    int64_t *out_row = b[6].buf, *out_j = b[7].buf, *out_q = b[8].buf;
    for (Py_ssize_t q = 0; q < nq; q++) {
        if (starts[q] < 0 || starts[q] > starts[q + 1] || starts[q + 1] > ndocs) {
            PyErr_SetString(PyExc_ValueError, "starts must rise from 0 to at most len(docs)");
            goto done;
        }
    }
    int bad = 0;
    Py_ssize_t found = 0;
    Py_BEGIN_ALLOW_THREADS
    if (nqmap > 0 && ndmap > 0 && ndocs > 0) {
        /* A ranked run's rows come query by query, so consecutive rows search the same segment:
         * eight rows at a time share its bounds, and their eight searches run interleaved (each
         * is a chain of dependent loads; eight at once keep the core busy). No branch depends on
         * the data: about half the rows of a typical run name an unjudged document. */
        enum { BATCH = 512 };
        int64_t seg_lo[BATCH], seg_hi[BATCH], seg_q[BATCH];
        int32_t want[BATCH + 8];
        for (Py_ssize_t r0 = 0; r0 < n && !bad; r0 += BATCH) {
            int m = n - r0 < BATCH ? (int)(n - r0) : BATCH;
            for (int k = 0; k < m; k++) {
                int64_t qi = qidx[r0 + k];
                int64_t di = didx[r0 + k];
                bad |= (qi >= nqmap) | (di >= ndmap);
                int64_t q = qmap[(qi >= 0) & (qi < nqmap) ? qi : 0];
                int32_t d = dmap[(di >= 0) & (di < ndmap) ? di : 0];
                int ok = (qi >= 0) & (di >= 0) & (q >= 0) & (q < nq) & (d >= 0);
                bad |= q >= nq;
                int64_t qs = ok ? q : 0;
                seg_q[k] = qs;
                seg_lo[k] = ok ? starts[qs] : 0;
                seg_hi[k] = ok ? starts[qs + 1] : 0; /* an empty segment: nothing is found */
                want[k] = d;
            }
            if (bad) break;
            int k = 0;
            while (k < m) {
                /* rows k..e-1 share one segment (at most eight) */
                int e = k + 1;
                while (e < m && e < k + 8 && seg_lo[e] == seg_lo[k] && seg_hi[e] == seg_hi[k]) e++;
                int64_t lo = seg_lo[k], hi = seg_hi[k], len = hi - lo;
                if (len <= 0) {
                    k = e;
                    continue;
                }
                const int32_t *w = want + k; /* lanes past e search too (want has room); ignored */
                const int32_t w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5], w6 = w[6], w7 = w[7];
                int64_t b0 = lo, b1 = lo, b2 = lo, b3 = lo, b4 = lo, b5 = lo, b6 = lo, b7 = lo;
                /* lower bound (Khuong & Morin): the first entry >= want is b or b + 1 at the end */
                while (len > 1) {
                    int64_t h = len >> 1;
                    const int32_t *p = docs + h;
                    /* masks, not ternaries: the compiler turns those into data-dependent branches */
                    b0 += h & -(int64_t)(p[b0] < w0);
                    b1 += h & -(int64_t)(p[b1] < w1);
                    b2 += h & -(int64_t)(p[b2] < w2);
                    b3 += h & -(int64_t)(p[b3] < w3);
                    b4 += h & -(int64_t)(p[b4] < w4);
                    b5 += h & -(int64_t)(p[b5] < w5);
                    b6 += h & -(int64_t)(p[b6] < w6);
                    b7 += h & -(int64_t)(p[b7] < w7);
                    len -= h;
                }
                int64_t bs[8] = {b0, b1, b2, b3, b4, b5, b6, b7};
                for (int i = 0; i < e - k; i++) {
                    int64_t at = bs[i] + (docs[bs[i]] < w[i]);
                    int inside = at < hi;
                    int hit = inside & (docs[inside ? at : lo] == w[i]);
                    out_row[found] = r0 + k + i;
                    out_j[found] = at;
                    out_q[found] = seg_q[k];
                    found += hit;
                }
                k = e;
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "an index outside qmap or dmap, or a query code outside starts");
        goto done;
    }
    result = PyLong_FromSsize_t(found);
done:
    while (got > 0) PyBuffer_Release(&b[--got]);
    return result;
}

static PyMethodDef native_functions[] = {
    {"join", join, METH_VARARGS,
     "join(starts, docs, qmap, dmap, qidx, didx, out_row, out_j, out_q) -> n: the rows of a ranked run "
     "that the judgments hold, with their index and query (see recjudge.evaluation.measures.Judgments.join)."},
    {NULL, NULL, 0, NULL},
};

/* A type made from its spec and added to the module; ``keep`` (when given) holds a second reference. */
static int add_type(PyObject *m, PyType_Spec *spec, const char *name, PyTypeObject **keep) {
    PyObject *tp = PyType_FromSpec(spec);
    if (!tp) return -1;
    if (keep) {
        Py_INCREF(tp);
        *keep = (PyTypeObject *)tp;
    }
    if (PyModule_AddObject(m, name, tp) < 0) {
        Py_DECREF(tp);
        if (keep) {
            Py_DECREF(tp);
            *keep = NULL;
        }
        return -1;
    }
    return 0;
}

static int scan_exec(PyObject *m) {
#ifdef RJ_HAVE_STRTOD_L
    if (!c_locale) {
        c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
        if (!c_locale) {
            PyErr_SetString(PyExc_OSError, "cannot create the C locale for strtod_l");
            return -1;
        }
    }
#endif
    if (add_type(m, &scanner_spec, "Scanner", NULL) < 0 || add_type(m, &block_spec, "Block", &block_type) < 0 ||
        add_type(m, &dictionary_spec, "Dictionary", &dictionary_type) < 0)
        return -1;
    return 0;
}

static PyModuleDef_Slot scan_slots[] = {
    {Py_mod_exec, scan_exec},
    {0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "recjudge._native",
    "Compiled inner loops: the TREC tokenizer (recjudge.data.trec) and the judgments join "
    "(recjudge.evaluation.measures).", 0, native_functions, scan_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModuleDef_Init(&native_module); }

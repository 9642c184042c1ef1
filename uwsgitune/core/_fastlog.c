/* uwsgitune.core._fastlog: the request log's common batch, parsed and recorded in C.
 *
 * An optional accelerator for core/logline.py `parse_batch` and core/latency.py
 * `LatencyRecorder._put_batch`/`_flush` (issue 38: the CPU per ingested line). It takes
 * exactly the lines `parse_batch` takes (the regex `FAST_TAIL` and its checks, spelled out
 * below) and answers None for a batch holding any other line, before touching anything:
 * the caller then parses line by line, as without it. Where it is not built, the pure
 * Python path runs; tests run both and compare them.
 *
 *   scan(lines) -> list[FastLine] | None      the rows `parse_batch` answers (for tests)
 *   record(lines, service, queue, whole, wcache, wresolve, rcache, rresolve,
 *          inv, zero, max_wait, cache_cap) -> None | (status, nginx, unstamped, others, odd)
 *
 * `record` counts each line's service time into `service` (a `_Part`: `hist`, `total`,
 * `top`), its worker's part and its route's part, and the in-bounds nginx waits into
 * `queue` and `whole`, with the bucket `ceil(log(v) * inv)` (`zero` for 0), the same
 * double expression as Python's `math.ceil(math.log(v) * inv)`. The parts of a worker id
 * (an int) and of a path (bytes) are looked up in `wcache`/`rcache`, dicts of the open
 * second, and asked of `wresolve(wid)`/`rresolve(path)` on a miss (kept in the cache while
 * it holds fewer than `cache_cap`). It answers the status classes' counts, the nginx and
 * the unstamped lines' counts, the other stamps as (start, stamp, service) and the nginx
 * waits out of bounds as (wait, service), in line order, for the Python code to record.
 */
#define _GNU_SOURCE /* memmem */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAX_LINE 16384
#define MAX_METHOD 24
#define PID_MAX 4194304
#define NBUCKETS 4096 /* buckets counted in arrays; above, straight into the dict */
#define NSTATUS 6
#define TABLE 2048 /* parts a batch can touch: MAX_WORKERS + MAX_ROUTES + 2 < TABLE / 2 */

typedef struct {
    const char *field[4]; /* start, service, status, wid: as the line spells them */
    int field_len[4];
    long long start;
    long long service;
    int status;
    long wid;
    const char *secs; /* nginx t=<10 digits>.<3 digits>, or NULL */
    const char *stamp; /* the stamp's text otherwise (may be empty) */
    Py_ssize_t stamp_len;
    const char *path;
    Py_ssize_t path_len;
} Row;

static int
digits(const char *p, const char *end)
{
    const char *q = p;
    while (q < end && *q >= '0' && *q <= '9')
        q++;
    return (int)(q - p);
}

static long long
number(const char *p, int n)
{
    long long v = 0;
    for (int i = 0; i < n; i++)
        v = v * 10 + (p[i] - '0');
    return v;
}

/* One line against FAST_TAIL and parse_batch's checks: 1 and the row, or 0. */
static int
parse(const char *buf, Py_ssize_t len, Row *row)
{
    const char *end = buf + len;
    if (len > MAX_LINE || memchr(buf, '\n', (size_t)len) != NULL)
        return 0;
    /* One pass over the line's "uwt"s: one marker "uwt1 " (its first is its last), and no
     * "uwt- " opening the line or after a space (logged outside the sample: logline.py
     * UNSAMPLED_MARKER, read line by line). */
    const char *m = NULL;
    for (const char *u = buf; end - u >= 5; u += 3) {
        u = memmem(u, (size_t)(end - u), "uwt", 3);
        if (u == NULL || end - u < 5)
            break;
        if (u[4] != ' ')
            continue;
        if (u[3] == '1') {
            if (m != NULL)
                return 0;
            m = u;
        }
        else if (u[3] == '-' && (u == buf || u[-1] == ' '))
            return 0;
    }
    if (m == NULL || (m > buf && m[-1] != ' '))
        return 0;
    const char *p = m + 5;
    int n = digits(p, end); /* the start: [1-9][0-9]{15,16} */
    if (n < 16 || n > 17 || *p == '0' || p + n >= end || p[n] != ' ')
        return 0;
    row->field[0] = p;
    row->field_len[0] = n;
    row->start = number(p, n);
    p += n + 1;
    n = digits(p, end); /* the service time: [0-9]{1,10} */
    if (n < 1 || n > 10 || p + n >= end || p[n] != ' ')
        return 0;
    row->field[1] = p;
    row->field_len[1] = n;
    row->service = number(p, n);
    p += n + 1;
    n = digits(p, end); /* the status: [0-9]{3} */
    if (n != 3 || p + n >= end || p[n] != ' ')
        return 0;
    row->field[2] = p;
    row->field_len[2] = n;
    row->status = (int)number(p, n);
    p += n + 1;
    n = digits(p, end); /* the worker id: [0-9]{1,4} */
    if (n < 1 || n > 4 || p + n >= end || p[n] != ' ')
        return 0;
    row->field[3] = p;
    row->field_len[3] = n;
    row->wid = (long)number(p, n);
    p += n + 1;
    n = digits(p, end); /* the pid: 1 to 2**22, no leading 0 */
    if (n < 1 || n > 7 || *p == '0' || p + n >= end || p[n] != ' ' || number(p, n) > PID_MAX)
        return 0;
    p += n + 1;
    const char *sp = memchr(p, ' ', (size_t)(end - p)); /* the method: [^ \n]{1,24} */
    if (sp == NULL || sp == p || sp - p > MAX_METHOD)
        return 0;
    p = sp + 1;
    if (p >= end || *p != '[')
        return 0;
    p++;
    const char *close = memchr(p, ']', (size_t)(end - p)); /* the stamp: [^\]\n]* */
    if (close == NULL || close + 1 >= end || close[1] != ' ')
        return 0;
    Py_ssize_t slen = close - p;
    row->secs = NULL;
    row->stamp = p;
    row->stamp_len = slen;
    if (slen == 16 && p[0] == 't' && p[1] == '=' && p[2] >= '1' && p[2] <= '9' &&
        digits(p + 2, close) == 10 && p[12] == '.' && digits(p + 13, close) == 3)
        row->secs = p + 2;
    p = close + 2;
    if (p >= end || *p != '/') /* the path: /[^?\r\n]*, then ?[^\n]* or the end */
        return 0;
    const char *q = memchr(p, '?', (size_t)(end - p));
    const char *path_end = q != NULL ? q : end;
    if (memchr(p, '\r', (size_t)(path_end - p)) != NULL)
        return 0;
    row->path = p;
    row->path_len = path_end - p;
    return 1;
}

/* Every line parsed into `rows` (n of them), or 0 when one does not take the fast path. */
static int
parse_all(PyObject *lines, Row *rows, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *line = PyList_GET_ITEM(lines, i);
        if (!PyBytes_Check(line))
            return 0;
        if (!parse(PyBytes_AS_STRING(line), PyBytes_GET_SIZE(line), &rows[i]))
            return 0;
    }
    return 1;
}

static PyObject *
scan(PyObject *self, PyObject *lines)
{
    if (!PyList_Check(lines)) {
        PyErr_SetString(PyExc_TypeError, "scan() takes a list of bytes");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(lines);
    if (n == 0)
        Py_RETURN_NONE;
    Row *rows = PyMem_Malloc(sizeof(Row) * (size_t)n);
    if (rows == NULL)
        return PyErr_NoMemory();
    if (!parse_all(lines, rows, n)) {
        PyMem_Free(rows);
        Py_RETURN_NONE;
    }
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        Row *r = &rows[i];
        PyObject *row = Py_BuildValue(
            "(y#y#y#y#y#y#y#y#)", r->field[0], (Py_ssize_t)r->field_len[0], r->field[1],
            (Py_ssize_t)r->field_len[1], r->field[2], (Py_ssize_t)r->field_len[2], r->field[3],
            (Py_ssize_t)r->field_len[3],
            r->secs ? r->secs : "", (Py_ssize_t)(r->secs ? 10 : 0),
            r->secs ? r->secs + 11 : "", (Py_ssize_t)(r->secs ? 3 : 0),
            r->secs ? "" : r->stamp, r->secs ? (Py_ssize_t)0 : r->stamp_len,
            r->path, r->path_len);
        if (row == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, row);
    }
    PyMem_Free(rows);
    return out;
}

/* -- record ----------------------------------------------------------------------------- */

typedef struct {
    PyObject *part; /* borrowed: its cache dict holds it */
    PyObject *hist; /* owned */
    long long total;
    long long top;
} Entry;

typedef struct {
    PyObject *keys[TABLE]; /* part -> entry, open addressing on the pointer */
    int slot[TABLE];
    Entry entries[TABLE / 2];
    int n;
} Parts;

typedef struct {
    int32_t counts[NBUCKETS];
    long long zeros;
    int lo, hi; /* the buckets touched: [lo, hi) */
    long long total, top;
} Local;

static PyObject *bucket_keys[NBUCKETS]; /* the ints 0..NBUCKETS-1, made once */
static PyObject *str_hist, *str_total, *str_top;

static PyObject *
bucket_key(long b)
{
    if (b >= 0 && b < NBUCKETS) {
        if (bucket_keys[b] == NULL)
            bucket_keys[b] = PyLong_FromLong(b);
        Py_XINCREF(bucket_keys[b]);
        return bucket_keys[b];
    }
    return PyLong_FromLong(b);
}

static inline long
bucket(long long v, double inv, long zero)
{
    return v > 0 ? (long)ceil(log((double)v) * inv) : zero;
}

/* hist[key] += by */
static int
dict_add(PyObject *hist, PyObject *key, long long by)
{
    PyObject *cur = PyDict_GetItemWithError(hist, key);
    long long c = 0;
    if (cur != NULL) {
        c = PyLong_AsLongLong(cur);
        if (c == -1 && PyErr_Occurred())
            return -1;
    }
    else if (PyErr_Occurred())
        return -1;
    PyObject *nv = PyLong_FromLongLong(c + by);
    if (nv == NULL)
        return -1;
    int rc = PyDict_SetItem(hist, key, nv);
    Py_DECREF(nv);
    return rc;
}

static int
hist_add(PyObject *hist, long b)
{
    PyObject *key = bucket_key(b);
    if (key == NULL)
        return -1;
    int rc = dict_add(hist, key, 1);
    Py_DECREF(key);
    return rc;
}

static Entry *
entry_of(Parts *t, PyObject *part)
{
    size_t h = ((size_t)part >> 4) & (TABLE - 1);
    while (t->keys[h] != NULL) {
        if (t->keys[h] == part)
            return &t->entries[t->slot[h]];
        h = (h + 1) & (TABLE - 1);
    }
    if (t->n >= TABLE / 2) {
        PyErr_SetString(PyExc_RuntimeError, "_fastlog: more parts in a batch than its table");
        return NULL;
    }
    PyObject *hist = PyObject_GetAttr(part, str_hist);
    if (hist == NULL)
        return NULL;
    if (!PyDict_Check(hist)) {
        Py_DECREF(hist);
        PyErr_SetString(PyExc_TypeError, "_fastlog: a part's hist is not a dict");
        return NULL;
    }
    t->keys[h] = part;
    t->slot[h] = t->n;
    Entry *e = &t->entries[t->n++];
    e->part = part;
    e->hist = hist;
    e->total = 0;
    e->top = -1;
    return e;
}

/* The part of `key` from `cache`, or from `resolve(key)` (kept while the cache is small). */
static PyObject *
part_of(PyObject *cache, PyObject *resolve, PyObject *key, Py_ssize_t cap, PyObject **spare)
{
    PyObject *part = PyDict_GetItemWithError(cache, key);
    if (part != NULL || PyErr_Occurred())
        return part;
    part = PyObject_CallOneArg(resolve, key);
    if (part == NULL)
        return NULL;
    if (PyDict_GET_SIZE(cache) < cap) {
        int rc = PyDict_SetItem(cache, key, part);
        Py_DECREF(part);
        return rc < 0 ? NULL : part;
    }
    /* not kept: held until the batch ends (a list the caller owns) */
    if (PyList_Append(*spare, part) < 0) {
        Py_DECREF(part);
        return NULL;
    }
    Py_DECREF(part);
    return part;
}

static void
local_add(Local *l, long long v, long b)
{
    if (v == 0) {
        l->zeros++;
        return;
    }
    l->counts[b]++;
    if (b < l->lo)
        l->lo = (int)b;
    if (b + 1 > l->hi)
        l->hi = (int)b + 1;
    l->total += v;
    if (v > l->top)
        l->top = v;
}

/* part.total += total; part.top = max(part.top, top) (top < 0: nothing seen) */
static int
part_sum(PyObject *part, long long total, long long top)
{
    if (top < 0)
        return 0;
    PyObject *cur = PyObject_GetAttr(part, str_total);
    if (cur == NULL)
        return -1;
    PyObject *by = PyLong_FromLongLong(total);
    PyObject *sum = by ? PyNumber_Add(cur, by) : NULL;
    Py_DECREF(cur);
    Py_XDECREF(by);
    if (sum == NULL)
        return -1;
    int rc = PyObject_SetAttr(part, str_total, sum);
    Py_DECREF(sum);
    if (rc < 0)
        return -1;
    cur = PyObject_GetAttr(part, str_top);
    if (cur == NULL)
        return -1;
    PyObject *t = PyLong_FromLongLong(top);
    int gt = t ? PyObject_RichCompareBool(t, cur, Py_GT) : -1;
    Py_DECREF(cur);
    if (gt > 0)
        rc = PyObject_SetAttr(part, str_top, t);
    Py_XDECREF(t);
    return gt < 0 ? -1 : rc;
}

/* A local histogram into its part: the counts, the zeros, the sum and the maximum. */
static int
local_flush(Local *l, PyObject *part, long zero)
{
    if (l->zeros == 0 && l->hi <= l->lo)
        return 0;
    PyObject *hist = PyObject_GetAttr(part, str_hist);
    if (hist == NULL)
        return -1;
    int rc = 0;
    if (l->zeros) {
        PyObject *key = PyLong_FromLong(zero);
        rc = key ? dict_add(hist, key, l->zeros) : -1;
        Py_XDECREF(key);
    }
    for (int b = l->lo; rc == 0 && b < l->hi; b++) {
        if (l->counts[b]) {
            PyObject *key = bucket_key(b);
            rc = key ? dict_add(hist, key, l->counts[b]) : -1;
            Py_XDECREF(key);
        }
    }
    Py_DECREF(hist);
    if (rc == 0 && l->hi > l->lo)
        rc = part_sum(part, l->total, l->top);
    return rc;
}

static void
local_init(Local *l)
{
    l->zeros = 0;
    l->lo = NBUCKETS;
    l->hi = 0;
    l->total = 0;
    l->top = 0;
    /* counts are zeroed by the caller once (calloc) and after each flush */
}

static void
local_clear(Local *l)
{
    if (l->hi > l->lo)
        memset(&l->counts[l->lo], 0, sizeof(int32_t) * (size_t)(l->hi - l->lo));
    local_init(l);
}

#define WIDS 1024 /* worker ids whose entry a batch remembers in an array */
#define PATHS 1024 /* paths a batch remembers (open addressing; half of them used at most) */

typedef struct {
    const char *path; /* into the batch's lines: valid for the call */
    Py_ssize_t len;
    uint64_t hash;
    Entry *entry;
} PathSlot;

typedef struct {
    Local service, queue, whole;
    Parts parts;
    Entry *by_wid[WIDS];
    PathSlot paths[PATHS];
    int paths_used;
} Scratch;

/* The slot of a path in the batch's table: its own, or a free one to fill (NULL: full). */
static PathSlot *
path_slot(Scratch *s, const char *path, Py_ssize_t len)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (Py_ssize_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)path[i]) * 1099511628211ULL;
    size_t i = (size_t)h & (PATHS - 1);
    for (;;) {
        PathSlot *slot = &s->paths[i];
        if (slot->entry == NULL) {
            if (s->paths_used >= PATHS / 2)
                return NULL;
            slot->hash = h;
            return slot;
        }
        if (slot->hash == h && slot->len == len && memcmp(slot->path, path, (size_t)len) == 0)
            return slot;
        i = (i + 1) & (PATHS - 1);
    }
}

/* Scratch space, kept between calls: each call takes one from the pool and gives it back
 * (clean). Calls hold the GIL, but a resolver runs Python code, which can let another
 * thread (another instance's reader) call in meanwhile: it takes another. */
#define POOL 8
static Scratch *pool[POOL];
static int pooled;

static Scratch *
scratch_take(void)
{
    if (pooled > 0)
        return pool[--pooled];
    Scratch *s = PyMem_Calloc(1, sizeof(Scratch));
    if (s == NULL)
        return NULL;
    local_init(&s->service);
    local_init(&s->queue);
    local_init(&s->whole);
    return s;
}

static void
scratch_give(Scratch *s)
{
    if (pooled < POOL)
        pool[pooled++] = s;
    else
        PyMem_Free(s);
}

static PyObject *
record(PyObject *self, PyObject *args)
{
    PyObject *lines, *service, *queue, *whole, *wcache, *wresolve, *rcache, *rresolve;
    double inv;
    long zero;
    long long max_wait;
    Py_ssize_t cap;
    if (!PyArg_ParseTuple(args, "O!OOOO!OO!OdlLn", &PyList_Type, &lines, &service, &queue,
                          &whole, &PyDict_Type, &wcache, &wresolve, &PyDict_Type, &rcache,
                          &rresolve, &inv, &zero, &max_wait, &cap))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(lines);
    if (n == 0)
        Py_RETURN_NONE;
    Row *rows = PyMem_Malloc(sizeof(Row) * (size_t)n);
    if (rows == NULL)
        return PyErr_NoMemory();
    if (!parse_all(lines, rows, n)) {
        PyMem_Free(rows);
        Py_RETURN_NONE;
    }
    Scratch *s = scratch_take();
    if (s == NULL) {
        PyMem_Free(rows);
        return PyErr_NoMemory();
    }
    Parts *t = &s->parts;
    long long status[NSTATUS] = {0};
    long long nginx = 0, unstamped = 0;
    PyObject *others = PyList_New(0), *odd = PyList_New(0), *spare = PyList_New(0);
    PyObject *out = NULL;
    int ok = others != NULL && odd != NULL && spare != NULL;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        Row *r = &rows[i];
        long long v = r->service;
        long b = bucket(v, inv, zero);
        if (v > 0 && (b < 0 || b >= NBUCKETS)) {
            PyErr_SetString(PyExc_ValueError, "_fastlog: a bucket out of range");
            ok = 0;
            break;
        }
        local_add(&s->service, v, b);
        /* its worker's part, then its route's: each found once per batch (a worker id
         * or a path keeps its part within a call: the caches only grow) */
        Entry *e = r->wid < WIDS ? s->by_wid[r->wid] : NULL;
        if (e == NULL) {
            PyObject *key = PyLong_FromLong(r->wid);
            PyObject *part = key ? part_of(wcache, wresolve, key, cap, &spare) : NULL;
            Py_XDECREF(key);
            e = part ? entry_of(t, part) : NULL;
            if (e != NULL && r->wid < WIDS)
                s->by_wid[r->wid] = e;
        }
        if (e == NULL || hist_add(e->hist, b) < 0) {
            ok = 0;
            break;
        }
        e->total += v;
        if (v > e->top)
            e->top = v;
        PathSlot *slot = path_slot(s, r->path, r->path_len);
        e = slot != NULL ? slot->entry : NULL;
        if (e == NULL) {
            PyObject *key = PyBytes_FromStringAndSize(r->path, r->path_len);
            PyObject *part = key ? part_of(rcache, rresolve, key, cap, &spare) : NULL;
            Py_XDECREF(key);
            e = part ? entry_of(t, part) : NULL;
            if (e != NULL && slot != NULL) {
                slot->path = r->path;
                slot->len = r->path_len;
                slot->entry = e;
                s->paths_used++;
            }
        }
        if (e == NULL || hist_add(e->hist, b) < 0) {
            ok = 0;
            break;
        }
        e->total += v;
        if (v > e->top)
            e->top = v;
        status[(r->status >= 100 && r->status <= 599) ? r->status / 100 : 0]++;
        if (r->secs != NULL) {
            nginx++;
            long long mark = number(r->secs, 10) * 1000 + number(r->secs + 11, 3);
            long long wait = r->start - mark * 1000;
            if (wait >= 0 && wait <= max_wait) {
                local_add(&s->queue, wait, bucket(wait, inv, zero));
                long long w = wait + v;
                long bw = bucket(w, inv, zero);
                if (w > 0 && (bw < 0 || bw >= NBUCKETS)) {
                    PyErr_SetString(PyExc_ValueError, "_fastlog: a bucket out of range");
                    ok = 0;
                    break;
                }
                local_add(&s->whole, w, bw);
            }
            else {
                PyObject *pair = Py_BuildValue("(LL)", wait, v);
                ok = pair != NULL && PyList_Append(odd, pair) == 0;
                Py_XDECREF(pair);
            }
        }
        else if (r->stamp_len == 0 || (r->stamp_len == 1 && r->stamp[0] == '-')) {
            unstamped++;
        }
        else {
            PyObject *item = Py_BuildValue("(Ly#L)", r->start, r->stamp, r->stamp_len, v);
            ok = item != NULL && PyList_Append(others, item) == 0;
            Py_XDECREF(item);
        }
    }
    /* the batch's sums into the parts, and every scratch left clean */
    for (int i = 0; i < t->n; i++) {
        Entry *e = &t->entries[i];
        if (ok && part_sum(e->part, e->total, e->top) < 0)
            ok = 0;
        Py_CLEAR(e->hist);
    }
    memset(t->keys, 0, sizeof t->keys);
    t->n = 0;
    memset(s->by_wid, 0, sizeof s->by_wid);
    memset(s->paths, 0, sizeof s->paths);
    s->paths_used = 0;
    if (ok && (local_flush(&s->service, service, zero) < 0 ||
               local_flush(&s->queue, queue, zero) < 0 ||
               local_flush(&s->whole, whole, zero) < 0))
        ok = 0;
    local_clear(&s->service);
    local_clear(&s->queue);
    local_clear(&s->whole);
    scratch_give(s);
    if (ok)
        out = Py_BuildValue("((LLLLLL)LLOO)", status[0], status[1], status[2], status[3],
                            status[4], status[5], nginx, unstamped, others, odd);
    Py_XDECREF(others);
    Py_XDECREF(odd);
    Py_XDECREF(spare);
    PyMem_Free(rows);
    return out;
}

/* -- the running sums -------------------------------------------------------------------- */

/* hist[k] += sign * c for each bucket k and count c of a frozen histogram (two arrays of 4-byte
 * items, loghist.FrozenHist); with sign -1, a bucket left at 0 is deleted (loghist.unmerge). */
static PyObject *
merge_frozen(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *hist, *keys, *counts;
    int sign;
    if (!PyArg_ParseTuple(args, "O!OOi", &PyDict_Type, &hist, &keys, &counts, &sign))
        return NULL;
    Py_buffer kb, cb;
    if (PyObject_GetBuffer(keys, &kb, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(counts, &cb, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&kb);
        return NULL;
    }
    int ok = kb.itemsize == 4 && cb.itemsize == 4 && kb.len == cb.len && kb.format != NULL &&
             cb.format != NULL && strcmp(kb.format, "i") == 0 && strcmp(cb.format, "I") == 0 &&
             (sign == 1 || sign == -1);
    if (!ok)
        PyErr_SetString(PyExc_TypeError, "merge_frozen(): arrays 'i' and 'I' of one length");
    Py_ssize_t n = kb.len / 4;
    const int32_t *k = kb.buf;
    const uint32_t *c = cb.buf;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        PyObject *key = k[i] >= 0 && k[i] < NBUCKETS ? bucket_key(k[i]) : PyLong_FromLong(k[i]);
        if (key == NULL) {
            ok = 0;
            break;
        }
        if (sign > 0) {
            ok = dict_add(hist, key, (long long)c[i]) == 0;
        }
        else {
            PyObject *cur = PyDict_GetItemWithError(hist, key);
            long long left = 0;
            if (cur == NULL) {
                if (!PyErr_Occurred())
                    PyErr_SetObject(PyExc_KeyError, key);
                ok = 0;
            }
            else if ((left = PyLong_AsLongLong(cur) - (long long)c[i]) == -1 - (long long)c[i] &&
                     PyErr_Occurred()) {
                ok = 0;
            }
            else if (left) {
                PyObject *nv = PyLong_FromLongLong(left);
                ok = nv != NULL && PyDict_SetItem(hist, key, nv) == 0;
                Py_XDECREF(nv);
            }
            else {
                ok = PyDict_DelItem(hist, key) == 0;
            }
        }
        Py_DECREF(key);
    }
    PyBuffer_Release(&kb);
    PyBuffer_Release(&cb);
    if (!ok)
        return NULL;
    Py_RETURN_NONE;
}

/* -- reading a histogram ------------------------------------------------------------------ */

typedef struct {
    long long key, count;
} Bucket;

static int
by_key(const void *a, const void *b)
{
    long long x = ((const Bucket *)a)->key, y = ((const Bucket *)b)->key;
    return (x > y) - (x < y);
}

/* A dict's (bucket, count) pairs (n of them), or NULL (an exception). */
static Bucket *
buckets_of(PyObject *hist, Py_ssize_t *n)
{
    *n = PyDict_GET_SIZE(hist);
    Bucket *out = PyMem_Malloc(sizeof(Bucket) * (size_t)(*n > 0 ? *n : 1));
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    Py_ssize_t pos = 0, i = 0;
    PyObject *k, *v;
    while (PyDict_Next(hist, &pos, &k, &v)) {
        out[i].key = PyLong_AsLongLong(k);
        out[i].count = PyLong_AsLongLong(v);
        if ((out[i].key == -1 || out[i].count == -1) && PyErr_Occurred()) {
            PyMem_Free(out);
            return NULL;
        }
        i++;
    }
    return out;
}

/* A list of ints from `m` long longs. */
static PyObject *
int_list(const long long *v, Py_ssize_t m)
{
    PyObject *out = PyList_New(m);
    for (Py_ssize_t j = 0; out != NULL && j < m; j++) {
        PyObject *x = PyLong_FromLongLong(v[j]);
        if (x == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, j, x);
    }
    return out;
}

/* `m` ints of a sequence into a new array (NULL: an exception). */
static long long *
longs_of(PyObject *seq, Py_ssize_t m)
{
    long long *out = PyMem_Malloc(sizeof(long long) * (size_t)(m > 0 ? m : 1));
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t j = 0; j < m; j++) {
        out[j] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, j));
        if (out[j] == -1 && PyErr_Occurred()) {
            PyMem_Free(out);
            return NULL;
        }
    }
    return out;
}

/* loghist.at_ranks' buckets: for each rank (ascending, 1..the count), the first bucket whose
 * running count reaches it. */
static PyObject *
keys_at_ranks(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *hist, *ranks, *out = NULL;
    if (!PyArg_ParseTuple(args, "O!O!", &PyDict_Type, &hist, &PyList_Type, &ranks))
        return NULL;
    Py_ssize_t n, m = PyList_GET_SIZE(ranks);
    Bucket *b = buckets_of(hist, &n);
    long long *want = b ? longs_of(ranks, m) : NULL;
    if (want == NULL)
        goto done;
    qsort(b, (size_t)n, sizeof(Bucket), by_key);
    Py_ssize_t i = 0;
    long long running = n > 0 ? b[0].count : 0;
    for (Py_ssize_t j = 0; j < m; j++) {
        while (i < n && running < want[j]) {
            i++;
            if (i < n)
                running += b[i].count;
        }
        if (i >= n) {
            PyErr_SetString(PyExc_IndexError, "keys_at_ranks(): a rank beyond the count");
            goto done;
        }
        want[j] = b[i].key; /* the answer, in the rank's place */
    }
    out = int_list(want, m);
done:
    PyMem_Free(b);
    PyMem_Free(want);
    return out;
}

/* loghist.cumulative: for each bucket bound `lasts[j]` (non-decreasing), the count of every
 * bucket at or below it; then the whole count. */
static PyObject *
cum_counts(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *hist, *lasts, *out = NULL;
    if (!PyArg_ParseTuple(args, "O!O!", &PyDict_Type, &hist, &PyTuple_Type, &lasts))
        return NULL;
    Py_ssize_t n, m = PyTuple_GET_SIZE(lasts);
    Bucket *b = buckets_of(hist, &n);
    long long *bound = b ? longs_of(lasts, m) : NULL;
    long long *bins = bound ? PyMem_Calloc((size_t)(m + 1), sizeof(long long)) : NULL;
    if (bins == NULL) {
        if (bound != NULL)
            PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t lo = 0, hi = m; /* the first bound at or above the key (m: none) */
        while (lo < hi) {
            Py_ssize_t mid = (lo + hi) / 2;
            if (bound[mid] >= b[i].key)
                hi = mid;
            else
                lo = mid + 1;
        }
        bins[lo] += b[i].count;
    }
    for (Py_ssize_t j = 1; j <= m; j++)
        bins[j] += bins[j - 1];
    out = int_list(bins, m + 1);
done:
    PyMem_Free(b);
    PyMem_Free(bound);
    PyMem_Free(bins);
    return out;
}

static PyMethodDef methods[] = {
    {"keys_at_ranks", keys_at_ranks, METH_VARARGS,
     "The bucket at each rank (ascending) of a histogram (loghist.at_ranks)."},
    {"cum_counts", cum_counts, METH_VARARGS,
     "The count at or below each bucket bound, then the whole (loghist.cumulative)."},
    {"merge_frozen", merge_frozen, METH_VARARGS,
     "hist[k] += sign * c over a frozen histogram's arrays (-1: zeros deleted)."},
    {"scan", scan, METH_O, "The rows parse_batch answers for these lines, or None."},
    {"record", record, METH_VARARGS, "Parse and record a batch (see the module's comment)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastlog", "The request log's common batch in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__fastlog(void)
{
    str_hist = PyUnicode_InternFromString("hist");
    str_total = PyUnicode_InternFromString("total");
    str_top = PyUnicode_InternFromString("top");
    if (str_hist == NULL || str_total == NULL || str_top == NULL)
        return NULL;
    return PyModule_Create(&module);
}

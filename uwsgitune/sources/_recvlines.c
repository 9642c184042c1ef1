/* uwsgitune.sources._recvlines: the request log's datagrams read in C (Linux's recvmmsg).
 *
 * An optional accelerator for sources/reqlog.py `Receiver._read_batches` (issue 38: the
 * CPU per ingested line). sources/mmsg.py does the same through ctypes, and stays where
 * this is not built; tests run both and compare them.
 *
 *   recv(fd, ask, slot) -> None | (read, groups, received, oversized, empty, cut, kept)
 *
 * One `recvmmsg(fd, ..., min(ask, 64), MSG_DONTWAIT)`: never blocks; None when nothing is
 * queued (or the call fails: the caller stops, as after recvfrom's). Each datagram lands in
 * its own `slot` bytes (the caller sizes it one byte over the longest it keeps): one that
 * fills its slot is `oversized`, one of 0 bytes `empty`, both dropped; the others are kept,
 * less their last byte when it is a newline, else whole and counted as `cut`. `groups` is
 * the kept datagrams as [(key, [bytes, ...]), ...], one pair per run of datagrams from one
 * source in arrival order; a key is the first 8 bytes of the source's sockaddr_in (family,
 * port, IPv4 address) as a native 64-bit int, as sources/mmsg.py `RecvMmsg.keys` gives it.
 * `kept` is the kept datagrams' bytes (without the newlines). The GIL stays held: the call
 * never waits, and its buffers are shared by every caller.
 */
#define _GNU_SOURCE /* recvmmsg */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#ifdef __linux__
#include <netinet/in.h>
#include <sys/socket.h>

#define VLEN 64
#define HEAD 1024 /* each slot's first bytes, in one dense buffer (a line is ~100-500) */

static struct mmsghdr hdrs[VLEN];
static struct iovec iovs[2 * VLEN];
static struct sockaddr_in names[VLEN];
static char heads[VLEN * HEAD];
static char *rests; /* VLEN * (slot - HEAD): pages mapped only where a long line lands */
static Py_ssize_t cur_slot; /* the slot the buffers are laid out for (0: not yet) */

static int
buffers(Py_ssize_t slot)
{
    char *got = NULL;
    if (slot > HEAD) {
        got = PyMem_RawMalloc((size_t)VLEN * (size_t)(slot - HEAD));
        if (got == NULL)
            return -1;
    }
    PyMem_RawFree(rests);
    rests = got;
    cur_slot = slot;
    for (int i = 0; i < VLEN; i++) {
        iovs[2 * i].iov_base = heads + (size_t)i * HEAD;
        iovs[2 * i].iov_len = (size_t)(slot > HEAD ? HEAD : slot);
        iovs[2 * i + 1].iov_base = rests ? rests + (size_t)i * (size_t)(slot - HEAD) : NULL;
        iovs[2 * i + 1].iov_len = slot > HEAD ? (size_t)(slot - HEAD) : 0;
        memset(&hdrs[i].msg_hdr, 0, sizeof hdrs[i].msg_hdr);
        hdrs[i].msg_hdr.msg_iov = &iovs[2 * i];
        hdrs[i].msg_hdr.msg_iovlen = slot > HEAD ? 2 : 1;
    }
    return 0;
}

/* The first `len` bytes of datagram i as bytes: from its head, or its head then the rest of
 * its slot. */
static PyObject *
datagram(int i, Py_ssize_t len)
{
    const char *head = heads + (size_t)i * HEAD;
    if (len <= HEAD)
        return PyBytes_FromStringAndSize(head, len);
    PyObject *out = PyBytes_FromStringAndSize(NULL, len);
    if (out == NULL)
        return NULL;
    char *to = PyBytes_AS_STRING(out);
    memcpy(to, head, HEAD);
    memcpy(to + HEAD, rests + (size_t)i * (size_t)(cur_slot - HEAD), (size_t)(len - HEAD));
    return out;
}

static char
last_byte(int i, Py_ssize_t len)
{
    if (len <= HEAD)
        return heads[(size_t)i * HEAD + (size_t)len - 1];
    return rests[(size_t)i * (size_t)(cur_slot - HEAD) + (size_t)(len - HEAD) - 1];
}

static PyObject *
recv_(PyObject *self, PyObject *args)
{
    (void)self;
    int fd;
    Py_ssize_t ask, slot;
    if (!PyArg_ParseTuple(args, "inn", &fd, &ask, &slot))
        return NULL;
    if (slot < 2) {
        PyErr_SetString(PyExc_ValueError, "recv(): a slot holds at least 2 bytes");
        return NULL;
    }
    if (slot != cur_slot && buffers(slot) < 0)
        return PyErr_NoMemory();
    unsigned int vlen = (unsigned int)(ask < 1 ? 1 : ask > VLEN ? VLEN : ask);
    for (unsigned int i = 0; i < vlen; i++) {
        hdrs[i].msg_hdr.msg_name = &names[i];
        hdrs[i].msg_hdr.msg_namelen = sizeof names[i];
        hdrs[i].msg_hdr.msg_flags = 0;
    }
    int n = recvmmsg(fd, hdrs, vlen, MSG_DONTWAIT, NULL);
    if (n <= 0)
        Py_RETURN_NONE;
    Py_ssize_t keep_max = slot - 1; /* the longest datagram kept */
    Py_ssize_t received = 0, oversized = 0, empty = 0, cut = 0, kept = 0;
    PyObject *groups = PyList_New(0);
    PyObject *run = NULL; /* the current source's list (owned by its pair in groups) */
    uint64_t run_key = 0;
    for (int i = 0; groups != NULL && i < n; i++) {
        Py_ssize_t len = (Py_ssize_t)hdrs[i].msg_len;
        if (len > keep_max || (hdrs[i].msg_hdr.msg_flags & MSG_TRUNC)) {
            oversized++;
            continue;
        }
        if (len == 0) {
            empty++;
            continue;
        }
        if (last_byte(i, len) == '\n')
            len--;
        else
            cut++;
        received++;
        kept += len;
        uint64_t key;
        memcpy(&key, &names[i], sizeof key);
        if (run == NULL || key != run_key) {
            run = PyList_New(0);
            PyObject *pair = run ? Py_BuildValue("(KN)", (unsigned long long)key, run) : NULL;
            if (pair == NULL || PyList_Append(groups, pair) < 0) {
                Py_XDECREF(pair);
                Py_CLEAR(groups);
                break;
            }
            Py_DECREF(pair); /* groups holds it, and it holds run */
            run_key = key;
        }
        PyObject *line = datagram(i, len);
        if (line == NULL || PyList_Append(run, line) < 0) {
            Py_XDECREF(line);
            Py_CLEAR(groups);
            break;
        }
        Py_DECREF(line);
    }
    if (groups == NULL)
        return NULL;
    return Py_BuildValue("(iNnnnnn)", n, groups, received, oversized, empty, cut, kept);
}

static PyMethodDef methods[] = {
    {"recv", recv_, METH_VARARGS, "One recvmmsg call, its datagrams cut into lines."},
    {NULL, NULL, 0, NULL},
};
#else
static PyMethodDef methods[] = {{NULL, NULL, 0, NULL}};
#endif

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_recvlines", "The request log's datagrams read in C.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__recvlines(void)
{
    return PyModule_Create(&module);
}

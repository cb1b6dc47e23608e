/*
 * sink/sink_lines: the JSON-lines sink (sink.type file or stdout) for trials,
 * demos and tests. One line per record:
 *
 *   {"topic": "<topic>", "key": <key bytes>, "value": <value bytes or null>}
 *
 * followed, for a record with headers (extended.headers.enabled), by
 * `, "headers": {"<name>": "<value>", ...}` in the record's header order.
 * The key and value are JSON texts from the encoder and are embedded verbatim,
 * so a test can check their exact bytes; the topic is JSON-escaped; a
 * tombstone (value NULL) writes null. Lines are gathered in a buffer and
 * written with write(2) when it passes 64 KiB and on every sink_poll() /
 * sink_flush(); the delivery callbacks of a batch fire once its bytes have
 * been written in full, so an "acknowledged" record is in the file (not
 * necessarily on disk: no fsync, this is not the durable sink). The file is
 * opened for append.
 *
 * A failed write (ENOSPC, EFBIG, EPIPE, ...) acknowledges the records whose
 * lines were written in full and fails the rest, so the stored position stays
 * before the first record not in the file; every later record fails at once
 * (the task restarts from its offsets, worker_commit.c). A regular file is
 * then cut back to its last complete line, and so is a file that ends in a
 * partial line when it is opened (an earlier crash or full disk): a re-sent
 * record is never appended to half a line.
 *
 * The capture tasks of a sharded cluster each have a sink, all appending to
 * the same file or stdout: writes (and the cuts) are serialised by one
 * process-wide lock, so one task's batch never lands inside another's (a
 * pipe splits writes over PIPE_BUF) and a cut never takes another task's
 * lines.
 *
 * Thread: worker.
 */
#include "sink/sink.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/jsonesc.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "sink/sink_internal.h"

#define BATCH_BYTES (64 * 1024)

/* Held while a batch is written (and a torn line cut), and while an opening
 * sink looks at the file's tail: every lines sink of the process. */
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;

struct lines_sink {
    int fd;
    bool own_fd;
    bool regular; /* a regular file: a torn line can be cut off */
    char *path;   /* for errors */
    char *buf;
    size_t len, cap;
    void **opaques; /* delivery reports owed for the bytes in buf */
    size_t *ends;   /* where each of their lines ends in buf */
    size_t n_opaques, cap_opaques;
    struct mcdc_error failed; /* a write error: every later record fails too */
};

static void reserve(struct lines_sink *ls, size_t n)
{
    if (ls->len + n <= ls->cap)
        return;
    size_t cap = ls->cap ? ls->cap : BATCH_BYTES * 2;
    while (ls->len + n > cap)
        cap *= 2;
    ls->buf = xrealloc(ls->buf, cap);
    ls->cap = cap;
}

static void put(struct lines_sink *ls, const char *s, size_t n)
{
    reserve(ls, n);
    memcpy(ls->buf + ls->len, s, n);
    ls->len += n;
}

static void put_escaped(struct lines_sink *ls, const char *s)
{
    size_t n = strlen(s);
    reserve(ls, MCDC_JSON_ESCAPE_MAX * n + 2);
    ls->buf[ls->len++] = '"';
    ls->len += mcdc_json_escape(MCDC_JSON_MINIMAL, ls->buf + ls->len, MCDC_JSON_ESCAPE_MAX * n, s,
                                n, NULL);
    ls->buf[ls->len++] = '"';
}

/*
 * After a failed write of which `written` bytes reached the file: cuts the
 * file back to the end of the last line written in full (base: the file's
 * size before the write). Returns that line count.
 */
static size_t cut_torn_line(struct lines_sink *ls, off_t base, size_t written)
{
    size_t whole = 0;
    while (whole < ls->n_opaques && ls->ends[whole] <= written)
        whole++;
    size_t keep = whole > 0 ? ls->ends[whole - 1] : 0;
    if (keep < written && ls->regular && base >= 0 &&
        ftruncate(ls->fd, base + (off_t)keep) != 0) {
        char was[sizeof ls->failed.msg];
        int e = errno;
        snprintf(was, sizeof was, "%s", ls->failed.msg);
        mcdc_error_set(&ls->failed, ls->failed.domain, ls->failed.code,
                       "%s; the partial line it left could not be removed: %s", was,
                       strerror(e));
    }
    return whole;
}

/* Writes the buffer out, then reports delivery of its records: those written
 * in full are acknowledged, the rest fail with the write's error. */
static int drain(struct sink *sink)
{
    struct lines_sink *ls = sink->impl;
    size_t off = 0, whole = ls->n_opaques;
    off_t base = -1;
    pthread_mutex_lock(&write_lock);
    if (ls->regular && ls->len > 0 && ls->failed.domain == MCDC_ERR_NONE)
        base = lseek(ls->fd, 0, SEEK_END); /* O_APPEND: where this batch starts */
    while (off < ls->len && ls->failed.domain == MCDC_ERR_NONE) {
        ssize_t w = write(ls->fd, ls->buf + off, ls->len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            mcdc_error_set(&ls->failed, MCDC_ERR_IO, errno, "sink %s: write: %s", ls->path,
                           strerror(errno));
        else
            off += (size_t)w;
    }
    if (off < ls->len)
        whole = cut_torn_line(ls, base, off);
    pthread_mutex_unlock(&write_lock);
    ls->len = 0;
    sink->in_flight_bytes = 0;
    size_t n = ls->n_opaques;
    ls->n_opaques = 0;
    for (size_t i = 0; i < n; i++) {
        sink->in_flight--;
        if (sink->cb)
            sink->cb(ls->opaques[i], i < whole ? NULL : &ls->failed, -1, false, sink->cb_ctx);
    }
    return (int)n;
}

static bool lines_produce(struct sink *sink, struct mcdc_record *rec, void *opaque,
                          const atomic_bool *stop, struct mcdc_error *err)
{
    (void)stop;
    (void)err;
    struct lines_sink *ls = sink->impl;
    if (ls->failed.domain != MCDC_ERR_NONE) {
        /* Not written after a failed write: reported failed like the record
         * that met the error (never false here, which the task would take
         * for a record that can never be delivered). */
        free(rec->key);
        free(rec->value);
        rec->key = rec->value = NULL;
        if (sink->cb)
            sink->cb(opaque, &ls->failed, -1, false, sink->cb_ctx);
        return true;
    }
    put(ls, "{\"topic\": ", 10);
    put_escaped(ls, rec->topic ? rec->topic : "");
    put(ls, ", \"key\": ", 9);
    if (rec->key)
        put(ls, rec->key, rec->key_len);
    else
        put(ls, "null", 4);
    put(ls, ", \"value\": ", 11);
    if (rec->value)
        put(ls, rec->value, rec->value_len);
    else
        put(ls, "null", 4);
    if (rec->header_count > 0) {
        put(ls, ", \"headers\": {", 14);
        for (size_t i = 0; i < rec->header_count; i++) {
            if (i > 0)
                put(ls, ", ", 2);
            put_escaped(ls, rec->headers[i].name);
            put(ls, ": ", 2);
            put_escaped(ls, rec->headers[i].value);
        }
        put(ls, "}", 1);
    }
    put(ls, "}\n", 2);
    if (ls->n_opaques == ls->cap_opaques) {
        ls->cap_opaques = ls->cap_opaques ? ls->cap_opaques * 2 : 256;
        ls->opaques = xrealloc(ls->opaques, ls->cap_opaques * sizeof *ls->opaques);
        ls->ends = xrealloc(ls->ends, ls->cap_opaques * sizeof *ls->ends);
    }
    ls->ends[ls->n_opaques] = ls->len;
    ls->opaques[ls->n_opaques++] = opaque;
    sink->in_flight++;
    sink->in_flight_bytes += rec->key_len + rec->value_len;
    free(rec->key);
    free(rec->value);
    rec->key = rec->value = NULL;
    if (ls->len >= BATCH_BYTES)
        drain(sink);
    return true;
}

static int lines_poll(struct sink *sink, int timeout_ms)
{
    (void)timeout_ms; /* nothing to wait for: writes are synchronous */
    return drain(sink);
}

static bool lines_flush(struct sink *sink, int timeout_ms, struct mcdc_error *err)
{
    struct lines_sink *ls = sink->impl;
    (void)timeout_ms;
    drain(sink);
    if (ls->failed.domain != MCDC_ERR_NONE) {
        *err = ls->failed;
        return false;
    }
    return true;
}

static bool lines_fatal(struct sink *sink, struct mcdc_error *err)
{
    struct lines_sink *ls = sink->impl;
    if (ls->failed.domain == MCDC_ERR_NONE)
        return false;
    if (err)
        *err = ls->failed;
    return true;
}

static void lines_destroy(struct sink *sink)
{
    struct lines_sink *ls = sink->impl;
    if (ls->own_fd)
        close(ls->fd);
    free(ls->path);
    free(ls->buf);
    free(ls->opaques);
    free(ls->ends);
    free(ls);
}

/*
 * A regular file that does not end in '\n' ends in a torn line (a crash or a
 * full disk in the middle of a write): cuts it off so that the next line
 * starts a line of its own. Returns false with errno on a failed read/cut.
 */
static bool cut_partial_tail(struct lines_sink *ls)
{
    struct stat st;
    if (fstat(ls->fd, &st) != 0)
        return false;
    ls->regular = S_ISREG(st.st_mode);
    if (!ls->regular || st.st_size == 0)
        return true;
    char chunk[4096];
    off_t end = st.st_size;
    while (end > 0) {
        off_t from = end > (off_t)sizeof chunk ? end - (off_t)sizeof chunk : 0;
        ssize_t n = pread(ls->fd, chunk, (size_t)(end - from), from);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n == 0 ? (errno = EIO, false) : false;
        for (ssize_t i = n - 1; i >= 0; i--) {
            if (chunk[i] == '\n') {
                off_t keep = from + i + 1;
                if (keep == st.st_size)
                    return true;
                LOG_WARN("sink %s ends in a partial line (%lld bytes, from an interrupted "
                         "write); cutting it off: its record is sent again",
                         ls->path, (long long)(st.st_size - keep));
                return ftruncate(ls->fd, keep) == 0;
            }
        }
        end = from;
    }
    LOG_WARN("sink %s holds a partial line only (%lld bytes, from an interrupted write); "
             "cutting it off: its record is sent again",
             ls->path, (long long)st.st_size);
    return ftruncate(ls->fd, 0) == 0;
}

static const struct sink_ops lines_ops = {lines_produce, lines_poll, lines_flush, lines_fatal,
                                          lines_destroy};

bool sink_lines_open(struct sink *sink, struct mcdc_error *err)
{
    const struct mcdc_config *cfg = sink->cfg;
    struct lines_sink *ls = xcalloc(1, sizeof *ls);
    if (cfg->sink_type == MCDC_SINK_STDOUT) {
        ls->fd = STDOUT_FILENO;
        ls->path = xstrdup("stdout");
    } else {
        if (!cfg->sink_path || !cfg->sink_path[0]) {
            free(ls);
            return mcdc_error_set(err, MCDC_ERR_CONFIG, 0,
                                  "sink.path is required with sink.type: file");
        }
        /* Read as well: the tail is checked for a partial line. */
        ls->fd = open(cfg->sink_path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (ls->fd < 0) {
            int e = errno;
            free(ls);
            return mcdc_error_set(err, MCDC_ERR_IO, e, "sink file %s: %s", cfg->sink_path,
                                  strerror(e));
        }
        ls->own_fd = true;
        ls->path = xstrdup(cfg->sink_path);
        pthread_mutex_lock(&write_lock);
        bool cut = cut_partial_tail(ls);
        int e = errno;
        pthread_mutex_unlock(&write_lock);
        if (!cut) {
            close(ls->fd);
            free(ls->path);
            free(ls);
            return mcdc_error_set(err, MCDC_ERR_IO, e,
                                  "sink file %s ends in a partial line that cannot be cut off: "
                                  "%s",
                                  cfg->sink_path, strerror(e));
        }
    }
    sink->impl = ls;
    sink->ops = &lines_ops;
    return true;
}

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
 * Thread: worker.
 */
#include "sink/sink.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/xalloc.h"
#include "sink/sink_internal.h"

#define BATCH_BYTES (64 * 1024)

struct lines_sink {
    int fd;
    bool own_fd;
    char *path; /* for errors */
    char *buf;
    size_t len, cap;
    void **opaques; /* delivery reports owed for the bytes in buf */
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
    put(ls, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put(ls, e, 2);
        } else if (c < 0x20) {
            char e[8];
            snprintf(e, sizeof e, "\\u%04x", c);
            put(ls, e, 6);
        } else {
            put(ls, (const char *)&c, 1);
        }
    }
    put(ls, "\"", 1);
}

/* Writes the buffer out, then reports delivery of its records (error or not). */
static int drain(struct sink *sink)
{
    struct lines_sink *ls = sink->impl;
    size_t off = 0;
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
    ls->len = 0;
    sink->in_flight_bytes = 0;
    size_t n = ls->n_opaques;
    ls->n_opaques = 0;
    for (size_t i = 0; i < n; i++) {
        sink->in_flight--;
        if (sink->cb)
            sink->cb(ls->opaques[i], ls->failed.domain == MCDC_ERR_NONE ? NULL : &ls->failed,
                     sink->cb_ctx);
    }
    return (int)n;
}

static bool lines_produce(struct sink *sink, struct mcdc_record *rec, void *opaque,
                          const volatile bool *stop, struct mcdc_error *err)
{
    (void)stop;
    struct lines_sink *ls = sink->impl;
    if (ls->failed.domain != MCDC_ERR_NONE) {
        *err = ls->failed;
        return false;
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
    }
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
    free(ls);
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
        ls->fd = open(cfg->sink_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (ls->fd < 0) {
            int e = errno;
            free(ls);
            return mcdc_error_set(err, MCDC_ERR_IO, e, "sink file %s: %s", cfg->sink_path,
                                  strerror(e));
        }
        ls->own_fd = true;
        ls->path = xstrdup(cfg->sink_path);
    }
    sink->impl = ls;
    sink->ops = &lines_ops;
    return true;
}

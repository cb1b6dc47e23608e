/*
 * signals/channels.c: the kafka and file signal channels (Debezium's
 * KafkaSignalChannel and FileSignalChannel) on one thread publishing on the
 * bus. See signal_channels_start() for what each does better than Debezium.
 */
#include "signals/signals.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "signals/signals_internal.h"

#define FILE_MAX_BYTES (16 * 1024 * 1024) /* one read of signal.file */

struct signal_channels {
    const struct mcdc_config *cfg;
    struct signal_bus *bus;
    pthread_t thread;
    bool running; /* thread started */
    atomic_bool stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* kafka */
    rd_kafka_t *rk;
    char topic[512];
    atomic_bool kafka_down; /* WARN given for the current outage (librdkafka's thread sets it) */
    /* file */
    bool file;
    int64_t next_file_ms;
    long file_lines; /* lines taken from the file's front since start: messages count on */
};

static bool has(const struct mcdc_strlist *l, const char *name)
{
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->items[i], name) == 0)
            return true;
    return false;
}

/* Parses one JSON signal of channel and publishes it; a bad one gets a WARN
 * naming where it came from (what). False when the bus is closed (the
 * daemon stops): the caller keeps the signal for the next run. */
static bool publish_json(struct signal_channels *ch, const char *json, size_t len,
                         enum mcdc_signal_channel channel, const char *what)
{
    struct mcdc_signal sig;
    struct mcdc_error err = MCDC_ERROR_INIT;
    bool ok;
    if (!mcdc_signal_parse_json(json, len, channel, &sig, &err)) {
        LOG_WARN("%s: %s; ignored", what, err.msg);
        return true;
    }
    ok = signal_bus_publish(ch->bus, &sig);
    if (ok)
        LOG_INFO("%s: signal '%s' (%s) received", what, sig.id, mcdc_signal_type_name(sig.type));
    else
        LOG_INFO("%s: signal '%s' (%s) left for the next run: capture is stopping", what, sig.id,
                 mcdc_signal_type_name(sig.type));
    mcdc_signal_destroy(&sig);
    return ok;
}

/* ---- kafka ----------------------------------------------------------- */

static void kafka_error_cb(rd_kafka_t *rk, int code, const char *reason, void *opaque)
{
    struct signal_channels *ch = opaque;
    (void)rk;
    if (code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || code == RD_KAFKA_RESP_ERR__TRANSPORT ||
        code == RD_KAFKA_RESP_ERR__RESOLVE) {
        if (!atomic_exchange(&ch->kafka_down, true))
            LOG_WARN("kafka signal channel: %s; signals on %s wait until it is back (capture "
                     "goes on)",
                     reason, ch->topic);
        return;
    }
    LOG_WARN("kafka signal channel: %s: %s", rd_kafka_err2name((rd_kafka_resp_err_t)code), reason);
}

static bool kafka_open(struct signal_channels *ch, struct mcdc_error *err)
{
    const struct mcdc_config *cfg = ch->cfg;
    char errstr[512];
    char tbuf[512];
    snprintf(ch->topic, sizeof ch->topic, "%s", sig_kafka_topic(cfg, tbuf, sizeof tbuf));
    char cid[64];
    snprintf(cid, sizeof cid, "mongocdc-signal-%ld", (long)getpid());
    rd_kafka_conf_t *conf = mcdc_kafka_signal_consumer_conf(cfg, cid, err);
    if (!conf) {
        mcdc_error_prefix(err, "kafka signal channel");
        return false;
    }
    rd_kafka_conf_set_error_cb(conf, kafka_error_cb);
    rd_kafka_conf_set_opaque(conf, ch);
    ch->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    if (!ch->rk) {
        rd_kafka_conf_destroy(conf);
        return mcdc_error_set(err, MCDC_ERR_KAFKA, 0, "kafka signal channel: %s", errstr);
    }
    rd_kafka_poll_set_consumer(ch->rk);
    /* Partition 0 only, as Debezium; from the group's committed offset. */
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(parts, ch->topic, 0)->offset = RD_KAFKA_OFFSET_STORED;
    rd_kafka_resp_err_t e = rd_kafka_assign(ch->rk, parts);
    rd_kafka_topic_partition_list_destroy(parts);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_destroy(ch->rk);
        ch->rk = NULL;
        return mcdc_error_set(err, MCDC_ERR_KAFKA, e, "kafka signal channel: assign %s: %s",
                              ch->topic, rd_kafka_err2str(e));
    }
    LOG_INFO("kafka signal channel: reading %s partition 0 as group %s (from its committed "
             "offset, else the earliest)",
             ch->topic, cfg->signal_kafka_group);
    return true;
}

static void kafka_commit(struct signal_channels *ch, const rd_kafka_message_t *m)
{
    rd_kafka_topic_partition_list_t *p = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(p, ch->topic, m->partition)->offset = m->offset + 1;
    rd_kafka_resp_err_t e = rd_kafka_commit(ch->rk, p, 0); /* synchronous */
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        LOG_WARN("kafka signal channel: cannot commit offset %lld of %s: %s (the signal may be "
                 "read again after a restart)",
                 (long long)m->offset + 1, ch->topic, rd_kafka_err2str(e));
    rd_kafka_topic_partition_list_destroy(p);
}

static void kafka_poll(struct signal_channels *ch)
{
    const struct mcdc_config *cfg = ch->cfg;
    rd_kafka_message_t *m = rd_kafka_consumer_poll(ch->rk, (int)cfg->signal_kafka_poll_timeout_ms);
    if (!m)
        return;
    if (m->err) {
        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (!atomic_exchange(&ch->kafka_down, true))
                LOG_WARN("kafka signal channel: %s: %s", ch->topic, rd_kafka_message_errstr(m));
        }
        rd_kafka_message_destroy(m);
        return;
    }
    if (atomic_exchange(&ch->kafka_down, false))
        LOG_INFO("kafka signal channel: reading %s again", ch->topic);
    char what[600];
    snprintf(what, sizeof what, "kafka signal channel %s offset %lld", ch->topic,
             (long long)m->offset);
    const char *prefix = cfg->topic_prefix ? cfg->topic_prefix : "";
    if (!m->key || m->key_len != strlen(prefix) || memcmp(m->key, prefix, m->key_len) != 0) {
        LOG_INFO("Signal key '%.*s' doesn't match the connector's name '%s' (%s)",
                 m->key ? (int)m->key_len : 4, m->key ? (const char *)m->key : "null", prefix,
                 what);
    } else if (m->payload && m->len > 0 &&
               !publish_json(ch, m->payload, m->len, MCDC_SIGNAL_CHANNEL_KAFKA, what)) {
        /* Not committed: the group's next reader starts at this record
         * (the thread reads nothing more once the bus is closed). */
        rd_kafka_message_destroy(m);
        return;
    }
    kafka_commit(ch, m);
    rd_kafka_message_destroy(m);
}

/* ---- file ------------------------------------------------------------- */

/* True when fd (signal.file, locked) still has size bytes: a writer that
 * does not take the lock (an operator's `echo >>`) may append at any time,
 * and bytes appended after the size was taken would be lost by the
 * truncation that cuts what was read. Checked right before truncating;
 * when the file grew, the caller leaves it as it is and the next poll reads
 * it again with the new bytes. */
static bool file_unchanged(int fd, size_t size)
{
    struct stat now;
    return fstat(fd, &now) == 0 && (size_t)now.st_size == size;
}

/* The first line of signal.file (fd, locked, size bytes) is longer than one
 * read (FILE_MAX_BYTES): no signal is that large, so once it is complete it
 * is cut from the file with a WARN giving its size, and the lines after it
 * are read at the next poll. Unfinished, it stays (one WARN per size seen). */
static void file_drop_long_line(struct signal_channels *ch, int fd, const char *path, size_t size)
{
    static size_t warned_size;
    char chunk[65536];
    size_t off = FILE_MAX_BYTES, nl = 0;
    bool found = false;

    while (!found && off < size) {
        ssize_t got = pread(fd, chunk, sizeof chunk, (off_t)off);
        if (got <= 0)
            break;
        char *p = memchr(chunk, '\n', (size_t)got);
        if (p != NULL) {
            nl = off + (size_t)(p - chunk);
            found = true;
        }
        off += (size_t)got;
    }
    if (!found) {
        if (warned_size != size)
            LOG_WARN("file signal channel: line %ld of %s has %zu bytes and no end yet, "
                     "over the %d MiB a signal may have; it is cut once complete",
                     ch->file_lines + 1, path, size, FILE_MAX_BYTES / (1024 * 1024));
        warned_size = size;
        return;
    }
    size_t rest_len = size - (nl + 1);
    char *rest = xmalloc(rest_len + 1);
    ssize_t rgot = rest_len ? pread(fd, rest, rest_len, (off_t)(nl + 1)) : 0;
    if (rgot >= 0 && (size_t)rgot == rest_len && !file_unchanged(fd, size)) {
        free(rest); /* still being appended to: cut at the next poll */
        return;
    }
    if (rgot < 0 || (size_t)rgot != rest_len ||
        ftruncate(fd, 0) != 0 || (rest_len && pwrite(fd, rest, rest_len, 0) != (ssize_t)rest_len)) {
        LOG_WARN("file signal channel: cannot cut the over-long first line of %s: %s", path,
                 strerror(errno));
    } else {
        ch->file_lines++;
        LOG_WARN("file signal channel: line %ld of %s has %zu bytes, over the %d MiB a signal may "
                 "have: not read as a signal, cut from the file",
                 ch->file_lines, path, nl, FILE_MAX_BYTES / (1024 * 1024));
    }
    free(rest);
}

/* Puts the complete lines text (len bytes, ending in a newline) back in
 * front of signal.file under flock: the daemon stopped before they reached
 * a task, so the next run reads them first. */
static void file_put_back(const char *path, const char *text, size_t len)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    struct stat st;
    char *rest = NULL;
    ssize_t got = 0;

    if (fd < 0 || flock(fd, LOCK_EX) != 0 || fstat(fd, &st) != 0) {
        LOG_ERROR("file signal channel: cannot put %zu bytes of unread signals back into %s: %s",
                  len, path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    rest = xmalloc((size_t)st.st_size + 1);
    if (st.st_size > 0)
        got = pread(fd, rest, (size_t)st.st_size, 0);
    if (got < 0 || (size_t)got != (size_t)st.st_size || pwrite(fd, text, len, 0) != (ssize_t)len ||
        (got > 0 && pwrite(fd, rest, (size_t)got, (off_t)len) != got))
        LOG_ERROR("file signal channel: cannot put %zu bytes of unread signals back into %s: %s",
                  len, path, strerror(errno));
    free(rest);
    close(fd);
}

/* Reads signal.file under flock: publishes its complete lines and writes
 * back what follows the last newline. */
static void file_poll(struct signal_channels *ch)
{
    const char *path = ch->cfg->signal_file;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT)
            LOG_WARN("file signal channel: cannot open %s: %s", path, strerror(errno));
        return;
    }
    struct stat st;
    if (flock(fd, LOCK_EX) != 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
        close(fd);
        return;
    }
    size_t size = st.st_size > FILE_MAX_BYTES ? FILE_MAX_BYTES : (size_t)st.st_size;
    char *buf = xmalloc(size + 1);
    ssize_t got = pread(fd, buf, size, 0);
    if (got <= 0) {
        LOG_WARN("file signal channel: cannot read %s: %s", path,
                 got < 0 ? strerror(errno) : "empty");
        free(buf);
        close(fd);
        return;
    }
    buf[got] = '\0';
    char *end = buf + got;
    while (end > buf && end[-1] != '\n')
        end--;
    if (end == buf) {
        free(buf);
        if ((size_t)got == FILE_MAX_BYTES)
            file_drop_long_line(ch, fd, path, (size_t)st.st_size);
        close(fd); /* otherwise a line still being written */
        return;
    }
    size_t used = (size_t)(end - buf);
    /* Keep what follows: the partial line and bytes past our read. */
    size_t rest_len = (size_t)st.st_size - used;
    char *rest = xmalloc(rest_len + 1);
    ssize_t rgot = rest_len ? pread(fd, rest, rest_len, (off_t)used) : 0;
    if (rgot < 0 || (size_t)rgot != rest_len) {
        LOG_WARN("file signal channel: cannot read %s: %s", path, strerror(errno));
        free(rest);
        free(buf);
        close(fd);
        return;
    }
    if (!file_unchanged(fd, (size_t)st.st_size)) {
        free(rest); /* still being appended to: read again at the next poll */
        free(buf);
        close(fd);
        return;
    }
    if (ftruncate(fd, 0) != 0 || (rest_len && pwrite(fd, rest, rest_len, 0) != (ssize_t)rest_len)) {
        LOG_WARN("file signal channel: cannot rewrite %s: %s; its signals are not read (they "
                 "would run again)",
                 path, strerror(errno));
        free(rest);
        free(buf);
        close(fd);
        return;
    }
    free(rest);
    close(fd); /* releases the lock */
    /* numbered from the first line this run read: consumed lines are cut
     * from the front, so the file's own line 1 moves on */
    long lineno = ch->file_lines;
    for (char *line = buf; line < buf + used;) {
        char *nl = memchr(line, '\n', (size_t)(buf + used - line));
        size_t len = (size_t)(nl - line);
        lineno++;
        size_t k = 0;
        while (k < len && (line[k] == ' ' || line[k] == '\t' || line[k] == '\r'))
            k++;
        if (k < len) {
            char what[600];
            snprintf(what, sizeof what, "file signal channel %s line %ld", path, lineno);
            if (!publish_json(ch, line, len, MCDC_SIGNAL_CHANNEL_FILE, what)) {
                file_put_back(path, line, (size_t)(buf + used - line));
                lineno--; /* back in the file */
                break;
            }
        }
        line = nl + 1;
    }
    ch->file_lines = lineno;
    free(buf);
}

/* ---- the thread -------------------------------------------------------- */

static void *channels_main(void *arg)
{
    struct signal_channels *ch = arg;
    mcdc_log_set_component("signals");
    while (!atomic_load(&ch->stop)) {
        int64_t wait;
        if (signal_bus_subscribers(ch->bus) == 0 || signal_bus_closed(ch->bus)) {
            /* no task to hand a signal to (yet, or any more): leave it where it is */
            wait = 100;
            goto sleep;
        }
        if (ch->file && mcdc_clock_mono_ms() >= ch->next_file_ms) {
            file_poll(ch);
            ch->next_file_ms = mcdc_clock_mono_ms() + ch->cfg->signal_poll_interval_ms;
        }
        if (ch->rk) {
            kafka_poll(ch); /* waits up to signal.kafka.poll.timeout.ms */
            if (ch->cfg->signal_kafka_poll_timeout_ms > 0)
                continue;
        }
        /* sleep until the next file read (or 100 ms with a non-blocking kafka poll) */
        wait = ch->file ? ch->next_file_ms - mcdc_clock_mono_ms() : 100;
        if (ch->rk && wait > 100)
            wait = 100;
        if (wait <= 0)
            continue;
    sleep:;
        struct timespec ts = mcdc_clock_deadline(CLOCK_REALTIME, wait);
        pthread_mutex_lock(&ch->mu);
        if (!atomic_load(&ch->stop))
            pthread_cond_timedwait(&ch->cv, &ch->mu, &ts);
        pthread_mutex_unlock(&ch->mu);
    }
    return NULL;
}

struct signal_channels *signal_channels_start(const struct mcdc_config *cfg, struct signal_bus *bus,
                                              struct mcdc_error *err)
{
    bool kafka = has(&cfg->signal_channels, "kafka"), file = has(&cfg->signal_channels, "file");
    if (!kafka && !file)
        return NULL;
    struct signal_channels *ch = xcalloc(1, sizeof *ch);
    ch->cfg = cfg;
    ch->bus = bus;
    ch->file = file;
    pthread_mutex_init(&ch->mu, NULL);
    pthread_cond_init(&ch->cv, NULL);
    if (kafka && !kafka_open(ch, err)) {
        signal_channels_stop(ch);
        return NULL;
    }
    if (file)
        LOG_INFO("file signal channel: reading %s every %lld ms", cfg->signal_file,
                 (long long)cfg->signal_poll_interval_ms);
    int rc = pthread_create(&ch->thread, NULL, channels_main, ch);
    if (rc != 0) {
        mcdc_error_set(err, MCDC_ERR_INTERNAL, rc, "signal channels: cannot start a thread: %s",
                       strerror(rc));
        signal_channels_stop(ch);
        return NULL;
    }
    ch->running = true;
    return ch;
}

void signal_channels_stop(struct signal_channels *ch)
{
    if (!ch)
        return;
    if (ch->running) {
        pthread_mutex_lock(&ch->mu);
        atomic_store(&ch->stop, true);
        pthread_cond_signal(&ch->cv);
        pthread_mutex_unlock(&ch->mu);
        pthread_join(ch->thread, NULL);
    }
    if (ch->rk) {
        rd_kafka_consumer_close(ch->rk);
        rd_kafka_destroy(ch->rk);
    }
    pthread_cond_destroy(&ch->cv);
    pthread_mutex_destroy(&ch->mu);
    free(ch);
}

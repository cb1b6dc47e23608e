/*
 * common/log: see log.h.
 *
 * The destination fd is swapped atomically on reopen; a line being written
 * while the fd changes goes to either file, never half to each (one write()).
 */
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/jsonesc.h"

#define LOG_LINE_MAX 8192

_Atomic int mcdc_log_level_current = MCDC_LOG_INFO;

static atomic_int log_fd = STDERR_FILENO;
static enum mcdc_log_format log_format = MCDC_LOG_FORMAT_TEXT;
static char log_path[4096];
static _Thread_local char log_component_buf[64];

static const char *const level_names[MCDC_LOG_LEVEL_COUNT] = {"error", "warn", "info", "debug"};
static const char *const level_tags[MCDC_LOG_LEVEL_COUNT] = {"ERROR", "WARN ", "INFO ", "DEBUG"};

const char *mcdc_log_level_name(enum mcdc_log_level level)
{
    if ((int)level < 0 || level >= MCDC_LOG_LEVEL_COUNT)
        return "unknown";
    return level_names[level];
}

bool mcdc_log_level_parse(const char *s, enum mcdc_log_level *out)
{
    for (int i = 0; i < MCDC_LOG_LEVEL_COUNT; i++) {
        if (strcasecmp(s, level_names[i]) == 0) {
            *out = (enum mcdc_log_level)i;
            return true;
        }
    }
    if (strcasecmp(s, "warning") == 0) {
        *out = MCDC_LOG_WARN;
        return true;
    }
    return false;
}

static int open_log_file(const char *path, struct mcdc_error *err)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        mcdc_error_set(err, MCDC_ERR_IO, errno, "cannot open log file %s: %s", path,
                       strerror(errno));
    return fd;
}

bool mcdc_log_open(enum mcdc_log_level level, enum mcdc_log_format format, const char *path,
                   struct mcdc_error *err)
{
    int fd = STDERR_FILENO;

    if (path != NULL && path[0] != '\0') {
        fd = open_log_file(path, err);
        if (fd < 0)
            return false;
        snprintf(log_path, sizeof log_path, "%s", path);
    } else {
        log_path[0] = '\0';
    }
    mcdc_log_level_current = (int)level;
    log_format = format;
    int old = atomic_exchange(&log_fd, fd);
    if (old != STDERR_FILENO && old != fd)
        close(old);
    return true;
}

bool mcdc_log_reopen(struct mcdc_error *err)
{
    if (log_path[0] == '\0')
        return true;
    int fd = open_log_file(log_path, err);
    if (fd < 0)
        return false;
    int old = atomic_exchange(&log_fd, fd);
    if (old != STDERR_FILENO)
        close(old);
    return true;
}

void mcdc_log_close(void)
{
    int old = atomic_exchange(&log_fd, STDERR_FILENO);
    if (old != STDERR_FILENO)
        close(old);
    log_path[0] = '\0';
}

void mcdc_log_set_component(const char *component)
{
    snprintf(log_component_buf, sizeof log_component_buf, "%s", component ? component : "");
}

const char *mcdc_log_component(void)
{
    return log_component_buf[0] ? log_component_buf : "main";
}

/* Appends s to buf[*len..cap) as JSON string content (no quotes), truncating
 * before the first escape that does not fit. */
static void append_json_escaped(char *buf, size_t *len, size_t cap, const char *s)
{
    if (*len < cap)
        *len += mcdc_json_escape(MCDC_JSON_LOG, buf + *len, cap - *len, s, strlen(s), NULL);
}

static void append_str(char *buf, size_t *len, size_t cap, const char *s)
{
    size_t n = strlen(s);
    if (*len + n >= cap)
        n = cap - *len - 1;
    memcpy(buf + *len, s, n);
    *len += n;
}

static void format_time(char *out, size_t cap)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, cap - n, ".%03ldZ", ts.tv_nsec / 1000000L);
}

void mcdc_log_write(enum mcdc_log_level level, const char *component, const char *msg)
{
    char line[LOG_LINE_MAX];
    char when[40];
    size_t len = 0;
    size_t cap = sizeof line - 1; /* room for the newline */

    if ((int)level < 0 || level >= MCDC_LOG_LEVEL_COUNT)
        level = MCDC_LOG_ERROR;
    if (component == NULL)
        component = mcdc_log_component();
    format_time(when, sizeof when);

    /* Drop one trailing newline that library callbacks often carry. */
    size_t mlen = strlen(msg);
    char trimmed[LOG_LINE_MAX];
    if (mlen > 0 && msg[mlen - 1] == '\n') {
        mlen = mlen - 1 < sizeof trimmed - 1 ? mlen - 1 : sizeof trimmed - 1;
        memcpy(trimmed, msg, mlen);
        trimmed[mlen] = '\0';
        msg = trimmed;
    }

    if (log_format == MCDC_LOG_FORMAT_JSON) {
        append_str(line, &len, cap, "{\"ts\":\"");
        append_str(line, &len, cap, when);
        append_str(line, &len, cap, "\",\"level\":\"");
        append_str(line, &len, cap, level_names[level]);
        append_str(line, &len, cap, "\",\"component\":\"");
        append_json_escaped(line, &len, cap - 3, component);
        append_str(line, &len, cap, "\",\"msg\":\"");
        append_json_escaped(line, &len, cap - 3, msg);
        append_str(line, &len, cap, "\"}");
    } else {
        append_str(line, &len, cap, when);
        append_str(line, &len, cap, " ");
        append_str(line, &len, cap, level_tags[level]);
        append_str(line, &len, cap, " [");
        append_str(line, &len, cap, component);
        append_str(line, &len, cap, "] ");
        append_str(line, &len, cap, msg);
    }
    line[len++] = '\n';
    (void)!write(atomic_load(&log_fd), line, len);
}

void mcdc_log(enum mcdc_log_level level, const char *fmt, ...)
{
    char msg[LOG_LINE_MAX - 128];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mcdc_log_write(level, NULL, msg);
}

/*
 * common/log: the one logger (style.md §4.5).
 *
 * Levels ERROR < WARN < INFO < DEBUG. Line formats:
 *   text: 2026-11-30T11:12:13.456Z INFO  [rs0] message
 *   json: {"ts":"2026-11-30T11:12:13.456Z","level":"info","component":"rs0","msg":"message"}
 * Each thread names itself once with mcdc_log_set_component() (replica-set name,
 * "main", ...); library callbacks may pass an explicit component ("mongoc",
 * "rdkafka"). Every line is written with one write() so lines from different
 * threads never interleave. The MCDC_LOG_* macros test the level before
 * evaluating their arguments.
 *
 * Thread: all functions are safe from any thread, except mcdc_log_open and
 * mcdc_log_close, which the main thread calls at start and exit.
 */
#ifndef MCDC_COMMON_LOG_H
#define MCDC_COMMON_LOG_H

#include <stdatomic.h>
#include <stdbool.h>

#include "common/error.h"

enum mcdc_log_level {
    MCDC_LOG_ERROR = 0,
    MCDC_LOG_WARN,
    MCDC_LOG_INFO,
    MCDC_LOG_DEBUG,
    MCDC_LOG_LEVEL_COUNT
};

enum mcdc_log_format {
    MCDC_LOG_FORMAT_TEXT = 0,
    MCDC_LOG_FORMAT_JSON,
    MCDC_LOG_FORMAT_COUNT
};

/* Current level; set at start-up, read by every thread without a lock. */
extern _Atomic int mcdc_log_level_current;

/*
 * Configures the logger. path NULL or "" logs to stderr; otherwise the file is
 * opened for append (created 0644). Returns false and fills err (domain IO) if
 * the file cannot be opened; the logger then keeps its previous destination.
 */
bool mcdc_log_open(enum mcdc_log_level level, enum mcdc_log_format format, const char *path,
                   struct mcdc_error *err);

/* Reopens the log file (SIGHUP, after log rotation). No-op when logging to stderr. */
bool mcdc_log_reopen(struct mcdc_error *err);

/* Closes the log file, if any; logging continues on stderr. */
void mcdc_log_close(void);

/* Sets this thread's component tag (copied, at most 63 bytes). */
void mcdc_log_set_component(const char *component);

/* This thread's component tag; "main" when never set. Borrowed, thread-local. */
const char *mcdc_log_component(void);

/* Parses "error|warn|info|debug" (case-insensitive). Returns false if unknown. */
bool mcdc_log_level_parse(const char *s, enum mcdc_log_level *out);

/* Lowercase level name. */
const char *mcdc_log_level_name(enum mcdc_log_level level);

/* Writes one line at level with this thread's component. */
void mcdc_log(enum mcdc_log_level level, const char *fmt, ...) MCDC_PRINTF(2, 3);

/*
 * Writes one line with an explicit component (NULL = this thread's); msg is
 * taken verbatim (a trailing newline is dropped). For library log callbacks.
 */
void mcdc_log_write(enum mcdc_log_level level, const char *component, const char *msg);

#define MCDC_LOG_ENABLED(lvl)                                                                      \
    ((int)(lvl) <= atomic_load_explicit(&mcdc_log_level_current, memory_order_relaxed))
#define MCDC_LOG(lvl, ...)                                                                         \
    do {                                                                                           \
        if (MCDC_LOG_ENABLED(lvl))                                                                 \
            mcdc_log((lvl), __VA_ARGS__);                                                          \
    } while (0)
#define LOG_ERROR(...) MCDC_LOG(MCDC_LOG_ERROR, __VA_ARGS__)
#define LOG_WARN(...) MCDC_LOG(MCDC_LOG_WARN, __VA_ARGS__)
#define LOG_INFO(...) MCDC_LOG(MCDC_LOG_INFO, __VA_ARGS__)
#define LOG_DEBUG(...) MCDC_LOG(MCDC_LOG_DEBUG, __VA_ARGS__)

#endif

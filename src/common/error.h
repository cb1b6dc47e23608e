/*
 * common/error: the one error type shared by every module (style.md §4.4).
 *
 * Modelled on libbson's bson_error_t (domain, code, message) with librdkafka's
 * retriable flag added. Building an error never allocates. A function that can
 * fail returns bool and takes `struct mcdc_error *err` last; it fills *err only
 * on failure. Errors are not logged where they are made: the one place that
 * decides (retry, restart the task, exit) logs once, adding context.
 */
#ifndef MCDC_COMMON_ERROR_H
#define MCDC_COMMON_ERROR_H

#include <stdbool.h>
#include <stdint.h>

enum mcdc_err_domain {
    MCDC_ERR_NONE = 0,
    MCDC_ERR_CONFIG,   /* invalid configuration or usage */
    MCDC_ERR_MONGO,    /* libmongoc / server error; code = bson_error_t code */
    MCDC_ERR_KAFKA,    /* librdkafka error; code = rd_kafka_resp_err_t */
    MCDC_ERR_IO,       /* file system / OS; code = errno */
    MCDC_ERR_ENCODE,   /* a document or event that cannot be encoded */
    MCDC_ERR_INTERNAL, /* broken invariant that is not a programming error */
    MCDC_ERR_DOMAIN_COUNT
};

/* Process exit codes (style.md §4.4; jq's named exit codes). */
enum mcdc_exit {
    MCDC_EXIT_OK = 0,      /* clean shutdown */
    MCDC_EXIT_FAILURE = 1, /* runtime failure */
    MCDC_EXIT_USAGE = 2,   /* usage or configuration error */
};

#define MCDC_ERROR_MSG_SIZE 256

struct mcdc_error {
    enum mcdc_err_domain domain;
    int code;
    bool retriable;
    char msg[MCDC_ERROR_MSG_SIZE];
};

#define MCDC_ERROR_INIT {MCDC_ERR_NONE, 0, false, {0}}

#if defined(__GNUC__)
#define MCDC_PRINTF(fmt_idx, args_idx) __attribute__((format(printf, fmt_idx, args_idx)))
#else
#define MCDC_PRINTF(fmt_idx, args_idx)
#endif

/*
 * Fills *err (if err is not NULL) with domain, code and a printf-formatted
 * message truncated to MCDC_ERROR_MSG_SIZE - 1 bytes. retriable is set false.
 * Returns false so callers can write `return mcdc_error_set(...)`.
 */
bool mcdc_error_set(struct mcdc_error *err, enum mcdc_err_domain domain, int code,
                    const char *fmt, ...) MCDC_PRINTF(4, 5);

/* As mcdc_error_set, and marks the error retriable. Returns false. */
bool mcdc_error_set_retriable(struct mcdc_error *err, enum mcdc_err_domain domain, int code,
                              const char *fmt, ...) MCDC_PRINTF(4, 5);

/*
 * Prefixes err->msg with "<prefix>: " (truncating the tail if needed), keeping
 * domain, code and retriable. Used by the deciding layer to add context.
 */
void mcdc_error_prefix(struct mcdc_error *err, const char *fmt, ...) MCDC_PRINTF(2, 3);

/*
 * Copies a libbson/libmongoc error (domain/code/message as in bson_error_t)
 * into *err with domain MCDC_ERR_MONGO. The caller passes the fields to keep
 * common free of libbson. Returns false. A 13 Unauthorized message ("not
 * authorized on <db> to execute command { <whole command> }") is shortened
 * to its head and the command's name, plus a pointer to `mongocdc check`.
 */
bool mcdc_error_from_bson(struct mcdc_error *err, uint32_t code, const char *message,
                          bool retriable);

/*
 * Copies a librdkafka error: code is the rd_kafka_resp_err_t value, message its
 * rd_kafka_err2str() text, retriable rd_kafka_error_is_retriable() (or the
 * caller's classification). Domain MCDC_ERR_KAFKA. Returns false.
 */
bool mcdc_error_from_kafka(struct mcdc_error *err, int code, const char *message,
                           bool retriable);

/* Short lowercase name of a domain ("config", "mongo", ...). Never NULL. */
const char *mcdc_err_domain_name(enum mcdc_err_domain domain);

#endif

/*
 * common/error: see error.h. Formatting only; no allocation, no logging.
 */
#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static bool error_vset(struct mcdc_error *err, enum mcdc_err_domain domain, int code,
                       bool retriable, const char *fmt, va_list ap) MCDC_PRINTF(5, 0);

static bool error_vset(struct mcdc_error *err, enum mcdc_err_domain domain, int code,
                       bool retriable, const char *fmt, va_list ap)
{
    if (err == NULL)
        return false;
    err->domain = domain;
    err->code = code;
    err->retriable = retriable;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    return false;
}

bool mcdc_error_set(struct mcdc_error *err, enum mcdc_err_domain domain, int code, const char *fmt,
                    ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, domain, code, false, fmt, ap);
    va_end(ap);
    return false;
}

bool mcdc_error_set_retriable(struct mcdc_error *err, enum mcdc_err_domain domain, int code,
                              const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, domain, code, true, fmt, ap);
    va_end(ap);
    return false;
}

void mcdc_error_prefix(struct mcdc_error *err, const char *fmt, ...)
{
    char prefix[MCDC_ERROR_MSG_SIZE];
    char old[MCDC_ERROR_MSG_SIZE];
    va_list ap;

    if (err == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    /* Build by hand: truncation of the tail is intended. */
    size_t plen = strnlen(prefix, sizeof err->msg - 3);
    size_t olen = strnlen(old, sizeof old);
    memcpy(err->msg, prefix, plen);
    memcpy(err->msg + plen, ": ", 2);
    size_t room = sizeof err->msg - 1 - plen - 2;
    if (olen > room)
        olen = room;
    memcpy(err->msg + plen + 2, old, olen);
    err->msg[plen + 2 + olen] = '\0';
}

static bool error_set_str(struct mcdc_error *err, enum mcdc_err_domain domain, int code,
                          bool retriable, const char *message)
{
    if (err == NULL)
        return false;
    err->domain = domain;
    err->code = code;
    err->retriable = retriable;
    snprintf(err->msg, sizeof err->msg, "%s", message != NULL ? message : "(no message)");
    return false;
}

/* 13 Unauthorized: the server's text, "not authorized on <db> to execute
 * command { <the whole command> }", is mostly the command (its pipeline, the
 * session id) and would fill the message before saying anything useful. Keep
 * its head and the command's name and say where the missing privilege is
 * named. False when message is not that text. */
static bool unauthorized_text(uint32_t code, const char *message, char *buf, size_t n)
{
    static const char head[] = "not authorized on ", mid[] = " to execute command { ";
    const char *cmd, *end;

    if (code != 13 || message == NULL || strncmp(message, head, sizeof head - 1) != 0 ||
        (cmd = strstr(message, mid)) == NULL)
        return false;
    end = cmd + sizeof mid - 1;
    end += strcspn(end, ": }");
    snprintf(buf, n,
             "%.*s %.*s (error 13 Unauthorized: the user lacks a privilege; `mongocdc check -c "
             "FILE` names it)",
             (int)(cmd - message) + (int)sizeof " to execute command" - 1, message,
             (int)(end - (cmd + sizeof mid - 1)), cmd + sizeof mid - 1);
    return true;
}

bool mcdc_error_from_bson(struct mcdc_error *err, uint32_t code, const char *message,
                          bool retriable)
{
    char shorter[MCDC_ERROR_MSG_SIZE];

    if (unauthorized_text(code, message, shorter, sizeof shorter))
        message = shorter;
    return error_set_str(err, MCDC_ERR_MONGO, (int)code, retriable, message);
}

bool mcdc_error_from_kafka(struct mcdc_error *err, int code, const char *message, bool retriable)
{
    return error_set_str(err, MCDC_ERR_KAFKA, code, retriable, message);
}

const char *mcdc_err_domain_name(enum mcdc_err_domain domain)
{
    static const char *const names[MCDC_ERR_DOMAIN_COUNT] = {
        "none", "config", "mongo", "kafka", "io", "encode", "internal",
    };
    if ((int)domain < 0 || domain >= MCDC_ERR_DOMAIN_COUNT)
        return "unknown";
    return names[domain];
}

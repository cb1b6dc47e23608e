/*
 * common/jsonesc: JSON string escaping for the daemon's own JSON (log lines,
 * the JSON-lines sink, dead-letter metadata). The record bytes have their own
 * dialects, matched to the Java libraries Debezium runs on: extended JSON as
 * the MongoDB Java driver writes it (encode/ejson.h ejson_write_string) and
 * Kafka Connect's JsonConverter/Jackson (encode/ejson.h json_append_string,
 * also used for the offsets).
 *
 * Dialects here:
 *   MCDC_JSON_MINIMAL: '"' and '\' backslashed, every other byte below 0x20
 *     as \u00xx (lowercase hex), everything else (UTF-8 included) raw;
 *   MCDC_JSON_LOG: as MINIMAL, with \n, \r and \t short.
 *
 * Thread: any (no state).
 */
#ifndef MCDC_COMMON_JSONESC_H
#define MCDC_COMMON_JSONESC_H

#include <stddef.h>

enum mcdc_json_dialect {
    MCDC_JSON_MINIMAL,
    MCDC_JSON_LOG,
};

/* Bytes an escape can take per input byte (\u00xx): dst of 6 * n bytes
 * always holds the escape of n bytes. */
#define MCDC_JSON_ESCAPE_MAX 6

/*
 * Writes the escape of s[0..n) in dialect d (no quotes, no NUL) to dst,
 * stopping before the first escape that would not fit in cap bytes. Returns
 * the bytes written; *used (when not NULL) = the input bytes escaped.
 */
size_t mcdc_json_escape(enum mcdc_json_dialect d, char *dst, size_t cap, const char *s, size_t n,
                        size_t *used);

#endif

/*
 * common/base64: standard Base64 (RFC 4648 §4, alphabet A-Z a-z 0-9 + /, with
 * '=' padding), the form java.util.Base64.getEncoder() writes. It carries
 * resume tokens in the offsets (debezium-format.md §4.2) and BSON binary
 * values in extended JSON (§2.2).
 *
 * Thread: any (no state).
 */
#ifndef MCDC_COMMON_BASE64_H
#define MCDC_COMMON_BASE64_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length in characters of the encoding of n bytes (padding included, no NUL). */
static inline size_t mcdc_base64_len(size_t n)
{
    return (n + 2) / 3 * 4;
}

/* Writes the encoding of data[0..n) to out, which holds at least
 * mcdc_base64_len(n) characters; no NUL is written. Returns the length. */
size_t mcdc_base64_encode_to(const uint8_t *data, size_t n, char *out);

/* The encoding of data[0..n) as a NUL-terminated string. Caller frees. */
char *mcdc_base64_encode(const uint8_t *data, size_t n);

/* Decodes s[0..n) (padding optional). Returns false on a character outside
 * the alphabet or an impossible length; on success *out (caller frees) holds
 * *out_len bytes. */
bool mcdc_base64_decode(const char *s, size_t n, uint8_t **out, size_t *out_len);

#endif

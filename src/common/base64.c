/* common/base64: see base64.h. */
#include "common/base64.h"

#include <stdlib.h>

#include "common/xalloc.h"

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t mcdc_base64_encode_to(const uint8_t *data, size_t n, char *out)
{
    char *p = out;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16 | (uint32_t)data[i + 1] << 8 | data[i + 2];
        p[0] = B64[v >> 18];
        p[1] = B64[(v >> 12) & 63];
        p[2] = B64[(v >> 6) & 63];
        p[3] = B64[v & 63];
        p += 4;
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)data[i] << 16;
        p[0] = B64[v >> 18];
        p[1] = B64[(v >> 12) & 63];
        p[2] = '=';
        p[3] = '=';
        p += 4;
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)data[i] << 16 | (uint32_t)data[i + 1] << 8;
        p[0] = B64[v >> 18];
        p[1] = B64[(v >> 12) & 63];
        p[2] = B64[(v >> 6) & 63];
        p[3] = '=';
        p += 4;
    }
    return (size_t)(p - out);
}

char *mcdc_base64_encode(const uint8_t *data, size_t n)
{
    char *out = xmalloc(mcdc_base64_len(n) + 1);
    out[mcdc_base64_encode_to(data, n, out)] = '\0';
    return out;
}

static int b64_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

bool mcdc_base64_decode(const char *s, size_t n, uint8_t **out, size_t *out_len)
{
    while (n > 0 && s[n - 1] == '=')
        n--;
    if (n % 4 == 1)
        return false;
    uint8_t *buf = xmalloc(n * 3 / 4 + 1);
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_value(s[i]);
        if (v < 0) {
            free(buf);
            return false;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            buf[o++] = (uint8_t)(acc >> bits);
        }
    }
    *out = buf;
    *out_len = o;
    return true;
}

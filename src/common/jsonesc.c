/* common/jsonesc: see jsonesc.h. */
#include "common/jsonesc.h"

#include <string.h>

size_t mcdc_json_escape(enum mcdc_json_dialect d, char *dst, size_t cap, const char *s, size_t n,
                        size_t *used)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, i = 0;
    for (; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[6];
        size_t k = 0;
        if (c == '"' || c == '\\') {
            e[k++] = '\\';
            e[k++] = (char)c;
        } else if (d == MCDC_JSON_LOG && (c == '\n' || c == '\r' || c == '\t')) {
            e[k++] = '\\';
            e[k++] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        } else if (c < 0x20) {
            memcpy(e, "\\u00", 4);
            k = 4;
            e[k++] = hex[c >> 4];
            e[k++] = hex[c & 15];
        } else {
            e[k++] = (char)c;
        }
        if (o + k > cap)
            break;
        memcpy(dst + o, e, k);
        o += k;
    }
    if (used)
        *used = i;
    return o;
}

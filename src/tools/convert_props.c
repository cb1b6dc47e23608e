/*
 * tools/convert_props: reading what `mongocdc config convert` converts: Java
 * .properties files (Debezium Server's application.properties, a Kafka
 * Connect worker's properties) and Kafka Connect's connector JSON.
 *
 * Thread: main.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bson/bson.h>

#include "common/xalloc.h"
#include "tools/tools_internal.h"

void props_add(struct props *p, const char *k, size_t kl, const char *v, size_t vl)
{
    for (size_t i = 0; i < p->count; i++) {
        if (strlen(p->keys[i]) == kl && !memcmp(p->keys[i], k, kl)) { /* last one wins */
            free(p->values[i]);
            p->values[i] = xstrndup(v, vl);
            return;
        }
    }
    p->keys = xrealloc(p->keys, (p->count + 1) * sizeof *p->keys);
    p->values = xrealloc(p->values, (p->count + 1) * sizeof *p->values);
    p->keys[p->count] = xstrndup(k, kl);
    p->values[p->count++] = xstrndup(v, vl);
}

const char *props_get(const struct props *p, const char *k)
{
    for (size_t i = 0; i < p->count; i++)
        if (!strcmp(p->keys[i], k))
            return p->values[i];
    return NULL;
}

void props_free(struct props *p)
{
    for (size_t i = 0; i < p->count; i++) {
        free(p->keys[i]);
        free(p->values[i]);
    }
    free(p->keys);
    free(p->values);
    memset(p, 0, sizeof *p);
}

char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = xmalloc(cap);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 >= cap) {
            cap *= 2;
            buf = xrealloc(buf, cap);
        }
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Appends the UTF-8 form of code point cp. */
static size_t utf8_put(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    o[0] = (char)(0xE0 | cp >> 12);
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
}

/*
 * java.util.Properties.load: logical lines (a line ending in an odd number
 * of backslashes continues, leading blanks of the next dropped), comments
 * starting with # or !, the key ending at the first unescaped =, : or blank,
 * escapes \t \n \r \f \uXXXX and \<any> = <any>.
 */
void parse_properties(const char *text, size_t len, struct props *out)
{
    size_t i = 0;
    char *buf = xmalloc(len * 3 + 1);
    while (i < len) {
        while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\f'))
            i++;
        if (i < len && (text[i] == '#' || text[i] == '!')) {
            while (i < len && text[i] != '\n')
                i++;
            continue;
        }
        if (i < len && (text[i] == '\n' || text[i] == '\r')) {
            i++;
            continue;
        }
        /* one logical line into buf, unescaped, noting where the key ends */
        size_t n = 0, key_end = SIZE_MAX, value_start = SIZE_MAX;
        bool in_key = true, sep_seen = false;
        while (i < len && text[i] != '\n' && text[i] != '\r') {
            char c = text[i++];
            if (c == '\\' && i < len) {
                char e = text[i++];
                if (e == '\n' || e == '\r') { /* continuation */
                    if (e == '\r' && i < len && text[i] == '\n')
                        i++;
                    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\f'))
                        i++;
                    continue;
                }
                if (!in_key && value_start == SIZE_MAX)
                    value_start = n;
                if (e == 'u' && i + 4 <= len) {
                    char hex[5] = {text[i], text[i + 1], text[i + 2], text[i + 3], 0};
                    char *end;
                    unsigned cp = (unsigned)strtoul(hex, &end, 16);
                    if (*end == '\0') {
                        i += 4;
                        n += utf8_put(buf + n, cp);
                        continue;
                    }
                }
                buf[n++] = e == 't'   ? '\t'
                           : e == 'n' ? '\n'
                           : e == 'r' ? '\r'
                           : e == 'f' ? '\f'
                                      : e;
                continue;
            }
            if (in_key && (c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f')) {
                in_key = false;
                key_end = n;
                sep_seen = c == '=' || c == ':';
                continue;
            }
            if (!in_key && value_start == SIZE_MAX) {
                if (c == ' ' || c == '\t' || c == '\f')
                    continue;
                if (!sep_seen && (c == '=' || c == ':')) {
                    sep_seen = true;
                    continue;
                }
                value_start = n;
            }
            buf[n++] = c;
        }
        if (key_end == SIZE_MAX)
            key_end = n;
        if (value_start == SIZE_MAX)
            value_start = n;
        if (key_end > 0)
            props_add(out, buf, key_end, buf + value_start, n - value_start);
    }
    free(buf);
}

/* A JSON member value as property text (Kafka Connect takes strings, but
 * numbers and booleans are common in hand-written files). */
static char *json_value_text(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_UTF8:
        return xstrdup(bson_iter_utf8(it, NULL));
    case BSON_TYPE_INT32:
        return xasprintf("%d", bson_iter_int32(it));
    case BSON_TYPE_INT64:
        return xasprintf("%lld", (long long)bson_iter_int64(it));
    case BSON_TYPE_DOUBLE:
        return xasprintf("%.17g", bson_iter_double(it));
    case BSON_TYPE_BOOL:
        return xstrdup(bson_iter_bool(it) ? "true" : "false");
    default:
        return NULL;
    }
}

/* Connector JSON → props (the config object) and *name. False: not that form. */
bool parse_connector_json(const char *text, size_t len, struct props *out, char **name,
                          struct mcdc_error *err)
{
    bson_error_t berr;
    bson_t *doc = bson_new_from_json((const uint8_t *)text, (ssize_t)len, &berr);
    if (!doc)
        return mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "not JSON: %s", berr.message);
    bson_iter_t it, cfg;
    const bson_t *src = doc;
    bson_t inner;
    if (bson_iter_init_find(&it, doc, "name") && BSON_ITER_HOLDS_UTF8(&it))
        *name = xstrdup(bson_iter_utf8(&it, NULL));
    if (bson_iter_init_find(&cfg, doc, "config")) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&cfg)) {
            bson_destroy(doc);
            return mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "\"config\" is not an object");
        }
        uint32_t l;
        const uint8_t *d;
        bson_iter_document(&cfg, &l, &d);
        bson_init_static(&inner, d, l);
        src = &inner;
    } else if (!bson_iter_init_find(&it, doc, "connector.class")) {
        bson_destroy(doc);
        return mcdc_error_set(err, MCDC_ERR_IO, EINVAL,
                              "neither {\"name\": ..., \"config\": {...}} nor a connector "
                              "configuration object (no connector.class)");
    }
    bson_iter_init(&it, src);
    while (bson_iter_next(&it)) {
        char *v = json_value_text(&it);
        if (!v) {
            fprintf(stderr,
                    "mongocdc config convert: %s: not carried (its value is not a "
                    "string, number or boolean)\n",
                    bson_iter_key(&it));
            continue;
        }
        props_add(out, bson_iter_key(&it), strlen(bson_iter_key(&it)), v, strlen(v));
        free(v);
    }
    bson_destroy(doc);
    return true;
}

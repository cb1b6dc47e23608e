/*
 * tools/offsets_pos: positions as operators write and read them (timestamps,
 * resume tokens in their three forms, times of day) for `mongocdc offsets`.
 *
 * Thread: main.
 */
#define _DEFAULT_SOURCE   /* timegm */
#define _XOPEN_SOURCE 700 /* strptime */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bson/bson.h>

#include "common/base64.h"
#include "common/xalloc.h"
#include "offsets/dbzfile.h"
#include "offsets/offsets.h"
#include "offsets/offsets_internal.h"
#include "tools/tools_internal.h"

void print_time(FILE *out, int64_t sec)
{
    time_t t = (time_t)sec;
    struct tm tm;
    char buf[64];
    if (sec > 0 && gmtime_r(&t, &tm) && strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm))
        fputs(buf, out);
    else
        fputs("unknown", out);
}

/* The clusterTime a resume token's _data starts with
 * (position_token_time); false when the token has no such prefix. */
bool token_time(const struct mcdc_position *pos, int64_t *sec, int64_t *inc)
{
    uint64_t t;

    if (!pos->has_resume_token || !position_token_time(&pos->resume_token, &t))
        return false;
    *sec = (int64_t)(t >> 32);
    *inc = (int64_t)(t & 0xffffffffu);
    return true;
}

bool parse_timestamp(const char *s, int64_t *sec, int64_t *inc)
{
    char *end;
    errno = 0;
    unsigned long long a = strtoull(s, &end, 10);
    if (end != s && errno == 0 && (*end == '\0' || *end == ':')) {
        unsigned long long b = 0;
        if (*end == ':') {
            const char *p = end + 1;
            b = strtoull(p, &end, 10);
            if (end == p || *end != '\0')
                return false;
        }
        if (a == 0 || a > UINT32_MAX || b > UINT32_MAX)
            return false;
        *sec = (int64_t)a;
        *inc = (int64_t)b;
        return true;
    }
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!end || (*end != '\0' && strcmp(end, "Z") != 0))
        return false;
    time_t t = timegm(&tm);
    if (t <= 0)
        return false;
    *sec = (int64_t)t;
    *inc = 0;
    return true;
}

bool parse_token(const char *s, bson_t *out)
{
    size_t n = strlen(s);
    bson_error_t berr;
    if (n == 0)
        return false;
    if (s[0] == '{') {
        bson_t *doc = bson_new_from_json((const uint8_t *)s, -1, &berr);
        bson_iter_t it;
        if (!doc)
            return false;
        bool ok = bson_iter_init_find(&it, doc, "_data") && BSON_ITER_HOLDS_UTF8(&it);
        if (ok)
            bson_copy_to(doc, out);
        bson_destroy(doc);
        return ok;
    }
    if (strspn(s, "0123456789abcdefABCDEF") == n) {
        bson_init(out);
        BSON_APPEND_UTF8(out, "_data", s);
        return true;
    }
    uint8_t *raw;
    size_t len;
    if (!mcdc_base64_decode(s, n, &raw, &len))
        return false;
    bson_t view;
    bson_iter_t it;
    bool ok = bson_init_static(&view, raw, len) && bson_validate(&view, BSON_VALIDATE_NONE, NULL) &&
              bson_iter_init_find(&it, &view, "_data") && BSON_ITER_HOLDS_UTF8(&it);
    if (ok)
        bson_copy_to(&view, out);
    free(raw);
    return ok;
}

/* position_time of a stored value; 0 when it is no position or has
 * no time. */
static uint64_t value_time(const char *value)
{
    struct mcdc_position pos;
    struct mcdc_error err = MCDC_ERROR_INIT;
    position_init(&pos);
    uint64_t t = position_from_json(value, &pos, &err) ? position_time(&pos) : 0;
    position_clear(&pos);
    return t;
}

static void put_ts(FILE *out, uint64_t t)
{
    fprintf(out, "Timestamp(%" PRIu64 ", %" PRIu64 ")", t >> 32, t & 0xffffffffu);
}

bool check_not_backwards(const struct endpoint *to, const struct kvlist *in, bool force)
{
    struct kvlist have = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    if (to->kind == EP_DBZFILE && access(to->path, F_OK) != 0 && errno == ENOENT)
        return true; /* a new file: nothing to move back */
    if (!ep_list(to, &have, &err)) {
        fprintf(stderr, "mongocdc offsets: %s\n", err.msg);
        return false;
    }
    size_t older = 0;
    for (size_t i = 0; i < in->count; i++) {
        const struct kv *e = &in->items[i];
        if (!e->value)
            continue; /* a deletion: the reset of that partition */
        for (size_t j = 0; j < have.count; j++) {
            if (strcmp(have.items[j].key, e->key) != 0)
                continue;
            uint64_t tn = value_time(e->value), to_t = value_time(have.items[j].value);
            if (tn != 0 && to_t != 0 && tn < to_t) {
                fprintf(stderr, "mongocdc offsets: %s %s: the position written, ",
                        force ? "warning:" : "refused:", e->key);
                put_ts(stderr, tn);
                fputs(", is older than the stored ", stderr);
                put_ts(stderr, to_t);
                fputc('\n', stderr);
                older++;
            }
            break;
        }
    }
    kvlist_free(&have);
    if (older && !force) {
        fprintf(stderr,
                "mongocdc offsets: nothing written: %zu position%s would move backwards "
                "(--force writes them anyway; `offsets set` moves one on purpose)\n",
                older, older == 1 ? "" : "s");
        return false;
    }
    return true;
}

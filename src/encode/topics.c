/*
 * topics: Kafka topic names and Kafka Connect schema names
 * (debezium-format.md §3.1-§3.3).
 *
 * Data topics are <topic.prefix><delim><db><delim><collection>, sanitised as
 * Debezium's AbstractTopicNamingStrategy does, and cached per namespace for
 * the encoder's lifetime: records borrow the topic string, so entries are
 * never evicted (one entry per namespace seen, which is what Debezium's
 * topic.cache.size LRU holds in practice too). An entry also caches the
 * per-namespace decisions that would otherwise cost regex and glob matching
 * on every event: whether the namespace is captured, and its field rules.
 */
#include "encode/encode_internal.h"

#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"

#define TOPIC_MAX_CHARS 249 /* Kafka's limit, AbstractTopicNamingStrategy */

/* Decodes one UTF-8 sequence at s (n bytes left); returns its length and the
 * code point, or length 1 and U+FFFD for an invalid byte. */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t v;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xE0) == 0xC0) {
        len = 2;
        v = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3;
        v = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4;
        v = c & 0x07;
    } else {
        *cp = 0xFFFD;
        return 1;
    }
    if (len > n) {
        *cp = 0xFFFD;
        return 1;
    }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *cp = 0xFFFD;
            return 1;
        }
        v = (v << 6) | (s[i] & 0x3F);
    }
    *cp = v;
    return len;
}

static bool topic_char_ok(uint32_t c)
{
    return c == '.' || c == '_' || c == '-' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9');
}

void topics_sanitize(struct ejson_buf *out, const char *name, size_t n)
{
    const unsigned char *s = (const unsigned char *)name;
    size_t start = out->len, units = 0, i = 0;
    while (i < n && units < TOPIC_MAX_CHARS) {
        uint32_t cp;
        size_t len = utf8_next(s + i, n - i, &cp);
        if (topic_char_ok(cp)) {
            ejson_buf_append(out, (const char *)s + i, 1);
            units++;
        } else {
            /* Java replaces per UTF-16 unit: a non-BMP char becomes "__". */
            size_t k = cp > 0xFFFF ? 2 : 1;
            if (units + k > TOPIC_MAX_CHARS)
                k = TOPIC_MAX_CHARS - units;
            ejson_buf_append(out, "__", k);
            units += k;
        }
        i += len;
    }
    size_t got = out->len - start;
    if (got == 1 && out->data[start] == '.')
        out->data[start] = '_';
    else if (got == 2 && out->data[start] == '.' && out->data[start + 1] == '.')
        out->data[start] = out->data[start + 1] = '_';
}

static bool avro_first_ok(uint32_t c)
{
    return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static bool avro_ok(uint32_t c)
{
    return avro_first_ok(c) || c == '.' || (c >= '0' && c <= '9');
}

/* avro_unicode: _uXXXX per UTF-16 unit. */
static void append_unicode_escape(struct ejson_buf *out, uint32_t cp)
{
    char tmp[16];
    if (cp > 0xFFFF) {
        uint32_t v = cp - 0x10000;
        snprintf(tmp, sizeof tmp, "_u%04x_u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
    } else {
        snprintf(tmp, sizeof tmp, "_u%04x", cp);
    }
    ejson_buf_append(out, tmp, strlen(tmp));
}

void topics_adjust_schema_name(struct ejson_buf *out, enum mcdc_schema_adjust mode,
                               const char *name, size_t n)
{
    const unsigned char *s = (const unsigned char *)name;
    if (mode == MCDC_SCHEMA_ADJUST_NONE) {
        ejson_buf_append(out, name, n);
        return;
    }
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = utf8_next(s + i, n - i, &cp);
        bool first = i == 0;
        bool ok = first ? avro_first_ok(cp) : avro_ok(cp);
        if (mode == MCDC_SCHEMA_ADJUST_AVRO_UNICODE) {
            /* Every replacement starts with "_u", so '_' itself is escaped
             * to keep the mapping reversible. */
            if (ok && cp != '_')
                ejson_buf_append(out, (const char *)s + i, len);
            else
                append_unicode_escape(out, cp);
        } else if (ok) {
            ejson_buf_append(out, (const char *)s + i, len);
        } else if (first && cp >= '0' && cp <= '9') {
            /* UNDERSCORE_REPLACEMENT keeps a leading digit after "_". */
            ejson_buf_append(out, "_", 1);
            ejson_buf_append(out, (const char *)s + i, 1);
        } else {
            ejson_buf_append(out, "__", cp > 0xFFFF ? 2 : 1);
        }
        i += len;
    }
}

static uint64_t ns_hash(const char *db, size_t db_len, const char *coll, size_t coll_len)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < db_len; i++)
        h = (h ^ (unsigned char)db[i]) * 1099511628211ULL;
    h = (h ^ 0xFF) * 1099511628211ULL; /* separator no name byte can be */
    for (size_t i = 0; i < coll_len; i++)
        h = (h ^ (unsigned char)coll[i]) * 1099511628211ULL;
    return h;
}

static void cache_grow(struct topic_cache *tc)
{
    size_t cap = tc->cap ? tc->cap * 2 : 64;
    struct topic_entry **slots = xcalloc(cap, sizeof *slots);
    for (size_t i = 0; i < tc->cap; i++) {
        struct topic_entry *te = tc->slots[i];
        if (te == NULL)
            continue;
        size_t j = te->hash & (cap - 1);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = te;
    }
    free(tc->slots);
    tc->slots = slots;
    tc->cap = cap;
}

/* Appends the non-blank parts joined by the delimiter (dataChangeTopic). */
static void join_part(struct ejson_buf *b, const char *delim, const char *s, size_t n)
{
    if (n == 0)
        return;
    if (b->len)
        ejson_buf_append(b, delim, strlen(delim));
    ejson_buf_append(b, s, n);
}

/* n bytes of s and a NUL: unlike strndup, keeps a namespace with an embedded
 * NUL byte whole, so the cache compares db_len bytes it owns (found by
 * fuzz_event: strndup stopped at the NUL and the lookup read past it). */
static char *bytes_dup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/*
 * Two captured namespaces whose topic names sanitise to one topic share it
 * (their records interleave, keys may clash): a WARN names both, as
 * Debezium warns when it replaces a topic name. Only a namespace whose name
 * the sanitiser changed can meet another one's topic, so a new entry is
 * compared with every entry when its own name was changed, else with the
 * changed ones only.
 */
static void warn_shared_topic(struct topic_cache *tc, struct topic_entry *te, bool altered)
{
    struct topic_entry *other = NULL;
    if (altered) {
        for (size_t i = 0; i < tc->cap && other == NULL; i++)
            if (tc->slots[i] && tc->slots[i] != te && tc->slots[i]->captured &&
                strcmp(tc->slots[i]->topic, te->topic) == 0)
                other = tc->slots[i];
        if (tc->n_altered == tc->cap_altered) {
            tc->cap_altered = tc->cap_altered ? tc->cap_altered * 2 : 16;
            tc->altered = xrealloc(tc->altered, tc->cap_altered * sizeof *tc->altered);
        }
        tc->altered[tc->n_altered++] = te;
    } else {
        for (size_t i = 0; i < tc->n_altered && other == NULL; i++)
            if (strcmp(tc->altered[i]->topic, te->topic) == 0)
                other = tc->altered[i];
    }
    if (other != NULL)
        LOG_WARN("namespaces %.*s.%.*s and %.*s.%.*s both go to topic %s (characters a topic "
                 "name cannot hold are replaced by '_'): their records share that topic",
                 (int)other->db_len, other->db, (int)other->coll_len, other->coll,
                 (int)te->db_len, te->db, (int)te->coll_len, te->coll, te->topic);
}

struct topic_entry *topics_lookup(struct encoder *enc, const char *db, size_t db_len,
                                  const char *coll, size_t coll_len)
{
    struct topic_cache *tc = &enc->topics;
    uint64_t h = ns_hash(db, db_len, coll, coll_len);
    if (tc->cap) {
        for (size_t j = h & (tc->cap - 1); tc->slots[j]; j = (j + 1) & (tc->cap - 1)) {
            struct topic_entry *te = tc->slots[j];
            if (te->hash == h && te->db_len == db_len && te->coll_len == coll_len &&
                memcmp(te->db, db, db_len) == 0 && memcmp(te->coll, coll, coll_len) == 0)
                return te;
        }
    }
    if ((tc->count + 1) * 2 > tc->cap)
        cache_grow(tc);

    const struct mcdc_config *cfg = enc->cfg;
    const char *delim = cfg->topic_delimiter ? cfg->topic_delimiter : ".";
    struct ejson_buf joined = {0}, clean = {0};
    join_part(&joined, delim, cfg->topic_prefix, strlen(cfg->topic_prefix));
    join_part(&joined, delim, db, db_len);
    join_part(&joined, delim, coll, coll_len);
    topics_sanitize(&clean, joined.data ? joined.data : "", joined.len);

    struct topic_entry *te = xcalloc(1, sizeof *te);
    te->db = bytes_dup(db, db_len);
    te->db_len = db_len;
    te->coll = bytes_dup(coll, coll_len);
    te->coll_len = coll_len;
    te->topic = xstrndup(clean.data ? clean.data : "", clean.len);
    te->hash = h;
    te->captured = filters_captures(&enc->filters, db, db_len, coll, coll_len);
    fields_select(&enc->fields, db, db_len, coll, coll_len, &te->sel);
    bool altered = clean.len != joined.len || (clean.len > 0 &&
                                               memcmp(clean.data, joined.data, clean.len) != 0);
    ejson_buf_free(&joined);
    ejson_buf_free(&clean);

    size_t j = h & (tc->cap - 1);
    while (tc->slots[j])
        j = (j + 1) & (tc->cap - 1);
    tc->slots[j] = te;
    tc->count++;
    if (te->captured)
        warn_shared_topic(tc, te, altered);
    return te;
}

void topics_cache_free(struct topic_cache *tc)
{
    for (size_t i = 0; i < tc->cap; i++) {
        struct topic_entry *te = tc->slots[i];
        if (te == NULL)
            continue;
        free(te->db);
        free(te->coll);
        free(te->topic);
        fields_sel_free(&te->sel);
        free(te);
    }
    free(tc->slots);
    free(tc->altered);
    memset(tc, 0, sizeof *tc);
}

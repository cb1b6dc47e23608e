/*
 * topology/shards: config.shards and per-shard connection strings
 * (debezium-format.md §6.1, §6.2; mongo-sim-spec.md §6.2, §6.5).
 */
#include "topology/shards.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/xalloc.h"

/* A growing string. */
struct mcdc_buf {
    char *data;
    size_t len, cap;
};
#define MCDC_BUF_INIT {NULL, 0, 0}

static void mcdc_buf_append(struct mcdc_buf *b, const char *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->data = xrealloc(b->data, b->cap);
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void mcdc_buf_append_str(struct mcdc_buf *b, const char *s)
{
    mcdc_buf_append(b, s, strlen(s));
}

static char *mcdc_buf_take(struct mcdc_buf *b)
{
    char *s = b->data ? b->data : xstrdup("");
    b->data = NULL;
    b->len = b->cap = 0;
    return s;
}

void shard_list_clear(struct shard_list *list)
{
    for (size_t i = 0; i < list->count; i++) {
        free(list->items[i].name);
        free(list->items[i].rs);
        free(list->items[i].hosts);
    }
    free(list->items);
    list->items = NULL;
    list->count = 0;
}

/* Parses one config.shards document into s. Returns false with err when it
 * has no `_id` string or no "<rs>/<hosts>" `host`. */
static bool parse_shard(const bson_t *doc, struct shard_info *s, struct mcdc_error *err)
{
    bson_iter_t it;
    const char *host, *slash, *name;

    memset(s, 0, sizeof *s);
    if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_UTF8(&it)) {
        mcdc_error_set(err, MCDC_ERR_MONGO, 0, "a config.shards document has no string _id");
        return false;
    }
    name = bson_iter_utf8(&it, NULL);
    if (!bson_iter_init_find(&it, doc, "host") || !BSON_ITER_HOLDS_UTF8(&it)) {
        mcdc_error_set(err, MCDC_ERR_MONGO, 0, "shard %s has no host in config.shards", name);
        return false;
    }
    host = bson_iter_utf8(&it, NULL);
    slash = strchr(host, '/');
    if (slash == NULL || slash == host || slash[1] == '\0') {
        mcdc_error_set(err, MCDC_ERR_MONGO, 0,
                       "shard %s has host \"%s\" in config.shards, not \"<replica set>/<host:port>"
                       "[,...]\": only shards that are replica sets have change streams",
                       name, host);
        return false;
    }
    s->name = xstrdup(name);
    s->rs = xstrndup(host, (size_t)(slash - host));
    s->hosts = xstrdup(slash + 1);
    s->draining = bson_iter_init_find(&it, doc, "draining") && bson_iter_as_bool(&it);
    s->topology_time = -1;
    if (bson_iter_init_find(&it, doc, "topologyTime") && BSON_ITER_HOLDS_TIMESTAMP(&it)) {
        uint32_t ts, inc;
        bson_iter_timestamp(&it, &ts, &inc);
        s->topology_time = (int64_t)(((uint64_t)ts << 32) | inc);
    }
    return true;
}

bool shards_read(mongoc_client_pool_t *pool, struct shard_list *out, struct mcdc_error *err)
{
    mongoc_client_t *c = mongoc_client_pool_pop(pool);
    mongoc_collection_t *coll = mongoc_client_get_collection(c, "config", "shards");
    bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, sort;
    mongoc_cursor_t *cur;
    const bson_t *doc;
    bson_error_t error;
    size_t cap = 0;
    bool ok = true;

    memset(out, 0, sizeof *out);
    BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
    BSON_APPEND_INT32(&sort, "_id", 1);
    bson_append_document_end(&opts, &sort);
    cur = mongoc_collection_find_with_opts(coll, &filter, &opts, NULL);
    while (ok && mongoc_cursor_next(cur, &doc)) {
        if (out->count == cap) {
            cap = cap ? cap * 2 : 4;
            out->items = xrealloc(out->items, cap * sizeof *out->items);
        }
        ok = parse_shard(doc, &out->items[out->count], err);
        if (ok)
            out->count++;
    }
    if (ok && mongoc_cursor_error(cur, &error)) {
        mcdc_error_from_bson(err, error.code, error.message, true);
        mcdc_error_prefix(err, "cannot read config.shards");
        ok = false;
    }
    mongoc_cursor_destroy(cur);
    mongoc_collection_destroy(coll);
    mongoc_client_pool_push(pool, c);
    bson_destroy(&filter);
    bson_destroy(&opts);
    if (!ok)
        shard_list_clear(out);
    return ok;
}

/* URI options that describe the seed rather than a shard's replica set. */
static bool seed_only_option(const char *opt, size_t len)
{
    static const char *const names[] = {"replicaset", "directconnection", "loadbalanced",
                                        "srvservicename", "srvmaxhosts", NULL};
    for (size_t i = 0; names[i] != NULL; i++) {
        if (strlen(names[i]) == len && strncasecmp(opt, names[i], len) == 0)
            return true;
    }
    return false;
}

/* Appends the '&'-separated options of [p, end) to out, dropping the
 * seed-only ones; *has_tls is set when one of them is tls= or ssl=. */
static void carry_options(struct mcdc_buf *out, const char *p, bool *first, bool *has_tls)
{
    while (*p != '\0') {
        size_t len = strcspn(p, "&;");
        size_t key = strcspn(p, "=");
        if (key > len)
            key = len;
        if (len > 0 && !seed_only_option(p, key)) {
            if ((key == 3 && strncasecmp(p, "tls", 3) == 0) ||
                (key == 3 && strncasecmp(p, "ssl", 3) == 0))
                *has_tls = true;
            mcdc_buf_append(out, *first ? "?" : "&", 1);
            mcdc_buf_append(out, p, len);
            *first = false;
        }
        p += len;
        if (*p != '\0')
            p++;
    }
}

char *shard_connection_string(const char *configured, const struct shard_info *s,
                              const char *shard_params, bool discover, struct mcdc_error *err)
{
    struct mcdc_buf out = MCDC_BUF_INIT;
    const char *rest, *auth_end, *at, *query;
    bool srv, first = true, has_tls = false;
    size_t auth_len;

    if (strncmp(configured, "mongodb+srv://", 14) == 0) {
        srv = true;
        rest = configured + 14;
    } else if (strncmp(configured, "mongodb://", 10) == 0) {
        srv = false;
        rest = configured + 10;
    } else {
        mcdc_error_set(err, MCDC_ERR_CONFIG, 0,
                       "mongodb.connection.string does not start with mongodb:// or "
                       "mongodb+srv://");
        return NULL;
    }
    /* authority = [userinfo@]hosts, up to the first '/' or '?' (user info is
     * percent-encoded, so neither character can be part of it). */
    auth_len = strcspn(rest, "/?");
    auth_end = rest + auth_len;
    at = NULL;
    for (const char *p = rest; p < auth_end; p++) {
        if (*p == '@')
            at = p;
    }
    mcdc_buf_append_str(&out, "mongodb://");
    if (at != NULL)
        mcdc_buf_append(&out, rest, (size_t)(at - rest + 1));
    mcdc_buf_append_str(&out, s->hosts);
    mcdc_buf_append_str(&out, "/");
    query = strchr(auth_end, '?');
    if (*auth_end == '/') {
        const char *db = auth_end + 1;
        size_t db_len = query ? (size_t)(query - db) : strlen(db);
        mcdc_buf_append(&out, db, db_len);
    }
    if (query != NULL)
        carry_options(&out, query + 1, &first, &has_tls);
    if (srv && !has_tls) {
        mcdc_buf_append_str(&out, first ? "?" : "&");
        mcdc_buf_append_str(&out, "tls=true");
        first = false;
    }
    if (!discover && strchr(s->hosts, ',') == NULL) {
        /* mongodb.members.auto.discover false, one address: talk to that
         * address only (the members' own names may not resolve here). */
        mcdc_buf_append_str(&out, first ? "?directConnection=true" : "&directConnection=true");
    } else {
        mcdc_buf_append_str(&out, first ? "?replicaSet=" : "&replicaSet=");
        mcdc_buf_append_str(&out, s->rs);
    }
    if (shard_params != NULL) {
        while (*shard_params == '?' || *shard_params == '&')
            shard_params++;
        if (*shard_params != '\0') {
            mcdc_buf_append_str(&out, "&");
            mcdc_buf_append_str(&out, shard_params);
        }
    }
    return mcdc_buf_take(&out);
}

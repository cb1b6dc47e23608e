/*
 * worker_resolve: the collections an execute-snapshot signal names
 * (debezium-format.md §5.4 step 1; Debezium's
 * AbstractIncrementalSnapshotChangeEventSource.expandDataCollectionIds): each
 * data-collections entry is an anchored, case-insensitive regex over
 * "db.coll" of the captured collections; an entry that matches none is
 * queued under its literal name when it is one.
 *
 * Bounded work whatever the signal's size: the server is asked once for the
 * databases and once per database for its collections (never per entry);
 * an entry with no regex syntax but its one '.' is looked up in a hash index
 * (for such an entry the anchored regex can only match the same text,
 * case aside, since a database name holds no '.'); other entries are
 * compiled once and matched against the list; a hash set keeps each
 * collection once per signal; a stop request ends the loop (for a signal
 * the task reads again after a restart); the entries
 * that match nothing are summarised in one WARN per kind.
 */
#include "worker/worker_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "signals/signals.h"
#include "snapshot/incremental.h"

/* Names a summary WARN quotes before "and N more". */
#define RESOLVE_WARN_NAMES 5

/* ---- a string index (chained hash, case-insensitive or exact) ----------- */

struct sindex {
    size_t *head; /* bucket -> entry + 1 (0: none) */
    size_t *next; /* entry -> next entry + 1 */
    size_t nb, cap;
    bool fold; /* compare case-insensitively */
};

static uint64_t shash(const char *p, bool fold)
{
    uint64_t h = 1469598103934665603ull;
    for (; *p; p++) {
        h ^= (unsigned char)(fold ? tolower((unsigned char)*p) : *p);
        h *= 1099511628211ull;
    }
    return h;
}

static void sindex_init(struct sindex *x, size_t expected, bool fold)
{
    x->nb = 64;
    while (x->nb < expected * 2)
        x->nb *= 2;
    x->head = xcalloc(x->nb, sizeof *x->head);
    x->next = NULL;
    x->cap = 0;
    x->fold = fold;
}

static void sindex_free(struct sindex *x)
{
    free(x->head);
    free(x->next);
}

/* Entry e (an index into the caller's array, whose string is key) added. */
static void sindex_add(struct sindex *x, const char *key, size_t e)
{
    size_t b = (size_t)(shash(key, x->fold) & (x->nb - 1));
    if (e >= x->cap) {
        size_t ncap = x->cap ? x->cap : 64;
        while (ncap <= e)
            ncap *= 2;
        x->next = xrealloc(x->next, ncap * sizeof *x->next);
        x->cap = ncap;
    }
    x->next[e] = x->head[b];
    x->head[b] = e + 1;
}

/* The first entry of key's bucket (+1; 0 none); walk with sindex_more. */
static size_t sindex_first(const struct sindex *x, const char *key)
{
    return x->head[shash(key, x->fold) & (x->nb - 1)];
}

static size_t sindex_more(const struct sindex *x, size_t e1)
{
    return x->next[e1 - 1];
}

/* ---- the captured collections -------------------------------------------- */

struct nslist {
    char **ns; /* "db.coll", owned */
    size_t n, cap;
    struct sindex folded; /* lower-case "db.coll" -> ns index */
};

static void nslist_free(struct nslist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->ns[i]);
    free(l->ns);
    sindex_free(&l->folded);
}

/* The captured collections of the task's server: one listDatabases, one
 * listCollections per database. PHASE_STOPPED on a stop request. A server
 * that cannot be asked leaves the list empty (every entry then takes the
 * literal path, as before the server answers again). */
static enum phase captured(struct worker *w, struct nslist *l, bool stoppable)
{
    bson_error_t be;
    char **dbs = mongoc_client_get_database_names_with_opts(w->client, NULL, &be);
    enum phase ph = PHASE_OK;

    memset(l, 0, sizeof *l);
    if (dbs == NULL)
        LOG_WARN("signal resolution: cannot list the databases of %s: %s", w->rs, be.message);
    for (size_t d = 0; dbs && dbs[d] && ph == PHASE_OK; d++) {
        mongoc_database_t *mdb;
        char **colls;
        if (!strcmp(dbs[d], "admin") || !strcmp(dbs[d], "config") || !strcmp(dbs[d], "local"))
            continue;
        if (stoppable && worker_stopping(w)) {
            ph = PHASE_STOPPED;
            break;
        }
        mdb = mongoc_client_get_database(w->client, dbs[d]);
        colls = mongoc_database_get_collection_names_with_opts(mdb, NULL, &be);
        mongoc_database_destroy(mdb);
        if (colls == NULL)
            LOG_WARN("signal resolution: cannot list the collections of %s on %s: %s", dbs[d],
                     w->rs, be.message);
        for (size_t c = 0; colls && colls[c]; c++) {
            if (!strncmp(colls[c], "system.", 7) ||
                !encoder_captures(pipeline_encoder(w->pipe), dbs[d], colls[c]))
                continue;
            if (l->n == l->cap) {
                l->cap = l->cap ? l->cap * 2 : 64;
                l->ns = xrealloc(l->ns, l->cap * sizeof *l->ns);
            }
            size_t len = strlen(dbs[d]) + 1 + strlen(colls[c]) + 1;
            l->ns[l->n] = xmalloc(len);
            snprintf(l->ns[l->n], len, "%s.%s", dbs[d], colls[c]);
            l->n++;
        }
        bson_strfreev(colls);
    }
    bson_strfreev(dbs);
    sindex_init(&l->folded, l->n, true);
    for (size_t i = 0; i < l->n; i++)
        sindex_add(&l->folded, l->ns[i], i);
    return ph;
}

/* ---- resolution ------------------------------------------------------------ */

/* An entry whose anchored regex can only match its own text (case aside):
 * no regex syntax, and exactly one '.', which must then fall on the
 * database/collection separator. */
static bool plain_name(const char *re)
{
    size_t dots = 0;
    for (const char *p = re; *p; p++) {
        if (strchr("\\^$|?*+()[]{}", *p))
            return false;
        dots += *p == '.';
    }
    return dots == 1;
}

/* Entries that matched nothing, by kind, for one summary WARN each. */
struct unmatched {
    size_t n;
    const char *first[RESOLVE_WARN_NAMES];
};

static void note(struct unmatched *u, const char *name)
{
    if (u->n < RESOLVE_WARN_NAMES)
        u->first[u->n] = name;
    u->n++;
}

/* One WARN for the entries of one kind: with one entry, as it reads
 * (sing); with more, their count, what they have in common (plur) and
 * the first RESOLVE_WARN_NAMES of them. */
static void warn_unmatched(const struct unmatched *u, const char *id, const char *sing,
                           const char *plur)
{
    char names[1024];
    size_t len = 0;

    if (u->n == 0)
        return;
    if (u->n == 1) {
        LOG_WARN("signal %s: data-collections entry \"%.200s\" %s", id, u->first[0], sing);
        return;
    }
    names[0] = '\0';
    for (size_t i = 0; i < u->n && i < RESOLVE_WARN_NAMES && len + 1 < sizeof names; i++)
        len += (size_t)snprintf(names + len, sizeof names - len, "%s\"%.200s\"", i ? ", " : "",
                                u->first[i]);
    if (u->n > RESOLVE_WARN_NAMES && len + 1 < sizeof names)
        snprintf(names + len, sizeof names - len, " and %zu more", u->n - RESOLVE_WARN_NAMES);
    LOG_WARN("signal %s: %zu data-collections entries %s: %s", id, u->n, plur, names);
}

/* The first additional-conditions entry whose data-collection matches ns. */
static const bson_t *condition_for(const struct mcdc_snapshot_request *req, const char *ns)
{
    for (size_t i = 0; i < req->condition_count; i++)
        if (incr_ns_matches(req->conditions[i].collection, ns))
            return &req->conditions[i].filter;
    return NULL;
}

struct picked {
    struct worker_want *v;
    size_t n, cap;
    struct sindex seen; /* exact "db.coll" -> v index */
};

/* Adds db.coll (ns, its "db.coll") unless this signal picked it already. */
static void pick(struct picked *p, const struct mcdc_snapshot_request *req, const char *ns,
                 size_t db_len)
{
    char key[600];
    for (size_t e = sindex_first(&p->seen, ns); e; e = sindex_more(&p->seen, e)) {
        snprintf(key, sizeof key, "%s.%s", p->v[e - 1].db, p->v[e - 1].coll);
        if (!strcmp(key, ns))
            return;
    }
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 8;
        p->v = xrealloc(p->v, p->cap * sizeof *p->v);
    }
    struct worker_want *x = &p->v[p->n];
    snprintf(x->db, sizeof x->db, "%.*s", (int)db_len, ns);
    snprintf(x->coll, sizeof x->coll, "%s", ns + db_len + 1);
    x->cond = condition_for(req, ns);
    sindex_add(&p->seen, ns, p->n);
    p->n++;
}

enum phase worker_resolve(struct worker *w, const struct mcdc_snapshot_request *req, const char *id,
                          bool stoppable, struct worker_want **out, size_t *count)
{
    struct nslist l;
    struct picked p = {0};
    struct unmatched no_name = {0}, not_captured = {0}, literal = {0};
    enum phase ph = captured(w, &l, stoppable);

    sindex_init(&p.seen, req->collection_count < (1u << 20) ? req->collection_count : (1u << 20),
                false);
    for (size_t r = 0; r < req->collection_count && ph == PHASE_OK; r++) {
        const char *re = req->collections[r];
        size_t before = p.n;

        if (stoppable && worker_stopping(w)) {
            ph = PHASE_STOPPED;
            break;
        }
        if (plain_name(re)) {
            for (size_t e = sindex_first(&l.folded, re); e; e = sindex_more(&l.folded, e))
                if (!strcasecmp(l.ns[e - 1], re))
                    pick(&p, req, l.ns[e - 1], (size_t)(strchr(l.ns[e - 1], '.') - l.ns[e - 1]));
        } else {
            int code;
            PCRE2_SIZE off;
            pcre2_code *c = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED,
                                          PCRE2_CASELESS | PCRE2_ANCHORED | PCRE2_ENDANCHORED |
                                              PCRE2_UTF | PCRE2_MATCH_INVALID_UTF,
                                          &code, &off, NULL);
            pcre2_match_data *md = c ? pcre2_match_data_create_from_pattern(c, NULL) : NULL;
            for (size_t i = 0; i < l.n; i++) {
                /* an invalid regex compares as a literal (incr_ns_matches) */
                bool hit =
                    c ? pcre2_match(c, (PCRE2_SPTR)l.ns[i], strlen(l.ns[i]), 0, 0, md, NULL) >= 0
                      : !strcasecmp(re, l.ns[i]);
                if (hit)
                    pick(&p, req, l.ns[i], (size_t)(strchr(l.ns[i], '.') - l.ns[i]));
            }
            pcre2_match_data_free(md);
            pcre2_code_free(c);
        }
        if (p.n > before)
            continue;
        const char *dot = strchr(re, '.');
        if (dot == NULL || dot == re || dot[1] == '\0' || dot - re >= 256 ||
            strlen(dot + 1) >= 256) {
            note(&no_name, re);
            continue;
        }
        char ldb[256];
        snprintf(ldb, sizeof ldb, "%.*s", (int)(dot - re), re);
        if (!encoder_captures(pipeline_encoder(w->pipe), ldb, dot + 1)) {
            note(&not_captured, re);
            continue;
        }
        /* Debezium's literal fallback (§5.4 step 1): kept, so a collection
         * created before its turn is still read, but said. */
        note(&literal, re);
        pick(&p, req, re, (size_t)(dot - re));
    }
    if (ph == PHASE_OK) {
        char sing[300], plur[300];
        warn_unmatched(&no_name, id,
                       "matches no captured collection and is no db.collection name: ignored",
                       "match no captured collection and are no db.collection names: ignored");
        warn_unmatched(&not_captured, id,
                       "names no captured collection (the include/exclude lists leave it out): "
                       "ignored",
                       "name no captured collection (the include/exclude lists leave them "
                       "out): ignored");
        snprintf(sing, sizeof sing,
                 "matches no existing collection on %s: taken under its literal name (its "
                 "snapshot completes empty unless the collection is created before its turn)",
                 w->rs);
        snprintf(plur, sizeof plur,
                 "match no existing collection on %s: taken under their literal names (each "
                 "snapshot completes empty unless its collection is created before its turn)",
                 w->rs);
        warn_unmatched(&literal, id, sing, plur);
    }
    sindex_free(&p.seen);
    nslist_free(&l);
    if (ph != PHASE_OK) {
        free(p.v);
        p.v = NULL;
        p.n = 0;
    }
    *out = p.v;
    *count = p.n;
    return ph;
}

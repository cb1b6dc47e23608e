/*
 * snapshot/plan: the collections an initial snapshot copies (snapshot_plan in
 * snapshot.h; debezium-format.md §5.2 step 3): every captured collection,
 * snapshot.include.collection.list, snapshot.collection.filter.overrides.
 */
#include "snapshot/snapshot.h"

#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "capture/capture.h"
#include "common/xalloc.h"

/* ---- plan ---- */

struct include_list {
    pcre2_code **res;
    size_t count;
    bool literal;
    const struct mcdc_strlist *items;
};

static bool include_compile(const struct mcdc_config *cfg, struct include_list *inc,
                            struct mcdc_error *err)
{
    memset(inc, 0, sizeof *inc);
    inc->items = &cfg->snapshot_include_collections;
    inc->literal = cfg->filters_match_mode == MCDC_FILTER_MATCH_LITERAL;
    if (inc->literal || inc->items->count == 0)
        return true;
    inc->res = xcalloc(inc->items->count, sizeof *inc->res);
    inc->count = inc->items->count;
    for (size_t i = 0; i < inc->count; i++) {
        int ecode;
        PCRE2_SIZE eoff;
        inc->res[i] = pcre2_compile((PCRE2_SPTR)inc->items->items[i], PCRE2_ZERO_TERMINATED,
                                    PCRE2_ANCHORED | PCRE2_ENDANCHORED, &ecode, &eoff, NULL);
        if (inc->res[i] == NULL)
            return mcdc_error_set(err, MCDC_ERR_CONFIG, ecode,
                                  "snapshot.include.collection.list: invalid regex '%s' at "
                                  "offset %zu",
                                  inc->items->items[i], (size_t)eoff);
    }
    return true;
}

static void include_free(struct include_list *inc)
{
    for (size_t i = 0; i < inc->count; i++)
        pcre2_code_free(inc->res[i]);
    free(inc->res);
}

/* snapshot.include.collection.list: empty = all captured collections. */
static bool include_matches(const struct include_list *inc, const char *ns)
{
    if (inc->items->count == 0)
        return true;
    for (size_t i = 0; i < inc->items->count; i++) {
        if (inc->literal) {
            if (strcmp(inc->items->items[i], ns) == 0)
                return true;
        } else if (inc->res[i] != NULL) {
            pcre2_match_data *md = pcre2_match_data_create_from_pattern(inc->res[i], NULL);
            int rc = pcre2_match(inc->res[i], (PCRE2_SPTR)ns, strlen(ns), 0, 0, md, NULL);
            pcre2_match_data_free(md);
            if (rc >= 0)
                return true;
        }
    }
    return false;
}

static int coll_cmp(const void *a, const void *b)
{
    const struct snapshot_coll *x = a, *y = b;
    int c = strcmp(x->coll, y->coll); /* Debezium sorts by collection name only */
    return c != 0 ? c : strcmp(x->db, y->db);
}

static bool plan_add(struct snapshot_plan *plan, size_t *cap, mongoc_client_t *client,
                     const struct mcdc_config *cfg, const char *db, const char *coll,
                     struct mcdc_error *err)
{
    struct snapshot_coll *c;
    char ns[512];
    mongoc_collection_t *mc;
    bson_error_t error;

    if (plan->count == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        plan->colls = xrealloc(plan->colls, *cap * sizeof *plan->colls);
    }
    c = &plan->colls[plan->count];
    memset(c, 0, sizeof *c);
    c->db = xstrdup(db);
    c->coll = xstrdup(coll);
    c->filter = bson_new();
    plan->count++;
    snprintf(ns, sizeof ns, "%s.%s", db, coll);
    for (size_t i = 0; i < cfg->snapshot_filter_override_count; i++) {
        const struct mcdc_filter_override *o = &cfg->snapshot_filter_overrides[i];
        if (strcmp(o->ns, ns) != 0)
            continue;
        bson_t *f = bson_new_from_json((const uint8_t *)o->query, -1, &error);
        if (f == NULL)
            return mcdc_error_set(err, MCDC_ERR_CONFIG, 0,
                                  "snapshot.collection.filter.overrides.%s: %s", ns, error.message);
        bson_destroy(c->filter);
        c->filter = f;
    }
    mc = mongoc_client_get_collection(client, db, coll);
    c->estimated = mongoc_collection_estimated_document_count(mc, NULL, NULL, NULL, &error);
    mongoc_collection_destroy(mc);
    return true;
}

bool snapshot_plan(mongoc_client_t *client, const struct mcdc_config *cfg,
                   const struct encoder *enc, struct snapshot_plan **out,
                   struct resume_failure *fail, struct mcdc_error *err)
{
    struct snapshot_plan *plan = xcalloc(1, sizeof *plan);
    struct include_list inc;
    size_t cap = 0;
    bson_error_t error;
    char **dbs = NULL;
    bool ok = false;

    if (!include_compile(cfg, &inc, err))
        goto cleanup;
    dbs = mongoc_client_get_database_names_with_opts(client, NULL, &error);
    if (dbs == NULL) {
        capture_failure_from(&error, NULL, fail, err);
        goto cleanup;
    }
    for (size_t d = 0; dbs[d] != NULL; d++) {
        mongoc_database_t *mdb;
        char **colls;
        if (strcmp(dbs[d], "admin") == 0 || strcmp(dbs[d], "config") == 0 ||
            strcmp(dbs[d], "local") == 0)
            continue;
        mdb = mongoc_client_get_database(client, dbs[d]);
        colls = mongoc_database_get_collection_names_with_opts(mdb, NULL, &error);
        mongoc_database_destroy(mdb);
        if (colls == NULL) {
            capture_failure_from(&error, NULL, fail, err);
            goto cleanup;
        }
        for (size_t c = 0; colls[c] != NULL; c++) {
            char ns[512];
            snprintf(ns, sizeof ns, "%s.%s", dbs[d], colls[c]);
            if (strncmp(colls[c], "system.", 7) == 0 || !encoder_captures(enc, dbs[d], colls[c]) ||
                !include_matches(&inc, ns))
                continue;
            if (!plan_add(plan, &cap, client, cfg, dbs[d], colls[c], err)) {
                bson_strfreev(colls);
                goto cleanup;
            }
        }
        bson_strfreev(colls);
    }
    if (plan->count > 1)
        qsort(plan->colls, plan->count, sizeof *plan->colls, coll_cmp);
    *out = plan;
    plan = NULL;
    ok = true;
cleanup:
    bson_strfreev(dbs);
    include_free(&inc);
    snapshot_plan_free(plan);
    return ok;
}

void snapshot_plan_free(struct snapshot_plan *plan)
{
    if (plan == NULL)
        return;
    for (size_t i = 0; i < plan->count; i++) {
        free(plan->colls[i].db);
        free(plan->colls[i].coll);
        bson_destroy(plan->colls[i].filter);
        bson_destroy(plan->colls[i].owned);
    }
    free(plan->colls);
    snapshot_resume_free(plan->resume);
    free(plan->progress_base);
    free(plan);
}

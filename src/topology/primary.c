/*
 * topology/primary: the primary among addresses used as given
 * (debezium-format.md §6.1, mongodb.members.auto.discover false).
 */
#include "topology/primary.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/hello.h"
#include "common/xalloc.h"
#include "topology/shards.h"

struct primary_finder {
    char *configured;
    char *shard_params;
    char *rs; /* NULL until known */
    char **addrs;
    size_t naddrs;
    size_t current;             /* index of the address pool is on */
    mongoc_client_pool_t *pool; /* owned; NULL before the first find */
    primary_open_fn open;
    void *open_ctx;
};

bool primary_as_given(const struct mcdc_config *cfg, const char *hosts)
{
    return !cfg->members_auto_discover && hosts != NULL && strchr(hosts, ',') != NULL;
}

char *primary_uri_hosts(const char *uri_text)
{
    mongoc_uri_t *uri;
    const mongoc_host_list_t *h;
    size_t len = 0;
    char *out;

    if (strncmp(uri_text, "mongodb://", 10) != 0)
        return NULL;
    uri = mongoc_uri_new_with_error(uri_text, NULL);
    if (uri == NULL)
        return NULL;
    for (h = mongoc_uri_get_hosts(uri); h != NULL; h = h->next)
        len += strlen(h->host_and_port) + 1;
    out = xcalloc(1, len + 1);
    for (h = mongoc_uri_get_hosts(uri); h != NULL; h = h->next) {
        if (out[0] != '\0')
            strcat(out, ",");
        strcat(out, h->host_and_port);
    }
    mongoc_uri_destroy(uri);
    return out;
}

struct primary_finder *primary_finder_new(const char *configured, const char *hosts, const char *rs,
                                          const char *shard_params, primary_open_fn open,
                                          void *open_ctx)
{
    struct primary_finder *pf = xcalloc(1, sizeof *pf);
    const char *p = hosts;

    pf->configured = xstrdup(configured);
    pf->shard_params = shard_params != NULL ? xstrdup(shard_params) : NULL;
    pf->rs = rs != NULL && rs[0] != '\0' ? xstrdup(rs) : NULL;
    pf->open = open;
    pf->open_ctx = open_ctx;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        if (n > 0) {
            pf->addrs = xrealloc(pf->addrs, (pf->naddrs + 1) * sizeof *pf->addrs);
            pf->addrs[pf->naddrs++] = xstrndup(p, n);
        }
        p += n;
        if (*p == ',')
            p++;
    }
    return pf;
}

void primary_finder_destroy(struct primary_finder *pf)
{
    if (pf == NULL)
        return;
    if (pf->pool != NULL)
        mongoc_client_pool_destroy(pf->pool);
    for (size_t i = 0; i < pf->naddrs; i++)
        free(pf->addrs[i]);
    free(pf->addrs);
    free(pf->configured);
    free(pf->shard_params);
    free(pf->rs);
    free(pf);
}

/* Opens a pool connected directly to address i (directConnection=true, the
 * configured credentials and options). NULL with err on a refused URI. */
static mongoc_client_pool_t *open_direct(struct primary_finder *pf, size_t i,
                                         struct mcdc_error *err)
{
    struct shard_info s = {.name = NULL, .rs = pf->rs != NULL ? pf->rs : "", .hosts = pf->addrs[i]};
    mongoc_client_pool_t *pool = NULL;
    char *text = shard_connection_string(pf->configured, &s, pf->shard_params, false, err);

    if (text == NULL)
        return NULL;
    if (!pf->open(pf->open_ctx, text, &pool, err))
        pool = NULL;
    free(text);
    return pool;
}

/* hello on one client of pool: true when the member is the writable primary
 * of the expected set (learning the set name on the first answer); else
 * false with what it answered in why. */
static bool is_primary(struct primary_finder *pf, mongoc_client_pool_t *pool, char *why,
                       size_t why_len)
{
    mongoc_client_t *c = mongoc_client_pool_pop(pool);
    struct mcdc_hello h;
    bson_error_t error;
    bool ok = false;

    if (!mcdc_hello_run(c, 0, &h, &error)) {
        snprintf(why, why_len, "%.200s", error.message);
    } else if (h.set_name == NULL) {
        snprintf(why, why_len, "not a replica-set member");
    } else if (pf->rs != NULL && strcmp(h.set_name, pf->rs) != 0) {
        snprintf(why, why_len, "a member of replica set %s, not %s", h.set_name, pf->rs);
    } else if (!h.writable_primary) {
        snprintf(why, why_len, "not primary");
    } else {
        if (pf->rs == NULL)
            pf->rs = xstrdup(h.set_name);
        ok = true;
    }
    mcdc_hello_destroy(&h);
    mongoc_client_pool_push(pool, c);
    return ok;
}

bool primary_finder_find(struct primary_finder *pf, mongoc_client_pool_t **pool,
                         struct mcdc_error *err)
{
    char answers[768] = "";
    size_t used = 0;

    for (size_t k = 0; k < pf->naddrs; k++) {
        /* The address in use first: a failure that was not a stepdown keeps it. */
        size_t i = pf->pool != NULL ? (pf->current + k) % pf->naddrs : k;
        mongoc_client_pool_t *p = i == pf->current ? pf->pool : NULL;
        char why[256];
        int n;

        if (p == NULL) {
            p = open_direct(pf, i, err);
            if (p == NULL) {
                *pool = NULL;
                return false;
            }
        }
        if (is_primary(pf, p, why, sizeof why)) {
            if (p != pf->pool) {
                if (pf->pool != NULL)
                    mongoc_client_pool_destroy(pf->pool);
                pf->pool = p;
                pf->current = i;
            }
            *pool = pf->pool;
            return true;
        }
        if (p != pf->pool)
            mongoc_client_pool_destroy(p);
        n = snprintf(answers + used, sizeof answers - used, "%s%s: %s", used ? "; " : "",
                     pf->addrs[i], why);
        if (n > 0 && (size_t)n < sizeof answers - used)
            used += (size_t)n;
    }
    if (pf->pool == NULL) {
        pf->pool = open_direct(pf, 0, err);
        pf->current = 0;
        if (pf->pool == NULL) {
            *pool = NULL;
            return false;
        }
    }
    *pool = pf->pool;
    return mcdc_error_set_retriable(err, MCDC_ERR_MONGO, 0,
                                    "no primary%s%s among the addresses given "
                                    "(mongodb.members.auto.discover false): %s",
                                    pf->rs != NULL ? " of " : "", pf->rs != NULL ? pf->rs : "",
                                    answers);
}

const char *primary_finder_address(const struct primary_finder *pf)
{
    return pf->pool != NULL ? pf->addrs[pf->current] : "";
}

bool primary_finder_lost(const struct primary_finder *pf, mongoc_client_t *client)
{
    size_t n = 0;
    mongoc_server_description_t **sds = mongoc_client_get_server_descriptions(client, &n);
    bool lost = false;

    (void)pf;
    for (size_t i = 0; i < n; i++) {
        const char *type = mongoc_server_description_type(sds[i]);
        /* "Unknown" right after a network error is for the next operation
         * to report; a server that answered as anything else stepped down. */
        if (strcmp(type, "RSPrimary") != 0 && strcmp(type, "Unknown") != 0)
            lost = true;
    }
    mongoc_server_descriptions_destroy_all(sds, n);
    return lost;
}

/* worker_primary adapters (task thread). */
static bool hook_find(void *ctx, mongoc_client_pool_t **pool, const char **address,
                      struct mcdc_error *err)
{
    bool ok = primary_finder_find(ctx, pool, err);
    *address = primary_finder_address(ctx);
    return ok;
}

static bool hook_lost(void *ctx, mongoc_client_t *client)
{
    return primary_finder_lost(ctx, client);
}

void primary_finder_hooks(struct primary_finder *pf, struct worker_primary *out)
{
    out->ctx = pf;
    out->find = hook_find;
    out->lost = hook_lost;
}

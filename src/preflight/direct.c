/*
 * preflight/direct: `mongocdc check` connects to the addresses as given the
 * way a capture task does (topology/primary.h): directly to the primary
 * among them, never to the member names hello reports.
 */
#include "preflight/preflight_internal.h"

#include <stdlib.h>

#include "common/error.h"
#include "topology/primary.h"

/* How long one address may take to answer (ms): a pool waits its whole
 * serverSelectionTimeoutMS on an address that refuses connections, and each
 * address is asked in turn; the capture task uses its selection slice
 * (WORKER_SELECTION_SLICE_MS) the same way. */
#define PF_PROBE_SELECTION_MS 2000

/* primary_open_fn: a pool with the configured selection timeout, at most
 * PF_PROBE_SELECTION_MS (URI wins). */
static bool open_pool(void *ctx, const char *uri_text, mongoc_client_pool_t **pool,
                      struct mcdc_error *err)
{
    const struct mcdc_config *cfg = ctx;
    bson_error_t error;
    mongoc_uri_t *uri = mongoc_uri_new_with_error(uri_text, &error);

    *pool = NULL;
    if (uri == NULL)
        return mcdc_error_set(err, MCDC_ERR_CONFIG, (int)error.code, "%s", error.message);
    if (!mongoc_uri_has_option(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS))
        mongoc_uri_set_option_as_int32(
            uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS,
            (int32_t)(cfg->server_selection_timeout_ms < PF_PROBE_SELECTION_MS
                          ? cfg->server_selection_timeout_ms
                          : PF_PROBE_SELECTION_MS));
    *pool = mongoc_client_pool_new_with_error(uri, &error);
    mongoc_uri_destroy(uri);
    if (*pool == NULL)
        return mcdc_error_set(err, MCDC_ERR_CONFIG, (int)error.code, "%s", error.message);
    mongoc_client_pool_set_error_api(*pool, MONGOC_ERROR_API_VERSION_2);
    return true;
}

bool pf_direct_open(const struct mcdc_config *cfg, const char *hosts, const char *rs,
                    const char *shard_params, struct pf_direct *d, struct mcdc_error *err)
{
    /* open_pool only reads the configuration. */
    d->finder =
        primary_finder_new(cfg->connection_string, hosts, rs, shard_params, open_pool, (void *)cfg);
    d->pool = NULL;
    d->client = NULL;
    if (!primary_finder_find(d->finder, &d->pool, err)) {
        primary_finder_destroy(d->finder);
        d->finder = NULL;
        d->pool = NULL;
        return false;
    }
    d->client = mongoc_client_pool_pop(d->pool);
    return true;
}

void pf_direct_close(struct pf_direct *d)
{
    if (d->client != NULL)
        mongoc_client_pool_push(d->pool, d->client);
    primary_finder_destroy(d->finder);
    d->finder = NULL;
    d->pool = NULL;
    d->client = NULL;
}

mongoc_client_t *pf_direct_seed(struct pf *p, const struct mcdc_config *cfg,
                                const mongoc_uri_t *uri, struct pf_direct *d)
{
    char *hosts = primary_uri_hosts(cfg->connection_string);
    struct mcdc_error err = MCDC_ERROR_INIT;

    if (primary_as_given(cfg, hosts) &&
        !pf_direct_open(cfg, hosts, mongoc_uri_get_replica_set(uri), NULL, d, &err))
        pf_say(p, "WARN", "mongodb", "mongodb.members.auto.discover false: %s", err.msg);
    free(hosts);
    return d->client;
}

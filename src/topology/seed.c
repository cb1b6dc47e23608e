/*
 * topology/seed: the connection helpers of topology.c: a pool opened on a
 * connection string with the configured timeouts, and the `hello` probe that
 * says what the seed is (design.md §2).
 */
#include "topology/seed.h"

#include <string.h>

#include "capture/hello.h"
#include "common/xalloc.h"
#include "worker/worker.h" /* WORKER_SELECTION_SLICE_MS */

/*
 * One hello through the pool. Returns true when the deployment answered:
 * *kind says what it is and *rs is the replica-set name (malloc'd) for the
 * replica-set kinds. Returns false with err when it did not answer.
 */
bool seed_probe(mongoc_client_pool_t *pool, enum seed_kind *kind, char **rs,
                struct mcdc_error *err)
{
    mongoc_client_t *c = mongoc_client_pool_pop(pool);
    struct mcdc_hello h;
    bson_error_t error;
    bool ok = mcdc_hello_run(c, 0, &h, &error);

    *rs = NULL;
    *kind = (enum seed_kind)h.kind;
    if (!ok)
        mcdc_error_from_bson(err, error.code, error.message, true);
    else if (h.set_name != NULL)
        *rs = xstrdup(h.set_name);
    mcdc_hello_destroy(&h);
    mongoc_client_pool_push(pool, c);
    return ok;
}

/* Fills err with a connection-string error whose driver message may quote
 * parts of the URI: the text goes through the redactor first. */
static void set_redacted_error(struct mcdc_error *err, const struct mcdc_config *cfg, int code,
                               const char *redacted_uri, const char *message)
{
    char *why = config_redact_text(message, cfg->connection_string);
    mcdc_error_set(err, MCDC_ERR_CONFIG, code, "mongodb.connection.string %s: %s", redacted_uri,
                   why);
    free(why);
}

/*
 * Parses uri_text and opens a pool on it with the configured timeouts (URI
 * options win). Fills *uri_out and *pool_out; *selection_ms gets the
 * overall selection budget. Returns false with err (redacted) on a bad URI.
 */
bool seed_open_pool(const struct mcdc_config *cfg, const char *uri_text, mongoc_uri_t **uri_out,
                    mongoc_client_pool_t **pool_out, int64_t *selection_ms, struct mcdc_error *err)
{
    bson_error_t error;
    char redacted[512];

    config_redact_uri(uri_text, redacted, sizeof redacted);
    *uri_out = mongoc_uri_new_with_error(uri_text, &error);
    if (*uri_out == NULL) {
        set_redacted_error(err, cfg, (int)error.code, redacted, error.message);
        return false;
    }
    if (mongoc_uri_get_appname(*uri_out) == NULL)
        mongoc_uri_set_appname(*uri_out, "mongocdc");
    /* The configured selection timeout is the budget of a whole connection
     * attempt; one blocking selection in libmongoc gets only a slice of it,
     * so a stop request is seen within a slice (worker_start()). */
    if (mongoc_uri_has_option(*uri_out, MONGOC_URI_SERVERSELECTIONTIMEOUTMS))
        *selection_ms = mongoc_uri_get_option_as_int32(
            *uri_out, MONGOC_URI_SERVERSELECTIONTIMEOUTMS, (int32_t)cfg->server_selection_timeout_ms);
    else
        *selection_ms = cfg->server_selection_timeout_ms;
    mongoc_uri_set_option_as_int32(*uri_out, MONGOC_URI_SERVERSELECTIONTIMEOUTMS,
                                   (int32_t)(*selection_ms < WORKER_SELECTION_SLICE_MS
                                                 ? *selection_ms
                                                 : WORKER_SELECTION_SLICE_MS));
    if (!mongoc_uri_has_option(*uri_out, MONGOC_URI_CONNECTTIMEOUTMS))
        mongoc_uri_set_option_as_int32(*uri_out, MONGOC_URI_CONNECTTIMEOUTMS,
                                       (int32_t)cfg->connect_timeout_ms);
    if (!mongoc_uri_has_option(*uri_out, MONGOC_URI_HEARTBEATFREQUENCYMS))
        mongoc_uri_set_option_as_int32(*uri_out, MONGOC_URI_HEARTBEATFREQUENCYMS,
                                       (int32_t)cfg->heartbeat_frequency_ms);
    if (cfg->socket_timeout_ms > 0 &&
        !mongoc_uri_has_option(*uri_out, MONGOC_URI_SOCKETTIMEOUTMS))
        mongoc_uri_set_option_as_int32(*uri_out, MONGOC_URI_SOCKETTIMEOUTMS,
                                       (int32_t)cfg->socket_timeout_ms);
    *pool_out = mongoc_client_pool_new_with_error(*uri_out, &error);
    if (*pool_out == NULL) {
        set_redacted_error(err, cfg, (int)error.code, redacted, error.message);
        return false;
    }
    mongoc_client_pool_set_error_api(*pool_out, MONGOC_ERROR_API_VERSION_2);
    return true;
}

bool seed_reopen_bounded(mongoc_uri_t **uri, mongoc_client_pool_t **pool,
                         int32_t socket_timeout_ms, struct mcdc_error *err)
{
    bson_error_t error;

    int32_t connect_ms = mongoc_uri_get_option_as_int32(*uri, MONGOC_URI_CONNECTTIMEOUTMS, 0);

    if (mongoc_uri_get_option_as_int32(*uri, MONGOC_URI_SOCKETTIMEOUTMS, 0) <= 0)
        mongoc_uri_set_option_as_int32(*uri, MONGOC_URI_SOCKETTIMEOUTMS, socket_timeout_ms);
    /* The driver's server monitor reads with connectTimeoutMS, and the pool's
     * destruction joins it. */
    if (connect_ms <= 0 || connect_ms > socket_timeout_ms)
        mongoc_uri_set_option_as_int32(*uri, MONGOC_URI_CONNECTTIMEOUTMS, socket_timeout_ms);
    mongoc_client_pool_destroy(*pool);
    *pool = mongoc_client_pool_new_with_error(*uri, &error);
    if (*pool == NULL) {
        mcdc_error_set(err, MCDC_ERR_CONFIG, (int)error.code, "the seed's pool: %s",
                       error.message);
        return false;
    }
    mongoc_client_pool_set_error_api(*pool, MONGOC_ERROR_API_VERSION_2);
    return true;
}

/* capture/hello: see hello.h. */
#include "capture/hello.h"

#include <string.h>

static void classify(struct mcdc_hello *h)
{
    bson_iter_t it;
    h->kind = MCDC_SERVER_STANDALONE;
    if (bson_iter_init_find(&it, &h->reply, "setName") && BSON_ITER_HOLDS_UTF8(&it)) {
        h->set_name = bson_iter_utf8(&it, NULL);
        h->kind = bson_iter_init_find(&it, &h->reply, "configsvr") ? MCDC_SERVER_CONFIG_SERVER
                                                                   : MCDC_SERVER_REPLICA_SET;
    } else if (bson_iter_init_find(&it, &h->reply, "msg") && BSON_ITER_HOLDS_UTF8(&it) &&
               strcmp(bson_iter_utf8(&it, NULL), "isdbgrid") == 0) {
        h->kind = MCDC_SERVER_MONGOS;
    }
    h->writable_primary =
        bson_iter_init_find(&it, &h->reply, "isWritablePrimary") && bson_iter_as_bool(&it);
}

bool mcdc_hello_run(mongoc_client_t *client, uint32_t server_id, struct mcdc_hello *h,
                    bson_error_t *error)
{
    bson_t cmd = BSON_INITIALIZER;
    bool ok;

    memset(h, 0, sizeof *h);
    BSON_APPEND_INT32(&cmd, "hello", 1);
    if (server_id != 0)
        ok = mongoc_client_command_simple_with_server_id(client, "admin", &cmd, NULL, server_id,
                                                         &h->reply, error);
    else
        ok = mongoc_client_command_simple(client, "admin", &cmd, NULL, &h->reply, error);
    bson_destroy(&cmd);
    h->kind = MCDC_SERVER_STANDALONE;
    if (ok)
        classify(h);
    return ok;
}

void mcdc_hello_destroy(struct mcdc_hello *h)
{
    bson_destroy(&h->reply);
    h->set_name = NULL;
}

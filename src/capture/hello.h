/*
 * capture/hello: the one reader of MongoDB's `hello` command, and the one
 * place that says what kind of server answered (design.md §2):
 *   - setName and configsvr: a member of the config server replica set;
 *   - setName: a replica-set member;
 *   - msg "isdbgrid": a mongos (sharded cluster);
 *   - otherwise a standalone server.
 * The whole reply is kept for the fields only one caller reads (lastWrite,
 * operationTime).
 *
 * Thread: any; a client is used by one thread at a time (libmongoc's rule).
 */
#ifndef MCDC_CAPTURE_HELLO_H
#define MCDC_CAPTURE_HELLO_H

#include <stdbool.h>
#include <stdint.h>

#include <mongoc/mongoc.h>

enum mcdc_server_kind {
    MCDC_SERVER_REPLICA_SET,   /* setName, no configsvr */
    MCDC_SERVER_CONFIG_SERVER, /* setName and configsvr: the config server replica set */
    MCDC_SERVER_MONGOS,        /* msg: "isdbgrid" */
    MCDC_SERVER_STANDALONE,
};

struct mcdc_hello {
    enum mcdc_server_kind kind;
    const char *set_name;  /* setName, NULL when absent or not a string; points into reply */
    bool writable_primary; /* isWritablePrimary is true */
    bson_t reply;          /* the whole answer (owned; mcdc_hello_destroy frees it) */
};

/*
 * Runs hello on the admin database through client, on server_id (0: the
 * server libmongoc selects for a primary read) and fills *h. Returns true on
 * an answer; false with libmongoc's *error (h->reply then holds the error
 * reply, or is empty). Either way the caller calls mcdc_hello_destroy(h).
 */
bool mcdc_hello_run(mongoc_client_t *client, uint32_t server_id, struct mcdc_hello *h,
                    bson_error_t *error);

/* Frees h's reply. */
void mcdc_hello_destroy(struct mcdc_hello *h);

#endif

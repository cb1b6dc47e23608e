/*
 * replay_server.h: the state the replay server's files share (a benchmark
 * tool; bench/replay_server.c describes what it answers).
 *   replay_wire.c     the wire: listening, connections, OP_MSG / OP_QUERY
 *                     framing of requests and replies;
 *   replay_reply.c    reply building blocks: hello, $clusterTime, cursors,
 *                     batches copied from the templates and patched;
 *   replay_server.c   the command handlers (dispatch) and main;
 *   replay_data.c     the templates (replay.h);
 *   replay_chunks.c   sharded collections and a chunk migration (--chunks,
 *                     --migrate).
 */
#ifndef MCDC_BENCH_REPLAY_SERVER_H
#define MCDC_BENCH_REPLAY_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <bson/bson.h>

#include "replay.h"

#define OP_REPLY 1
#define OP_QUERY 2004
#define OP_MSG 2013
#define MAX_SHARDS 16
#define MAX_CURSORS 256
#define MAX_NAMESPACES 64

enum cursor_kind { CUR_FREE = 0, CUR_STREAM, CUR_SNAPSHOT };

struct cursor {
    enum cursor_kind kind;
    int64_t id;
    uint64_t pos, end; /* stream: events served / total; snapshot: next _id / end */
    uint64_t pos0;     /* stream: pos when the cursor was opened (--rate pacing) */
    int64_t t_open_ns; /* stream: CLOCK_MONOTONIC when it was opened (--rate pacing) */
    const struct tmpl *tmpl; /* stream: the template of its current reply (replay_stream_tmpl) */
    char ns[128];
};

/* one listening endpoint: a replica-set primary (a shard) or the mongos */
struct server {
    int fd, port;
    int shard;  /* -1 = the mongos of a sharded cluster, else the shard index */
    bool mongos;
    char set_name[32];
    pthread_mutex_t mu;
    struct cursor cursors[MAX_CURSORS];
    uint64_t served; /* stream: highest event number handed out */
    int64_t next_cursor;
};

/* one client connection (a thread of its own) */
struct conn {
    struct server *s;
    int fd;
    int id;
    uint8_t *out;
    size_t out_cap;
    int32_t req_seq;
};

/* the whole server's settings and endpoints (defined in replay_server.c) */
struct replay_state {
    struct tmpl stream, snap;
    uint32_t t0;     /* clusterTime seconds of the whole run */
    uint64_t events; /* per shard */
    size_t batch;
    int collections;
    uint64_t docs; /* per collection (per shard) */
    double rate;   /* stream: change events per second per cursor, 0 = memory speed */
    int64_t tick_ms; /* stream with --rate: events are released every tick_ms */
    int nshards;   /* 0 = plain replica set */
    int chunks;    /* --chunks: chunks per sharded collection, 0 = nothing sharded */
    uint64_t migrate_at; /* --migrate: the event the migration commits after, 0 = none */
    int64_t shard_delay_ms; /* --slow-shard-ms: each getMore of the first shard waits this */
    atomic_bool migrated;   /* a shard has served past migrate_at */
    const char *ns[MAX_NAMESPACES]; /* the datasets' namespaces, in order (--chunks) */
    int nns;
    struct tmpl shard_stream[MAX_SHARDS]; /* --chunks: per shard, its namespaces' events */
    struct tmpl shard_after[2]; /* --migrate: the donor's and recipient's after the commit */
    struct server srv[MAX_SHARDS + 1];
    int nsrv;
    atomic_int conn_ids;
};
extern struct replay_state G;

/* ---- replay_wire.c */

/* Opens s's listening socket on 127.0.0.1:port (0 = any free port; s->port
 * is set to the one bound) and initialises its lock and cursor ids. Exits
 * (replay_die) when it cannot listen. */
void replay_listen(struct server *s, int port);

/* Accepts connections on s forever, one detached thread per connection that
 * reads requests, answers each with replay_dispatch() and sends the reply
 * (none for an OP_MSG with moreToCome). arg is the struct server; never
 * returns (exits on an accept failure). */
void *replay_accept_loop(void *arg);

/* ---- replay_server.c */

/* Answers the command cmd (the body of an OP_MSG, or the query of a legacy
 * OP_QUERY) of connection c into r, an initialised empty document. */
void replay_dispatch(struct conn *c, const bson_t *cmd, bson_t *r);

/* ---- replay_chunks.c */

/* With --chunks: collects the datasets' namespaces from nss (ndocs, one per
 * document of docs) and builds each shard's template of change events of
 * the namespaces it owns (and, with --migrate, the donor's and recipient's
 * after the migration). Exits (replay_die) when a shard would own none. */
void replay_chunks_build(bson_t **docs, char **nss, size_t ndocs);

/* The template of the stream reply server s sends from event pos + 1 on:
 * G.stream, or with --chunks the shard's own (after the migration once pos
 * reaches --migrate, which marks the migration committed). */
const struct tmpl *replay_stream_tmpl(const struct server *s, uint64_t pos);

/* Appends to arr, from element key k on, the documents of config.<coll>
 * (collections, chunks) that match the find cmd's filter (_id or ns, or
 * all); nothing without --chunks. Returns the next element key. */
size_t replay_config_docs(const char *coll, const bson_t *cmd, bson_t *arr, size_t k);

/* ---- replay_reply.c */

/* Appends Timestamp(G.t0, n) as field k of b. */
void append_ts(bson_t *b, const char *k, uint64_t n);

/* Appends $clusterTime (zero signature) and operationTime: the newest event
 * s has handed out. */
void append_cluster_time(bson_t *r, struct server *s);

/* Appends the fields of a hello (legacy: isMaster) reply to cmd from
 * connection c: a primary of its one-member set, or a mongos. */
void hello_reply(struct conn *c, const bson_t *cmd, bson_t *r, bool legacy);

/* A free cursor of s, of kind, with a new id; NULL when all MAX_CURSORS are
 * open. The caller holds s->mu. */
struct cursor *cursor_new(struct server *s, enum cursor_kind kind);

/* The open cursor of s with that id, or NULL. The caller holds s->mu. */
struct cursor *cursor_find(struct server *s, int64_t id);

/* The template element the next reply of stream cursor cu starts at: 0 at
 * memory speed (every reply is a whole template); with --rate, where the
 * previous reply stopped, so that partial replies keep the template's mix
 * of operations and documents. */
size_t stream_tmpl_first(const struct cursor *cu);

/* Appends the cursor document of a change stream to r: events
 * (cu->pos, cu->pos + n] as cursor.<field> (n template events from
 * stream_tmpl_first(cu) on, keyed "0".."n-1"), the postBatchResumeToken of
 * event cu->pos + n, the id and ns. */
void stream_cursor(bson_t *r, struct cursor *cu, const char *field, size_t n);

/* Patches, in the complete reply r, the resume token and clusterTime
 * increments of the n events of cursor.<field> (events of cu->tmpl from k
 * on, as stream_cursor put them) to first, first + 1, ... */
void stream_patch(bson_t *r, const struct cursor *cu, const char *field, size_t k, uint64_t first,
                  size_t n);

/* Appends the cursor document of a snapshot read to r: n documents of the
 * template as cursor.<field>; the id is 0 once the read ends with them. */
void snap_cursor(bson_t *r, struct cursor *cu, const char *field, size_t n);

/* Patches, in the complete reply r, the _id of the n documents of
 * cursor.<field> to first, first + 1, ... */
void snap_patch(bson_t *r, const char *field, uint64_t first, size_t n);

/* Answers an aggregate cmd on db.coll that starts with {$sample: {size: S}}
 * on a bench collection into r (a cursor of min(S, --docs) documents {_id},
 * spread evenly over the collection's _ids 0..docs-1, in one batch) and
 * returns true; false (r untouched) for anything else. */
bool sample_reply(const bson_t *cmd, const char *db, const char *coll, bson_t *r);

/* Narrows [*lo, *hi) to the _ids the find cmd's filter admits by the numeric
 * bounds ($gt, $gte, $lt, $lte) under an _id anywhere in it, as the split
 * snapshot's ranges give them (keyrange_span_filter); every snapshot _id is an
 * integer, so other brackets of the filter match nothing here. */
void find_id_range(const bson_t *cmd, uint64_t *lo, uint64_t *hi);

#endif

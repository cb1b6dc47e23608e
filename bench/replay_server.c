/*
 * replay_server: a MongoDB wire-protocol server that replays pre-built change
 * events and snapshot documents at memory speed, so that a benchmark of the
 * whole mongocdc process through the wire is not bound by the server.
 *
 * It answers as the primary of a one-member replica set (or, with --shards,
 * as a mongos in front of N one-member shards, each on a port of its own).
 * What it speaks is what mongocdc and libmongoc send (OP_MSG, with OP_QUERY
 * only for the legacy hello handshake; MongoDB Wire Protocol reference):
 *   hello / isMaster (awaitable hello waits maxAwaitTimeMS), buildInfo, ping,
 *   endSessions, killCursors, listDatabases, listCollections, count,
 *   find (the collection reads of a snapshot, local.oplog.rs, config.shards),
 *   aggregate ($changeStream, $sample for split points) and getMore.
 * Anything else is answered {ok: 1} and logged once, so that a new command in
 * the daemon shows up in the benchmark's log instead of failing it.
 *
 * Data: the documents of the dataset files given with --data (Extended JSON,
 * one per line, read with bson_new_from_json). From them, at start:
 *   - a template of --batch change events: 6 in 10 inserts, 3 updates (with an
 *     updateDescription and the updateLookup fullDocument), 1 delete, spread
 *     over the datasets' namespaces; each reply copies the template and
 *     patches every event's resume token and clusterTime, so tokens and times
 *     increase strictly over the whole run (Timestamp(start, n), n = 1, 2, ...);
 *   - a template of --batch snapshot documents whose _id (int64) is patched
 *     per reply, so that each collection bench.c<k> holds _id 0..docs-1.
 * The stream ends after --events events (rounded up to whole batches); later
 * getMores wait their maxTimeMS and return empty batches, as an idle server does.
 *
 * Usage: replay_server --port P --data FILE [--data FILE...] [--events N]
 *        [--batch K] [--collections C] [--docs M] [--shards S]
 * Prints "ready <port> [<shard port>...]" on stdout once listening.
 *
 * A benchmark tool, not a MongoDB: no writes, no auth, no TLS, no compression.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bson/bson.h>

#include "replay.h"

#define OP_REPLY 1
#define OP_QUERY 2004
#define OP_MSG 2013
#define MAX_SHARDS 16
#define MAX_CURSORS 256

enum cursor_kind { CUR_FREE = 0, CUR_STREAM, CUR_SNAPSHOT };

struct cursor {
    enum cursor_kind kind;
    int64_t id;
    uint64_t pos, end; /* stream: events served / total; snapshot: next _id / end */
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

static struct {
    struct tmpl stream, snap;
    uint32_t t0;    /* clusterTime seconds of the whole run */
    uint64_t events; /* per shard */
    size_t batch;
    int collections;
    uint64_t docs; /* per collection (per shard) */
    int nshards;   /* 0 = plain replica set */
    struct server srv[MAX_SHARDS + 1];
    int nsrv;
    atomic_int conn_ids;
} G;

static void token_hex(char *out, size_t cap, uint64_t n)
{
    snprintf(out, cap, "82%08X%08X%s", G.t0, (uint32_t)n, REPLAY_TOKEN_TAIL);
}

static void append_ts(bson_t *b, const char *k, uint64_t n)
{
    bson_append_timestamp(b, k, -1, G.t0, (uint32_t)n);
}

/* ---------------------------------------------------------------- replies */

struct conn {
    struct server *s;
    int fd;
    int id;
    uint8_t *out;
    size_t out_cap;
    int32_t req_seq;
};

static void append_cluster_time(bson_t *r, struct server *s)
{
    bson_t ct, sig;
    uint8_t zero[20] = {0};
    uint64_t n;

    pthread_mutex_lock(&s->mu);
    n = s->served;
    pthread_mutex_unlock(&s->mu);
    bson_append_document_begin(r, "$clusterTime", 12, &ct);
    append_ts(&ct, "clusterTime", n);
    bson_append_document_begin(&ct, "signature", 9, &sig);
    bson_append_binary(&sig, "hash", 4, BSON_SUBTYPE_BINARY, zero, 20);
    BSON_APPEND_INT64(&sig, "keyId", 0);
    bson_append_document_end(&ct, &sig);
    bson_append_document_end(r, &ct);
    append_ts(r, "operationTime", n);
}

static bool send_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static bool send_reply(struct conn *c, int32_t resp_to, int opcode, const bson_t *body)
{
    size_t pre = opcode == OP_MSG ? 5 : 20;
    size_t total = 16 + pre + body->len;
    if (total > c->out_cap) {
        c->out_cap = total * 2;
        c->out = realloc(c->out, c->out_cap);
    }
    uint8_t *w = c->out;
    int32_t hdr[4] = {(int32_t)total, (c->s->port << 16) ^ ++c->req_seq, resp_to, opcode};
    memcpy(w, hdr, 16);
    w += 16;
    if (opcode == OP_MSG) {
        memset(w, 0, 5); /* flags 0, kind 0 */
    } else {
        int32_t f = 8, start = 0, nret = 1;
        int64_t cid = 0;
        memcpy(w, &f, 4);
        memcpy(w + 4, &cid, 8);
        memcpy(w + 12, &start, 4);
        memcpy(w + 16, &nret, 4);
    }
    memcpy(w + pre, bson_get_data(body), body->len);
    return send_all(c->fd, c->out, total);
}

static void hello_reply(struct conn *c, const bson_t *cmd, bson_t *r, bool legacy)
{
    struct server *s = c->s;
    bson_t sub, sub2, arr;
    bson_oid_t pid, eid;
    char host[64];
    uint64_t n;
    bson_iter_t it;

    bson_oid_init_from_string(&pid, "6b12be2ff4c7158c52ab1434");
    bson_oid_init_from_string(&eid, "7fffffff0000000000000001");
    snprintf(host, sizeof host, "127.0.0.1:%d", s->port);
    if (bson_iter_init_find(&it, cmd, "helloOk"))
        BSON_APPEND_BOOL(r, "helloOk", true);
    bson_append_document_begin(r, "topologyVersion", 15, &sub);
    BSON_APPEND_OID(&sub, "processId", &pid);
    BSON_APPEND_INT64(&sub, "counter", 0);
    bson_append_document_end(r, &sub);
    BSON_APPEND_BOOL(r, legacy ? "ismaster" : "isWritablePrimary", true);
    if (s->mongos) {
        BSON_APPEND_UTF8(r, "msg", "isdbgrid");
    } else {
        bson_append_array_begin(r, "hosts", 5, &arr);
        BSON_APPEND_UTF8(&arr, "0", host);
        bson_append_array_end(r, &arr);
        BSON_APPEND_UTF8(r, "setName", s->set_name);
        BSON_APPEND_INT32(r, "setVersion", 1);
        BSON_APPEND_BOOL(r, "secondary", false);
        BSON_APPEND_UTF8(r, "primary", host);
        BSON_APPEND_UTF8(r, "me", host);
        BSON_APPEND_OID(r, "electionId", &eid);
        pthread_mutex_lock(&s->mu);
        n = s->served;
        pthread_mutex_unlock(&s->mu);
        bson_append_document_begin(r, "lastWrite", 9, &sub);
        bson_append_document_begin(&sub, "opTime", 6, &sub2);
        append_ts(&sub2, "ts", n);
        BSON_APPEND_INT64(&sub2, "t", 1);
        bson_append_document_end(&sub, &sub2);
        BSON_APPEND_DATE_TIME(&sub, "lastWriteDate", (int64_t)G.t0 * 1000);
        bson_append_document_begin(&sub, "majorityOpTime", 14, &sub2);
        append_ts(&sub2, "ts", n);
        BSON_APPEND_INT64(&sub2, "t", 1);
        bson_append_document_end(&sub, &sub2);
        BSON_APPEND_DATE_TIME(&sub, "majorityWriteDate", (int64_t)G.t0 * 1000);
        bson_append_document_end(r, &sub);
    }
    BSON_APPEND_INT32(r, "maxBsonObjectSize", 16777216);
    BSON_APPEND_INT32(r, "maxMessageSizeBytes", 48000000);
    BSON_APPEND_INT32(r, "maxWriteBatchSize", 100000);
    BSON_APPEND_DATE_TIME(r, "localTime", (int64_t)time(NULL) * 1000);
    BSON_APPEND_INT32(r, "logicalSessionTimeoutMinutes", 30);
    BSON_APPEND_INT32(r, "connectionId", c->id);
    BSON_APPEND_INT32(r, "minWireVersion", 0);
    BSON_APPEND_INT32(r, "maxWireVersion", 17);
    BSON_APPEND_BOOL(r, "readOnly", false);
    BSON_APPEND_DOUBLE(r, "ok", 1.0);
}

static struct cursor *cursor_new(struct server *s, enum cursor_kind kind)
{
    for (int i = 0; i < MAX_CURSORS; i++) {
        if (s->cursors[i].kind == CUR_FREE) {
            struct cursor *cu = &s->cursors[i];
            memset(cu, 0, sizeof *cu);
            cu->kind = kind;
            cu->id = s->next_cursor++;
            return cu;
        }
    }
    return NULL;
}

static struct cursor *cursor_find(struct server *s, int64_t id)
{
    for (int i = 0; i < MAX_CURSORS; i++)
        if (s->cursors[i].kind != CUR_FREE && s->cursors[i].id == id)
            return &s->cursors[i];
    return NULL;
}

/* Appends `field`: the first n elements of t; returns the offset of the
 * elements inside r's data (valid once r is complete; r is not reallocated
 * by later appends into a parent as its offsets stay). */
static void append_batch(bson_t *cur, const char *field, const struct tmpl *t, size_t n)
{
    size_t len = n ? t->end[n - 1] : 0;
    uint8_t *buf = malloc(len + 5);
    int32_t total = (int32_t)(len + 5);
    bson_t arr;

    memcpy(buf, &total, 4);
    memcpy(buf + 4, t->elems, len);
    buf[4 + len] = 0;
    if (!bson_init_static(&arr, buf, len + 5))
        replay_die("bad batch template");
    bson_append_array(cur, field, -1, &arr);
    free(buf);
}

/* offset of the elements of cursor.<field> inside r */
static uint8_t *batch_at(bson_t *r, const char *field)
{
    bson_iter_t it, sub;
    uint32_t len;
    const uint8_t *data;
    if (!bson_iter_init_find(&it, r, "cursor") || !bson_iter_recurse(&it, &sub) ||
        !bson_iter_find(&sub, field))
        replay_die("batch not found in reply");
    bson_iter_array(&sub, &len, &data);
    return (uint8_t *)data + 4;
}

static void hex8(uint8_t *w, uint32_t v)
{
    static const char H[] = "0123456789ABCDEF";
    for (int k = 7; k >= 0; k--) {
        w[k] = (uint8_t)H[v & 15];
        v >>= 4;
    }
}

/* cursor document of a change stream: events (pos, pos + n] */
static void stream_cursor(bson_t *r, struct cursor *cu, const char *field, size_t n)
{
    bson_t cur, tok;
    char t[160];

    bson_append_document_begin(r, "cursor", 6, &cur);
    append_batch(&cur, field, &G.stream, n);
    token_hex(t, sizeof t, cu->pos + n);
    bson_append_document_begin(&cur, "postBatchResumeToken", 20, &tok);
    BSON_APPEND_UTF8(&tok, "_data", t);
    bson_append_document_end(&cur, &tok);
    BSON_APPEND_INT64(&cur, "id", cu->id);
    BSON_APPEND_UTF8(&cur, "ns", "admin.$cmd.aggregate");
    bson_append_document_end(r, &cur);
}

static void stream_patch(bson_t *r, const char *field, uint64_t first, size_t n)
{
    uint8_t *base = batch_at(r, field);
    for (size_t j = 0; j < n; j++) {
        uint32_t inc = (uint32_t)(first + j);
        hex8(base + G.stream.patch[j], inc);
        memcpy(base + G.stream.patch2[j], &inc, 4); /* Timestamp: increment, then seconds */
    }
}

static void snap_cursor(bson_t *r, struct cursor *cu, const char *field, size_t n)
{
    bson_t cur;
    bson_append_document_begin(r, "cursor", 6, &cur);
    append_batch(&cur, field, &G.snap, n);
    BSON_APPEND_INT64(&cur, "id", cu->pos + n < cu->end ? cu->id : 0);
    BSON_APPEND_UTF8(&cur, "ns", cu->ns);
    bson_append_document_end(r, &cur);
}

static void snap_patch(bson_t *r, const char *field, uint64_t first, size_t n)
{
    uint8_t *base = batch_at(r, field);
    for (size_t j = 0; j < n; j++) {
        int64_t id = (int64_t)(first + j);
        memcpy(base + G.snap.patch[j], &id, 8);
    }
}

static int64_t iter_int(const bson_t *b, const char *k, int64_t dflt)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, b, k) && BSON_ITER_HOLDS_NUMBER(&it))
        return bson_iter_as_int64(&it);
    return dflt;
}

/* the increment of a resume token's "82<t><i>" prefix, or 0 */
static uint64_t token_pos(const bson_iter_t *stage)
{
    bson_iter_t it;
    const char *hex;
    uint32_t len;
    if (!bson_iter_recurse(stage, &it))
        return 0;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "resumeAfter") && strcmp(k, "startAfter"))
            continue;
        bson_iter_t d;
        if (!bson_iter_recurse(&it, &d) || !bson_iter_find(&d, "_data") || !BSON_ITER_HOLDS_UTF8(&d))
            return 0;
        hex = bson_iter_utf8(&d, &len);
        if (len < 18)
            return 0;
        char tmp[9];
        memcpy(tmp, hex + 10, 8);
        tmp[8] = 0;
        return strtoull(tmp, NULL, 16);
    }
    return 0;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

static void unhandled(const char *name)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char seen[64][48];
    static int nseen;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nseen; i++)
        if (!strcmp(seen[i], name))
            goto out;
    if (nseen < 64)
        snprintf(seen[nseen++], sizeof seen[0], "%s", name);
    fprintf(stderr, "replay_server: command %s answered {ok: 1}\n", name);
out:
    pthread_mutex_unlock(&mu);
}

/* Answers one command into r. */
static void dispatch(struct conn *c, const bson_t *cmd, bson_t *r)
{
    struct server *s = c->s;
    bson_iter_t it;
    const char *name, *db = "admin";

    if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it)) {
        BSON_APPEND_DOUBLE(r, "ok", 0.0);
        return;
    }
    name = bson_iter_key(&it);
    bson_iter_t dbi;
    if (bson_iter_init_find(&dbi, cmd, "$db") && BSON_ITER_HOLDS_UTF8(&dbi))
        db = bson_iter_utf8(&dbi, NULL);

    if (!strcmp(name, "hello") || !strcasecmp(name, "isMaster")) {
        int64_t wait = iter_int(cmd, "maxAwaitTimeMS", -1);
        if (wait > 0)
            sleep_ms(wait); /* nothing ever changes: wait the whole time */
        hello_reply(c, cmd, r, strcmp(name, "hello") != 0);
    } else if (!strcasecmp(name, "buildInfo")) {
        bson_t arr;
        BSON_APPEND_UTF8(r, "version", "6.0.0");
        bson_append_array_begin(r, "versionArray", 12, &arr);
        BSON_APPEND_INT32(&arr, "0", 6);
        BSON_APPEND_INT32(&arr, "1", 0);
        BSON_APPEND_INT32(&arr, "2", 0);
        BSON_APPEND_INT32(&arr, "3", 0);
        bson_append_array_end(r, &arr);
        BSON_APPEND_INT32(r, "maxBsonObjectSize", 16777216);
        BSON_APPEND_DOUBLE(r, "ok", 1.0);
    } else if (!strcmp(name, "listDatabases")) {
        bson_t arr, d;
        const char *names[] = {"admin", "bench", "config", "local"};
        bson_append_array_begin(r, "databases", 9, &arr);
        for (int i = 0; i < 4; i++) {
            char k[4];
            snprintf(k, sizeof k, "%d", i);
            bson_append_document_begin(&arr, k, -1, &d);
            BSON_APPEND_UTF8(&d, "name", names[i]);
            bson_append_document_end(&arr, &d);
        }
        bson_append_array_end(r, &arr);
        BSON_APPEND_DOUBLE(r, "ok", 1.0);
    } else if (!strcmp(name, "listCollections")) {
        bson_t cur, arr, d;
        char ns[160];
        bool bench = !strcmp(db, "bench");
        bson_append_document_begin(r, "cursor", 6, &cur);
        bson_append_array_begin(&cur, "firstBatch", 10, &arr);
        for (int i = 0; bench && i < G.collections; i++) {
            char k[12], cn[16];
            snprintf(k, sizeof k, "%d", i);
            snprintf(cn, sizeof cn, "c%d", i);
            bson_append_document_begin(&arr, k, -1, &d);
            BSON_APPEND_UTF8(&d, "name", cn);
            BSON_APPEND_UTF8(&d, "type", "collection");
            bson_append_document_end(&arr, &d);
        }
        bson_append_array_end(&cur, &arr);
        BSON_APPEND_INT64(&cur, "id", 0);
        snprintf(ns, sizeof ns, "%s.$cmd.listCollections", db);
        BSON_APPEND_UTF8(&cur, "ns", ns);
        bson_append_document_end(r, &cur);
        BSON_APPEND_DOUBLE(r, "ok", 1.0);
    } else if (!strcmp(name, "count")) {
        BSON_APPEND_INT64(r, "n", !strcmp(db, "bench") ? (int64_t)G.docs : 0);
        BSON_APPEND_DOUBLE(r, "ok", 1.0);
    } else if (!strcmp(name, "find") && !strcmp(db, "local")) {
        /* local.oplog.rs, newest or oldest entry: the current time */
        bson_t cur, arr, d;
        uint64_t n;
        pthread_mutex_lock(&s->mu);
        n = s->served;
        pthread_mutex_unlock(&s->mu);
        bson_append_document_begin(r, "cursor", 6, &cur);
        bson_append_array_begin(&cur, "firstBatch", 10, &arr);
        bson_append_document_begin(&arr, "0", 1, &d);
        append_ts(&d, "ts", n);
        BSON_APPEND_INT64(&d, "t", 1);
        bson_append_document_end(&arr, &d);
        bson_append_array_end(&cur, &arr);
        BSON_APPEND_INT64(&cur, "id", 0);
        BSON_APPEND_UTF8(&cur, "ns", "local.oplog.rs");
        bson_append_document_end(r, &cur);
        BSON_APPEND_DOUBLE(r, "ok", 1.0);
    } else if (!strcmp(name, "find") && !strcmp(db, "config")) {
        /* config.shards (the mongos); other config collections are empty */
        bson_t cur, arr, d;
        bool shards = BSON_ITER_HOLDS_UTF8(&it) && !strcmp(bson_iter_utf8(&it, NULL), "shards");
        bson_append_document_begin(r, "cursor", 6, &cur);
        bson_append_array_begin(&cur, "firstBatch", 10, &arr);
        for (int i = 0; shards && i < G.nshards; i++) {
            char k[16], host[96];
            struct server *sh = &G.srv[i + 1];
            snprintf(k, sizeof k, "%d", i);
            snprintf(host, sizeof host, "%s/127.0.0.1:%d", sh->set_name, sh->port);
            bson_append_document_begin(&arr, k, -1, &d);
            BSON_APPEND_UTF8(&d, "_id", sh->set_name);
            BSON_APPEND_UTF8(&d, "host", host);
            BSON_APPEND_INT32(&d, "state", 1);
            bson_append_timestamp(&d, "topologyTime", 12, G.t0 - 100, 1);
            bson_append_document_end(&arr, &d);
        }
        bson_append_array_end(&cur, &arr);
        BSON_APPEND_INT64(&cur, "id", 0);
        BSON_APPEND_UTF8(&cur, "ns", shards ? "config.shards" : "config.unknown");
        bson_append_document_end(r, &cur);
        BSON_APPEND_DOUBLE(r, "ok", 1.0);
    } else if (!strcmp(name, "find")) {
        const char *coll = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";
        int64_t bs = iter_int(cmd, "batchSize", 101);
        struct cursor *cu;
        pthread_mutex_lock(&s->mu);
        cu = cursor_new(s, CUR_SNAPSHOT);
        pthread_mutex_unlock(&s->mu);
        if (!cu)
            replay_die("too many open cursors");
        snprintf(cu->ns, sizeof cu->ns, "%s.%s", db, coll);
        cu->pos = 0;
        cu->end = !strcmp(db, "bench") ? G.docs : 0;
        size_t n = (size_t)(cu->end - cu->pos);
        if (bs <= 0)
            bs = 101;
        if (n > (size_t)bs)
            n = (size_t)bs;
        if (n > G.snap.n)
            n = G.snap.n;
        snap_cursor(r, cu, "firstBatch", n);
        BSON_APPEND_DOUBLE(r, "ok", 1.0);
        append_cluster_time(r, s);
        snap_patch(r, "firstBatch", cu->pos, n);
        cu->pos += n;
        if (cu->pos >= cu->end)
            cu->kind = CUR_FREE;
        return;
    } else if (!strcmp(name, "aggregate")) {
        bson_iter_t p, st;
        bool cs = false;
        if (bson_iter_init_find(&p, cmd, "pipeline") && bson_iter_recurse(&p, &st) &&
            bson_iter_next(&st) && BSON_ITER_HOLDS_DOCUMENT(&st)) {
            bson_iter_t s0;
            bson_iter_recurse(&st, &s0);
            if (bson_iter_find(&s0, "$changeStream")) {
                cs = true;
                struct cursor *cu;
                pthread_mutex_lock(&s->mu);
                cu = cursor_new(s, CUR_STREAM);
                pthread_mutex_unlock(&s->mu);
                if (!cu)
                    replay_die("too many open cursors");
                cu->pos = token_pos(&s0);
                cu->end = G.events;
                stream_cursor(r, cu, "firstBatch", 0);
            }
        }
        if (!cs) {
            /* $sample for split points, and anything else: an empty result */
            bson_t cur, arr;
            char ns[160];
            bson_append_document_begin(r, "cursor", 6, &cur);
            bson_append_array_begin(&cur, "firstBatch", 10, &arr);
            bson_append_array_end(&cur, &arr);
            BSON_APPEND_INT64(&cur, "id", 0);
            snprintf(ns, sizeof ns, "%s.x", db);
            BSON_APPEND_UTF8(&cur, "ns", ns);
            bson_append_document_end(r, &cur);
        }
        BSON_APPEND_DOUBLE(r, "ok", 1.0);
    } else if (!strcmp(name, "getMore")) {
        int64_t id = BSON_ITER_HOLDS_NUMBER(&it) ? bson_iter_as_int64(&it) : 0;
        struct cursor *cu;
        pthread_mutex_lock(&s->mu);
        cu = cursor_find(s, id);
        pthread_mutex_unlock(&s->mu);
        if (!cu) {
            BSON_APPEND_DOUBLE(r, "ok", 0.0);
            BSON_APPEND_UTF8(r, "errmsg", "cursor id not found");
            BSON_APPEND_INT32(r, "code", 43);
            BSON_APPEND_UTF8(r, "codeName", "CursorNotFound");
        } else if (cu->kind == CUR_STREAM) {
            size_t n = cu->pos < cu->end ? G.stream.n : 0;
            if (n == 0)
                sleep_ms(iter_int(cmd, "maxTimeMS", 1000));
            uint64_t first = cu->pos + 1;
            stream_cursor(r, cu, "nextBatch", n);
            BSON_APPEND_DOUBLE(r, "ok", 1.0);
            cu->pos += n;
            pthread_mutex_lock(&s->mu);
            if (cu->pos > s->served)
                s->served = cu->pos;
            pthread_mutex_unlock(&s->mu);
            append_cluster_time(r, s);
            stream_patch(r, "nextBatch", first, n);
            return;
        } else {
            int64_t bs = iter_int(cmd, "batchSize", 0);
            size_t n = (size_t)(cu->end - cu->pos);
            if (n > G.snap.n)
                n = G.snap.n;
            if (bs > 0 && n > (size_t)bs)
                n = (size_t)bs;
            snap_cursor(r, cu, "nextBatch", n);
            BSON_APPEND_DOUBLE(r, "ok", 1.0);
            append_cluster_time(r, s);
            snap_patch(r, "nextBatch", cu->pos, n);
            cu->pos += n;
            if (cu->pos >= cu->end) {
                pthread_mutex_lock(&s->mu);
                cu->kind = CUR_FREE;
                pthread_mutex_unlock(&s->mu);
            }
            return;
        }
    } else if (!strcmp(name, "killCursors")) {
        bson_iter_t a, e;
        bson_t arr;
        int k = 0;
        bson_append_array_begin(r, "cursorsKilled", 13, &arr);
        if (bson_iter_init_find(&a, cmd, "cursors") && bson_iter_recurse(&a, &e)) {
            while (bson_iter_next(&e)) {
                int64_t id = bson_iter_as_int64(&e);
                char key[12];
                pthread_mutex_lock(&s->mu);
                struct cursor *cu = cursor_find(s, id);
                if (cu)
                    cu->kind = CUR_FREE;
                pthread_mutex_unlock(&s->mu);
                snprintf(key, sizeof key, "%d", k++);
                BSON_APPEND_INT64(&arr, key, id);
            }
        }
        bson_append_array_end(r, &arr);
        BSON_APPEND_DOUBLE(r, "ok", 1.0);
    } else {
        if (strcmp(name, "ping") && strcmp(name, "endSessions"))
            unhandled(name);
        BSON_APPEND_DOUBLE(r, "ok", 1.0);
    }
    append_cluster_time(r, s);
}

/* ---------------------------------------------------------------- connections */

static bool recv_all(int fd, uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t got = recv(fd, p, n, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return false;
        p += got;
        n -= (size_t)got;
    }
    return true;
}

static void *serve(void *arg)
{
    struct conn *c = arg;
    uint8_t *in = NULL;
    size_t in_cap = 0;

    for (;;) {
        int32_t hdr[4];
        if (!recv_all(c->fd, (uint8_t *)hdr, 16))
            break;
        if (hdr[0] < 16 || hdr[0] > 48000000)
            break;
        size_t len = (size_t)hdr[0] - 16;
        if (len > in_cap) {
            in_cap = len * 2;
            in = realloc(in, in_cap);
        }
        if (!recv_all(c->fd, in, len))
            break;
        bson_t cmd, r = BSON_INITIALIZER;
        bool more_to_come = false;
        int opcode;
        int32_t size;
        if (hdr[3] == OP_MSG) {
            uint32_t flags;
            memcpy(&flags, in, 4);
            more_to_come = flags & 2;
            if (len < 10 || in[4] != 0)
                break; /* mongocdc and libmongoc send the body first, no sequences here */
            memcpy(&size, in + 5, 4);
            if (size < 5 || (size_t)size > len - 5 || !bson_init_static(&cmd, in + 5, (size_t)size))
                break;
            opcode = OP_MSG;
        } else if (hdr[3] == OP_QUERY) {
            /* flags, ns cstring, skip, nreturn, query */
            size_t i = 4;
            while (i < len && in[i])
                i++;
            i += 1 + 8;
            if (i + 4 > len)
                break;
            memcpy(&size, in + i, 4);
            if (size < 5 || (size_t)size > len - i || !bson_init_static(&cmd, in + i, (size_t)size))
                break;
            bson_iter_t q;
            if (bson_iter_init_find(&q, &cmd, "$query") && BSON_ITER_HOLDS_DOCUMENT(&q)) {
                uint32_t ql;
                const uint8_t *qd;
                bson_iter_document(&q, &ql, &qd);
                bson_init_static(&cmd, qd, ql);
            }
            opcode = OP_REPLY;
        } else {
            break;
        }
        dispatch(c, &cmd, &r);
        bool ok = more_to_come || send_reply(c, hdr[1], opcode, &r);
        bson_destroy(&r);
        if (!ok)
            break;
    }
    close(c->fd);
    free(in);
    free(c->out);
    free(c);
    return NULL;
}

static void *accept_loop(void *arg)
{
    struct server *s = arg;
    for (;;) {
        int fd = accept(s->fd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            replay_die("accept failed");
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn *c = calloc(1, sizeof *c);
        c->s = s;
        c->fd = fd;
        c->id = atomic_fetch_add(&G.conn_ids, 1) + 1;
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &at, serve, c))
            replay_die("pthread_create failed");
        pthread_attr_destroy(&at);
    }
    return NULL;
}

static void listen_on(struct server *s, int port)
{
    struct sockaddr_in a = {0};
    socklen_t alen = sizeof a;
    int one = 1;

    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s->fd, (struct sockaddr *)&a, sizeof a) || listen(s->fd, 128))
        replay_die("cannot listen");
    getsockname(s->fd, (struct sockaddr *)&a, &alen);
    s->port = ntohs(a.sin_port);
    pthread_mutex_init(&s->mu, NULL);
    s->next_cursor = 1000 + 100000 * (int64_t)(s->shard + 2);
}

int main(int argc, char **argv)
{
    char *files[64];
    int nfiles = 0, port = 0;

    G.events = 1000000;
    G.batch = 1000;
    G.collections = 1;
    G.docs = 100000;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            replay_die("usage: replay_server --port P --data FILE... [--events N] [--batch K] "
                "[--collections C] [--docs M] [--shards S]");
        if (!strcmp(a, "--port"))
            port = atoi(v);
        else if (!strcmp(a, "--data") && nfiles < 64)
            files[nfiles++] = argv[i + 1];
        else if (!strcmp(a, "--events"))
            G.events = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--batch"))
            G.batch = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--collections"))
            G.collections = atoi(v);
        else if (!strcmp(a, "--docs"))
            G.docs = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--shards"))
            G.nshards = atoi(v);
        else
            replay_die("unknown option");
    }
    if (G.batch == 0 || G.nshards < 0 || G.nshards > MAX_SHARDS || G.collections < 0)
        replay_die("bad --batch, --collections or --shards");
    G.events = (G.events + G.batch - 1) / G.batch * G.batch;
    G.t0 = (uint32_t)time(NULL);

    char **nss;
    size_t ndocs;
    bson_t **docs = replay_load_docs(files, nfiles, &nss, &ndocs);
    replay_build_stream(&G.stream, G.batch, G.t0, docs, nss, ndocs);
    replay_build_snapshot(&G.snap, G.batch, docs, ndocs);

    G.nsrv = G.nshards ? G.nshards + 1 : 1;
    for (int i = 0; i < G.nsrv; i++) {
        struct server *s = &G.srv[i];
        s->shard = G.nshards ? i - 1 : 0;
        s->mongos = G.nshards && i == 0;
        if (G.nshards && i > 0)
            snprintf(s->set_name, sizeof s->set_name, "shard%02d", i);
        else
            snprintf(s->set_name, sizeof s->set_name, "rs0");
        listen_on(s, i == 0 ? port : 0);
    }
    printf("ready");
    for (int i = 0; i < G.nsrv; i++)
        printf(" %d", G.srv[i].port);
    printf("\n");
    fflush(stdout);
    for (int i = 1; i < G.nsrv; i++) {
        pthread_t th;
        if (pthread_create(&th, NULL, accept_loop, &G.srv[i]))
            replay_die("pthread_create failed");
    }
    accept_loop(&G.srv[0]);
    return 0;
}

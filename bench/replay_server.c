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
 *   aggregate ($changeStream, $sample for split points: _ids spread over the
 *   collection, which a split snapshot's ranged finds then read) and getMore.
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
 * With --rate N, each change stream cursor is paced at N events per second
 * from its opening: every --tick-ms (default 10) the events then due are
 * released, and a getMore waits for the next release (at most its maxTimeMS)
 * and returns what is due, up to --batch events (end-to-end latency at a
 * fixed rate; without it, a whole batch per getMore).
 *
 * Usage: replay_server --port P --data FILE [--data FILE...] [--events N]
 *        [--batch K] [--collections C] [--docs M] [--shards S] [--rate N]
 *        [--tick-ms T] [--dump-events FILE] [--chunks C [--migrate M]]
 *        [--slow-shard-ms D]
 * Prints "ready <port> [<shard port>...]" on stdout once listening.
 * --dump-events writes the change events of one reply (the template, the
 * increments of event j's token and clusterTime patched to j + 1) to FILE as
 * a stream of BSON documents and exits: the same events for the encode-only
 * and raw-produce bounds (e2e_bench --events FILE).
 * --chunks C (with --shards) makes the datasets' namespaces sharded
 * collections of C chunks, each shard replaying its own; --migrate M moves
 * the first one's chunks from the first shard to the second at event M
 * (replay_chunks.c). --slow-shard-ms D delays each change-stream getMore of
 * the first shard by D ms (a donor that lags).
 *
 * A benchmark tool, not a MongoDB: no writes, no auth, no TLS, no compression.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <bson/bson.h>

#include "replay_server.h"

struct replay_state G;

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

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * How many events the getMore of stream cursor cu returns: at memory speed,
 * a whole template batch while events remain. With --rate, event k of the
 * cursor (k = 1, 2, ... after the position it was opened at) is due
 * k / rate seconds after the cursor opened, released at the next multiple
 * of --tick-ms; the call waits until at least one event is due and returns
 * those due (at most a batch). With nothing left, or nothing due within
 * max_time_ms, it waits max_time_ms and returns 0 (an empty nextBatch, as
 * an awaitData getMore of an idle server).
 */
static size_t stream_due(const struct cursor *cu, int64_t max_time_ms)
{
    uint64_t left = cu->end > cu->pos ? cu->end - cu->pos : 0;
    int64_t deadline = now_ns() + max_time_ms * 1000000;
    int64_t tick = G.tick_ms * 1000000;

    if (left > cu->tmpl->n)
        left = cu->tmpl->n;
    if (left == 0 || G.rate <= 0) {
        if (left == 0)
            sleep_ms(max_time_ms);
        return (size_t)left;
    }
    for (;;) {
        int64_t t = now_ns();
        int64_t released = (t - cu->t_open_ns) / tick * tick; /* ns since open, in whole ticks */
        uint64_t due = cu->pos0 + (uint64_t)((double)released * G.rate / 1e9);
        if (due > cu->pos)
            return (size_t)(due - cu->pos < left ? due - cu->pos : left);
        /* the next event's release: ceil((pos + 1 - pos0) / rate) in ticks */
        int64_t at = (int64_t)((double)(cu->pos + 1 - cu->pos0) * 1e9 / G.rate);
        at = cu->t_open_ns + (at + tick - 1) / tick * tick;
        if (at > deadline) {
            if (deadline > t)
                sleep_ms((deadline - t) / 1000000);
            return 0;
        }
        struct timespec ts = {(at - t) / 1000000000, (at - t) % 1000000000};
        while (nanosleep(&ts, &ts) && errno == EINTR)
            ;
    }
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
void replay_dispatch(struct conn *c, const bson_t *cmd, bson_t *r)
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
        /* config.shards (the mongos); config.collections and config.chunks
         * with --chunks (replay_chunks.c); other config collections are empty */
        bson_t cur, arr, d;
        const char *cname = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";
        bool shards = !strcmp(cname, "shards");
        char cns[160];
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
        replay_config_docs(cname, cmd, &arr, 0);
        bson_append_array_end(&cur, &arr);
        BSON_APPEND_INT64(&cur, "id", 0);
        snprintf(cns, sizeof cns, "config.%s", cname);
        BSON_APPEND_UTF8(&cur, "ns", cns);
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
        find_id_range(cmd, &cu->pos, &cu->end); /* a split snapshot's _id range */
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
                cu->pos0 = cu->pos;
                cu->t_open_ns = now_ns();
                cu->end = G.events;
                cu->tmpl = replay_stream_tmpl(s, cu->pos);
                stream_cursor(r, cu, "firstBatch", 0);
            }
        }
        if (!cs && sample_reply(cmd, db, BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "x",
                                r)) {
            /* $sample of a bench collection: split points */
        } else if (!cs) {
            /* anything else: an empty result */
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
            size_t n, k;
            uint64_t first = cu->pos + 1;
            if (G.shard_delay_ms > 0 && s->shard == 0 && !s->mongos)
                sleep_ms(G.shard_delay_ms);
            cu->tmpl = replay_stream_tmpl(s, cu->pos);
            n = stream_due(cu, iter_int(cmd, "maxTimeMS", 1000));
            k = stream_tmpl_first(cu);
            stream_cursor(r, cu, "nextBatch", n);
            BSON_APPEND_DOUBLE(r, "ok", 1.0);
            cu->pos += n;
            pthread_mutex_lock(&s->mu);
            if (cu->pos > s->served)
                s->served = cu->pos;
            pthread_mutex_unlock(&s->mu);
            append_cluster_time(r, s);
            stream_patch(r, cu, "nextBatch", k, first, n);
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

/* --dump-events: the stream template's events, each patched as a reply
 * patches it (stream_patch), as concatenated BSON documents. */
static void dump_events(const char *path)
{
    FILE *f = fopen(path, "wb");
    size_t begin = 0;

    if (f == NULL)
        replay_die("cannot write --dump-events file");
    for (size_t j = 0; j < G.stream.n; j++) {
        size_t end = G.stream.end[j];
        uint8_t *elem = malloc(end - begin);
        uint32_t inc = (uint32_t)(j + 1);
        char hex[9];
        size_t doc = 1 + strlen((const char *)G.stream.elems + begin + 1) + 1;

        memcpy(elem, G.stream.elems + begin, end - begin);
        snprintf(hex, sizeof hex, "%08X", inc);
        memcpy(elem + (G.stream.patch[j] - begin), hex, 8);
        memcpy(elem + (G.stream.patch2[j] - begin), &inc, 4); /* increment, then seconds */
        if (fwrite(elem + doc, 1, end - begin - doc, f) != end - begin - doc)
            replay_die("cannot write --dump-events file");
        free(elem);
        begin = end;
    }
    if (fclose(f) != 0)
        replay_die("cannot write --dump-events file");
}

int main(int argc, char **argv)
{
    char *files[64];
    const char *dump = NULL;
    int nfiles = 0, port = 0;

    G.events = 1000000;
    G.batch = 1000;
    G.collections = 1;
    G.docs = 100000;
    G.tick_ms = 10;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            replay_die("usage: replay_server --port P --data FILE... [--events N] [--batch K] "
                "[--collections C] [--docs M] [--shards S] [--rate N] [--tick-ms T] "
                "[--dump-events FILE]");
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
        else if (!strcmp(a, "--rate"))
            G.rate = strtod(v, NULL);
        else if (!strcmp(a, "--tick-ms"))
            G.tick_ms = strtoll(v, NULL, 10);
        else if (!strcmp(a, "--shards"))
            G.nshards = atoi(v);
        else if (!strcmp(a, "--dump-events"))
            dump = v;
        else if (!strcmp(a, "--chunks"))
            G.chunks = atoi(v);
        else if (!strcmp(a, "--migrate"))
            G.migrate_at = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--slow-shard-ms"))
            G.shard_delay_ms = strtoll(v, NULL, 10);
        else
            replay_die("unknown option");
    }
    if (G.batch == 0 || G.nshards < 0 || G.nshards > MAX_SHARDS || G.collections < 0)
        replay_die("bad --batch, --collections or --shards");
    if (G.rate < 0 || G.tick_ms <= 0)
        replay_die("bad --rate (events per second, >= 0) or --tick-ms (> 0)");
    if (G.chunks < 0 || (G.chunks > 0 && G.nshards == 0) ||
        (G.migrate_at > 0 && (G.chunks == 0 || G.nshards < 2)))
        replay_die("--chunks needs --shards; --migrate needs --chunks and two shards or more");
    G.events = (G.events + G.batch - 1) / G.batch * G.batch;
    G.t0 = (uint32_t)time(NULL);

    char **nss;
    size_t ndocs;
    bson_t **docs = replay_load_docs(files, nfiles, &nss, &ndocs);
    replay_build_stream(&G.stream, G.batch, G.t0, docs, nss, ndocs);
    replay_build_snapshot(&G.snap, G.batch, docs, ndocs);
    if (G.chunks > 0)
        replay_chunks_build(docs, nss, ndocs);
    if (dump != NULL) {
        dump_events(dump);
        return 0;
    }

    G.nsrv = G.nshards ? G.nshards + 1 : 1;
    for (int i = 0; i < G.nsrv; i++) {
        struct server *s = &G.srv[i];
        s->shard = G.nshards ? i - 1 : 0;
        s->mongos = G.nshards && i == 0;
        if (G.nshards && i > 0)
            snprintf(s->set_name, sizeof s->set_name, "shard%02d", i);
        else
            snprintf(s->set_name, sizeof s->set_name, "rs0");
        replay_listen(s, i == 0 ? port : 0);
    }
    printf("ready");
    for (int i = 0; i < G.nsrv; i++)
        printf(" %d", G.srv[i].port);
    printf("\n");
    fflush(stdout);
    for (int i = 1; i < G.nsrv; i++) {
        pthread_t th;
        if (pthread_create(&th, NULL, replay_accept_loop, &G.srv[i]))
            replay_die("pthread_create failed");
    }
    replay_accept_loop(&G.srv[0]);
    return 0;
}

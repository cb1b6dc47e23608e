/*
 * replay_chunks: the replay mongos's sharded collections and chunk
 * migration (--chunks, --migrate; bench/replay_server.c).
 *
 * With --chunks C (and --shards N), every dataset namespace is a sharded
 * collection (config.collections: key {_id: 1}) of C chunks
 * (config.chunks, mongo-sim-spec.md §6.3): [MinKey, 0), [0, 1000), ...,
 * [1000 (C - 2), MaxKey) on _id, all on one shard, the namespace's i-th of
 * the datasets going to shard i mod N, each chunk with the history
 * [{validAfter: Timestamp(t0 - 100, 1), shard}] (a chunk created there
 * before the run). Each shard then replays only its own namespaces'
 * documents: a template of change events built from them, so that no shard
 * sends an event of a document another shard owns. The datasets' _ids are
 * mostly ObjectIds, which sort after every number: their events fall in the
 * last chunk, so a lookup goes through all C (the order gate scans a
 * collection's chunks in order; topology/gate.c).
 *
 * With --migrate M (needs --chunks and two shards or more), the chunks of
 * the first namespace move from the first shard (the donor) to the second
 * (the recipient) at event M: from the reply that starts at or after event
 * M on, the donor's template leaves that namespace out and the recipient's
 * takes it in, and config.chunks shows the migration's commit as the newest
 * history entry, {validAfter: Timestamp(t0, M + 1), shard: recipient}, once
 * a shard has served past M (a real config server shows it from the commit
 * on). The recipient's events of the moved documents are then the ones the
 * order gate holds until the donor's task has acknowledged up to the
 * commit. Both shards count cluster time alike (Timestamp(t0, n) for their
 * n-th event), so event M of either is the same moment.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bson/bson.h>

#include "replay_server.h"

/* which dataset namespace ns is (its index in G.ns), or -1 */
static int ns_index(const char *ns)
{
    for (int i = 0; i < G.nns; i++)
        if (!strcmp(G.ns[i], ns))
            return i;
    return -1;
}

/* shard index owning namespace i: before the migration, or after it */
static int owner(int i, bool after)
{
    if (after && i == 0)
        return 1;
    return i % G.nshards;
}

/* builds t from the documents of the namespaces shard k owns (after: once
 * the migration has committed) */
static void build_for(struct tmpl *t, int k, bool after, bson_t **docs, char **nss, size_t ndocs)
{
    bson_t **sub = malloc(ndocs * sizeof *sub);
    char **subns = malloc(ndocs * sizeof *subns);
    size_t n = 0;

    for (size_t d = 0; d < ndocs; d++) {
        if (owner(ns_index(nss[d]), after) == k) {
            sub[n] = docs[d];
            subns[n++] = nss[d];
        }
    }
    if (n == 0)
        replay_die("a shard would own no dataset namespace: give more --data files or fewer "
                   "--shards");
    replay_build_stream(t, G.batch, G.t0, sub, subns, n);
    free(sub);
    free(subns);
}

void replay_chunks_build(bson_t **docs, char **nss, size_t ndocs)
{
    for (size_t d = 0; d < ndocs; d++) {
        if (ns_index(nss[d]) >= 0)
            continue;
        if (G.nns == MAX_NAMESPACES)
            replay_die("too many dataset namespaces for --chunks");
        G.ns[G.nns++] = nss[d];
    }
    for (int k = 0; k < G.nshards; k++)
        build_for(&G.shard_stream[k], k, false, docs, nss, ndocs);
    if (G.migrate_at > 0)
        for (int k = 0; k < 2; k++)
            build_for(&G.shard_after[k], k, true, docs, nss, ndocs);
}

const struct tmpl *replay_stream_tmpl(const struct server *s, uint64_t pos)
{
    if (G.chunks == 0 || s->shard < 0 || s->mongos)
        return &G.stream;
    if (G.migrate_at > 0 && pos >= G.migrate_at && s->shard <= 1) {
        atomic_store(&G.migrated, true);
        return &G.shard_after[s->shard];
    }
    return &G.shard_stream[s->shard];
}

/* the string member k of the find's filter, or NULL */
static const char *filter_string(const bson_t *cmd, const char *k)
{
    bson_iter_t it, f;
    if (bson_iter_init_find(&it, cmd, "filter") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &f) && bson_iter_find(&f, k) && BSON_ITER_HOLDS_UTF8(&f))
        return bson_iter_utf8(&f, NULL);
    return NULL;
}

/* {_id: v} with v MinKey (lo < 0), MaxKey (lo > C - 2) or 1000 * lo */
static void append_bound(bson_t *parent, const char *k, int lo)
{
    bson_t b;
    bson_append_document_begin(parent, k, -1, &b);
    if (lo < 0)
        bson_append_minkey(&b, "_id", 3);
    else if (lo > G.chunks - 2)
        bson_append_maxkey(&b, "_id", 3);
    else
        BSON_APPEND_INT64(&b, "_id", (int64_t)lo * 1000);
    bson_append_document_end(parent, &b);
}

/* {validAfter, shard} as element k of a history array */
static void append_entry(bson_t *arr, const char *k, uint32_t sec, uint32_t inc, int shard)
{
    bson_t e;
    bson_append_document_begin(arr, k, -1, &e);
    bson_append_timestamp(&e, "validAfter", 10, sec, inc);
    BSON_APPEND_UTF8(&e, "shard", G.srv[shard + 1].set_name);
    bson_append_document_end(arr, &e);
}

size_t replay_config_docs(const char *coll, const bson_t *cmd, bson_t *arr, size_t k)
{
    bool colls = !strcmp(coll, "collections"), chunks = !strcmp(coll, "chunks");
    const char *want = filter_string(cmd, colls ? "_id" : "ns");
    bool moved = G.migrate_at > 0 && atomic_load(&G.migrated);

    if (G.chunks == 0 || (!colls && !chunks))
        return k;
    for (int i = 0; i < G.nns; i++) {
        char key[16];
        bson_t d, sub;
        if (want != NULL && strcmp(want, G.ns[i]) != 0)
            continue;
        if (colls) {
            snprintf(key, sizeof key, "%zu", k++);
            bson_append_document_begin(arr, key, -1, &d);
            BSON_APPEND_UTF8(&d, "_id", G.ns[i]);
            bson_append_document_begin(&d, "key", 3, &sub);
            BSON_APPEND_INT32(&sub, "_id", 1);
            bson_append_document_end(&d, &sub);
            BSON_APPEND_BOOL(&d, "unique", false);
            bson_append_document_end(arr, &d);
            continue;
        }
        for (int c = 0; c < G.chunks; c++) {
            bson_t hist;
            char id[300];
            snprintf(key, sizeof key, "%zu", k++);
            snprintf(id, sizeof id, "%s-%d", G.ns[i], c);
            bson_append_document_begin(arr, key, -1, &d);
            BSON_APPEND_UTF8(&d, "_id", id);
            BSON_APPEND_UTF8(&d, "ns", G.ns[i]);
            append_bound(&d, "min", c - 1);
            append_bound(&d, "max", c);
            BSON_APPEND_UTF8(&d, "shard", G.srv[owner(i, moved) + 1].set_name);
            bson_append_timestamp(&d, "lastmod", 7, moved && i == 0 ? 2 : 1, 0);
            bson_append_array_begin(&d, "history", 7, &hist);
            if (moved && i == 0) {
                append_entry(&hist, "0", G.t0, (uint32_t)G.migrate_at + 1, owner(i, true));
                append_entry(&hist, "1", G.t0 - 100, 1, owner(i, false));
            } else {
                append_entry(&hist, "0", G.t0 - 100, 1, owner(i, false));
            }
            bson_append_array_end(&d, &hist);
            bson_append_document_end(arr, &d);
        }
    }
    return k;
}

/*
 * topology, the per-shard tasks of a sharded cluster (debezium-format.md
 * §6.1/§6.2, connection mode replica_set): one task per shard of
 * config.shards, each with its owned-chunk snapshot filter and its place in
 * the cross-shard order gate; the stored offsets' capture modes checked to
 * agree across shards at start; shards added or removed while running
 * (discovery) started or drained. Main thread unless a function says
 * otherwise.
 */
#include <stdlib.h>
#include <string.h>

#include <mongoc/mongoc.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "offsets/offsets.h"
#include "topology/chunks.h"
#include "topology/discovery.h"
#include "topology/gate.h"
#include "topology/merged.h"
#include "topology/primary.h"
#include "topology/seed.h"
#include "topology/shards.h"
#include "topology/topology_internal.h"
#include "worker/worker.h"

/* worker_snapshot_filters_fn of a shard's task (task thread). The first
 * snapshot uses the chunk map read for all shards together at start, so that
 * no two shards judge a document by different maps (topology/chunks.h);
 * a later one (after an interrupted snapshot or lost history) reads the map
 * again. */
static bool owned_filters(void *ctx, bson_t *out, struct mcdc_error *err)
{
    struct owned_source *src = ctx;
    const char *names[1];

    if (!src->first_used) {
        src->first_used = true;
        bson_concat(out, src->first);
        return true;
    }
    names[0] = src->shard;
    return chunks_owned_filters(src->seed, names, 1, out, err);
}

/* worker_order_gate adapters over topology/gate.h (task threads). */
static uint64_t gate_check(void *ctx, const char *db, const char *coll, const bson_t *key,
                           uint64_t ts, void **donor, const char **donor_name)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct gate_task *d = NULL;
    uint64_t need = gate_task_check(ctx, db, coll, key, ts, &d, &err);
    if (err.domain != MCDC_ERR_NONE)
        LOG_WARN("order gate: cannot read the chunks of %s.%s (%s); the event passes", db, coll,
                 err.msg);
    *donor = d;
    *donor_name = d == NULL ? NULL : d == ctx ? "every other shard" : gate_task_name(d);
    return need;
}

static bool gate_passed(void *ctx, void *donor, uint64_t need)
{
    return donor == NULL || gate_task_passed(ctx, donor, need);
}

static void gate_publish(void *ctx, uint64_t ts)
{
    gate_task_publish(ctx, ts);
}

static void gate_ended(void *ctx)
{
    gate_task_ended(ctx);
}

static void gate_loaded(void *ctx)
{
    gate_task_loaded(ctx);
}

static bool gate_shard_key(void *ctx, const char *db, const char *coll, bson_t *out,
                           struct mcdc_error *err)
{
    return gate_task_shard_key(ctx, db, coll, out, err);
}

/* The running (or finished) task of shard `name`, or NULL. */
static struct task *task_of_shard(struct topology *t, const char *name)
{
    for (size_t i = 0; i < t->ntasks; i++) {
        if (t->tasks[i].name != NULL && strcmp(t->tasks[i].name, name) == 0)
            return &t->tasks[i];
    }
    return NULL;
}

/*
 * Starts the capture task of shard s (debezium-format.md §6.1/§6.2,
 * connection mode replica_set): its own pool connected straight to the
 * shard's replica set (its host field, the configured URI's credentials, TLS
 * and options carried over, mongodb.connection.string.shard.params
 * appended). Its offsets use the partition {server_id, rs: <shard's replica
 * set>}; topics do not name the shard, so all shards of a collection publish
 * to one topic. start_at: see worker_start().
 */
static bool start_shard_task(struct topology *t, const struct shard_info *s, int64_t start_at,
                             bson_t *owned_first, struct mcdc_error *err)
{
    char *text = shard_connection_string(t->cfg->connection_string, s, t->cfg->shard_params,
                                         t->cfg->members_auto_discover, err);
    struct task *task;
    int64_t selection_ms;
    bool ok;

    if (text == NULL)
        return false;
    task = topology_task_add(t);
    task->name = xstrdup(s->name);
    task->owned = xcalloc(1, sizeof *task->owned);
    task->owned->seed = t->seed.pool;
    task->owned->shard = xstrdup(s->name);
    task->owned->first = bson_new();
    if (owned_first != NULL)
        bson_concat(task->owned->first, owned_first);
    else
        task->owned->first_used = true; /* no map read yet: read one when a snapshot starts */
    ok = seed_open_pool(t->cfg, text, &task->uri, &task->pool, &selection_ms, err);
    free(text);
    if (!ok)
        return false;
    LOG_INFO("shard %s: replica set %s at %s%s", s->name, s->rs, s->hosts,
             s->draining ? " (draining)" : "");
    {
        struct worker_order_gate gate = {0};
        struct worker_order_gate *g = NULL;
        struct gate_task *gt = gate_registry_add(t->gate, s->name);
        if (gt != NULL) {
            gate.ctx = gt;
            gate.check = gate_check;
            gate.passed = gate_passed;
            gate.publish = gate_publish;
            gate.ended = gate_ended;
            gate.loaded = gate_loaded;
            gate.shard_key = gate_shard_key;
            g = &gate;
        } else {
            LOG_WARN("shard %s: too many shards for the order gate; its events are not ordered "
                     "against other shards'", s->name);
        }
        struct worker_primary prim;
        const struct worker_primary *p =
            primary_as_given(t->cfg, s->hosts)
                ? topology_use_finder(t, task, s->hosts, s->rs, t->cfg->shard_params, &prim)
                : NULL;
        struct worker_options opt = {
            .cfg = t->cfg,
            .pool = task->pool,
            .expected_rs = s->rs,
            .per_shard = true,
            .selection_timeout_ms = selection_ms,
            .start_at = start_at,
            .snapshot_filters = owned_filters,
            .filters_ctx = task->owned,
            .gate = g,
            .primary = p,
            .bus = t->bus,
            .notifier = t->notifier,
            .on_exit = topology_task_ended,
            .ctx = t,
        };
        task->w = worker_start(&opt, err);
    }
    return task->w != NULL;
}

/*
 * Main thread, after each successful read of config.shards by discovery
 * (topology/discovery.h). A new shard (or a name that left and came back,
 * once its old task has ended) gets a task reading from its `topologyTime`,
 * the moment it joined, or from its stored offsets when they are later. A
 * shard gone from config.shards (removeShard completed: it holds no chunk
 * and is no database's primary any more, so the cluster writes nothing more
 * to it) has its task drained: it delivers everything up to the shard's last
 * write, then stops and writes its final offsets; they stay in the store.
 */
static void on_shards(void *ctx)
{
    struct topology *t = ctx;
    struct shard_list shards;
    struct mcdc_error err = MCDC_ERROR_INIT;

    if (t->stopping || !discovery_take(t->disc, &shards))
        return;
    for (size_t i = 0; i < shards.count; i++) {
        const struct shard_info *s = &shards.items[i];
        if (task_of_shard(t, s->name) != NULL)
            continue; /* running, or removed and still draining: seen again next poll */
        if (s->topology_time < 0)
            LOG_WARN("shard %s has no topologyTime in config.shards (a server before 5.0): its "
                     "task starts from now", s->name);
        LOG_INFO("shard %s added to the cluster: starting its capture task from its topologyTime "
                 "or its stored offsets, whichever is later",
                 s->name);
        if (!start_shard_task(t, s, s->topology_time >= 0 ? s->topology_time : -1, NULL, &err)) {
            LOG_ERROR("cannot start the capture task of shard %s: %s", s->name, err.msg);
            t->failed_start = true;
            topology_request_stop(t);
            break;
        }
    }
    for (size_t i = 0; i < t->ntasks; i++) {
        struct task *task = &t->tasks[i];
        bool listed = false;
        if (task->name == NULL || task->removed || task->w == NULL)
            continue;
        for (size_t j = 0; j < shards.count && !listed; j++)
            listed = strcmp(shards.items[j].name, task->name) == 0;
        if (!listed) {
            LOG_INFO("shard %s removed from the cluster: its capture task drains what was "
                     "written to it before the removal, then stops; its offsets stay in the store",
                     task->name);
            task->removed = true;
            worker_request_drain(task->w);
        }
    }
    shard_list_clear(&shards);
}

/*
 * debezium-format.md §4.4: the stored offsets say which capture mode wrote
 * them, and each shard's task switches from the other mode on its own. When
 * some shards were written by oplog capture and others by change streams,
 * no single configured mode continues both without a rule per shard (Debezium
 * logs it and carries on, which can re-read or skip); refuse to start, naming
 * the shards, so the operator decides. Returns false with err when the modes
 * differ or the store cannot be read.
 */
static bool capture_modes_agree(struct topology *t, const struct shard_list *shards,
                                struct mcdc_error *err)
{
    struct offset_store *store = offset_store_open(t->cfg, err);
    char *oplog = NULL, *streams = NULL;
    bool ok = true;

    if (store == NULL)
        return false;
    for (size_t i = 0; ok && i < shards->count; i++) {
        struct mcdc_position pos;
        bool found = false;
        position_init(&pos);
        ok = offset_store_load(store, shards->items[i].rs, &pos, &found, err);
        if (ok && found)
            xlist_add(pos.oplog ? &oplog : &streams, shards->items[i].name);
        position_clear(&pos);
    }
    offset_store_close(store);
    if (ok && oplog != NULL && streams != NULL) {
        LOG_ERROR("the stored offsets of shards %s were written by oplog capture, those of shards "
                  "%s by change streams: set capture.mode to the mode wanted and remove the stored "
                  "offsets of the other shards (they then follow snapshot.mode), or restore "
                  "offsets written by one mode",
                  oplog, streams);
        mcdc_error_set(err, MCDC_ERR_CONFIG, 0,
                       "stored offsets of different capture modes across shards (see the error "
                       "above)");
        ok = false;
    }
    free(oplog);
    free(streams);
    return ok;
}

/* The per-shard tasks of a sharded cluster at start: config.shards through
 * the seed's pool, then one task per shard. */
bool topology_start_shard_tasks(struct topology *t, struct mcdc_error *err)
{
    struct shard_list shards;
    bool ok = true;

    if (!shards_read(t->seed.pool, &shards, err))
        return false;
    if (shards.count == 0) {
        mcdc_error_set(err, MCDC_ERR_CONFIG, 0,
                       "the sharded cluster has no shards in config.shards: nothing to capture");
        shard_list_clear(&shards);
        return false;
    }
    if (!capture_modes_agree(t, &shards, err) ||
        !merged_check_per_shard_start(t->cfg, &shards, err)) {
        shard_list_clear(&shards);
        return false;
    }
    {
        /* One chunk map for every shard's first snapshot (topology/chunks.h). */
        const char **names = xcalloc(shards.count, sizeof *names);
        bson_t *owned = xzalloc_aligned(_Alignof(bson_t), shards.count * sizeof *owned);
        for (size_t i = 0; i < shards.count; i++) {
            names[i] = shards.items[i].name;
            bson_init(&owned[i]);
        }
        ok = chunks_owned_filters(t->seed.pool, names, shards.count, owned, err);
        for (size_t i = 0; ok && i < shards.count; i++)
            ok = start_shard_task(t, &shards.items[i], -1, &owned[i], err);
        for (size_t i = 0; i < shards.count; i++)
            bson_destroy(&owned[i]);
        free(owned);
        free(names);
    }
    shard_list_clear(&shards);
    if (ok) {
        t->disc = discovery_start(t->cfg, t->seed.uri, t->loop, on_shards, t, err);
        ok = t->disc != NULL;
    }
    return ok;
}

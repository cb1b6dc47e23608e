/*
 * topology: design.md §2. Probes the deployment with `hello`, refuses what
 * cannot be captured (a standalone server has no oplog, hence no change
 * streams), and runs one capture task per replica set: the seed's own set,
 * or, when the seed is a mongos or the config server replica set, one task
 * per shard of config.shards (debezium-format.md §6.1). Tasks report their
 * end through an ev_async; when the last one has ended the loop is broken.
 */
#include "topology/topology.h"

#include <ev.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
#include "worker/worker.h"

/* What a shard's task asks for at each snapshot start: its owned chunks. */
struct owned_source {
    mongoc_client_pool_t *seed; /* the topology's seed pool (thread-safe pop/push); borrowed */
    char *shard;
    bson_t *first;    /* the map read at daemon start for every shard at once (a pointer:
                         bson_t's 128-byte alignment is more than xcalloc gives) */
    bool first_used;  /* later snapshots (a restart of the snapshot) read afresh */
};

/* One capture task: a replica set (or shard) with its own pool. */
struct task {
    char *name;            /* shard name, or NULL for a replica-set seed */
    mongoc_uri_t *uri;     /* owned */
    mongoc_client_pool_t *pool; /* owned; outlives the worker */
    struct worker *w;
    struct owned_source *owned; /* shards only; freed after the worker */
    struct primary_finder *finder; /* addresses used as given; the worker's pools; or NULL */
    bool removed; /* the shard left config.shards: its task was asked to drain */
};

struct topology {
    const struct mcdc_config *cfg;
    struct ev_loop *loop;
    struct signal_bus *bus;    /* handed to every task (worker_options) */
    struct notifier *notifier; /* handed to every task (worker_options) */
    ev_async notice;
    bool notice_started;
    struct task *tasks;
    size_t ntasks;
    bool stopping;
    /* Sharded cluster (per-shard tasks): the seed's pool (chunk maps, the
     * order gate); config.shards is polled by discovery (topology/discovery.h). */
    struct task seed;
    struct discovery *disc;
    struct gate_registry *gate; /* per-document order across shards */
    bool failed_start; /* a shard added while running could not get a task */
    bool drain_failed; /* a removed shard's task ended before its tail was read */
};

static void task_free(struct task *task);

/* Main thread: the task of a removed shard has ended: joined and freed, so
 * that the name may come back as a new shard (a new task). */
static void reap_removed(struct topology *t, size_t i)
{
    struct task *task = &t->tasks[i];

    if (worker_join(task->w, NULL) != MCDC_EXIT_OK) {
        t->drain_failed = true;
        LOG_ERROR("the capture task of removed shard %s ended in failure (see above); its "
                  "offsets stay in the store",
                  task->name);
    } else {
        LOG_INFO("the capture task of removed shard %s has %s; its offsets stay in the store",
                 task->name, worker_drained(task->w) ? "delivered its tail and ended" : "ended");
    }
    task_free(task);
    memmove(&t->tasks[i], &t->tasks[i + 1], (t->ntasks - i - 1) * sizeof *t->tasks);
    t->ntasks--;
}

/* Main thread: a task ended. Stop the others if it failed (a removed shard's
 * task only reports); break when all ended. */
static void on_notice(struct ev_loop *loop, ev_async *w, int revents)
{
    struct topology *t = w->data;
    size_t alive = 0;
    (void)revents;

    for (size_t i = 0; i < t->ntasks; i++) {
        if (t->tasks[i].removed && t->tasks[i].w != NULL && worker_finished(t->tasks[i].w) &&
            !t->stopping) {
            reap_removed(t, i--);
        } else if (!worker_finished(t->tasks[i].w)) {
            alive++;
        } else if (worker_failed(t->tasks[i].w) && !t->stopping) {
            if (t->tasks[i].name != NULL)
                LOG_ERROR("capture task of shard %s failed; stopping the other tasks",
                          t->tasks[i].name);
            else
                LOG_ERROR("capture task %s failed; stopping the other tasks",
                          worker_name(t->tasks[i].w));
            topology_request_stop(t);
        }
    }
    if (alive == 0 && (t->stopping || t->ntasks > 0))
        ev_break(loop, EVBREAK_ALL);
}

/* Task thread: wake the main loop (ev_async_send is thread-safe). */
static void task_ended(struct worker *w, void *ctx)
{
    struct topology *t = ctx;
    (void)w;
    ev_async_send(t->loop, &t->notice);
}


/* primary_open_fn (task thread; reads only the immutable config). */
static bool open_direct_pool(void *ctx, const char *uri_text, mongoc_client_pool_t **pool,
                             struct mcdc_error *err)
{
    const struct topology *t = ctx;
    struct task tmp = {0};
    int64_t selection_ms;
    bool ok = seed_open_pool(t->cfg, uri_text, &tmp.uri, &tmp.pool, &selection_ms, err);

    *pool = ok ? tmp.pool : NULL;
    if (!ok && tmp.pool != NULL)
        mongoc_client_pool_destroy(tmp.pool);
    mongoc_uri_destroy(tmp.uri);
    return ok;
}

/* mongodb.members.auto.discover false with several addresses: a finder for
 * task over them (topology/primary.h); fills prim for worker_start(). */
static const struct worker_primary *use_finder(struct topology *t, struct task *task,
                                               const char *hosts, const char *rs,
                                               const char *shard_params,
                                               struct worker_primary *prim)
{
    task->finder = primary_finder_new(t->cfg->connection_string, hosts, rs, shard_params,
                                      open_direct_pool, t);
    primary_finder_hooks(task->finder, prim);
    return prim;
}

static void task_free(struct task *task)
{
    worker_destroy(task->w);
    primary_finder_destroy(task->finder);
    if (task->owned != NULL) {
        bson_destroy(task->owned->first);
        free(task->owned->shard);
        free(task->owned);
    }
    if (task->pool != NULL)
        mongoc_client_pool_destroy(task->pool);
    mongoc_uri_destroy(task->uri);
    free(task->name);
    memset(task, 0, sizeof *task);
}

/* Appends a zeroed task to t and returns it. */
static struct task *task_add(struct topology *t)
{
    t->tasks = xrealloc(t->tasks, (t->ntasks + 1) * sizeof *t->tasks);
    memset(&t->tasks[t->ntasks], 0, sizeof *t->tasks);
    return &t->tasks[t->ntasks++];
}

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
    task = task_add(t);
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
            gate.shard_key = gate_shard_key;
            g = &gate;
        } else {
            LOG_WARN("shard %s: too many shards for the order gate; its events are not ordered "
                     "against other shards'", s->name);
        }
        struct worker_primary prim;
        const struct worker_primary *p =
            primary_as_given(t->cfg, s->hosts)
                ? use_finder(t, task, s->hosts, s->rs, t->cfg->shard_params, &prim)
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
            .on_exit = task_ended,
            .ctx = t,
        };
        task->w = worker_start(&opt, err);
    }
    return task->w != NULL;
}

/* Shards the order gate can follow (tasks of shards added while running count too). */
#define GATE_MAX_SHARDS 1024

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

/* Appends ", name" (or "name") to a malloc'd list text. */
static void list_add(char **list, const char *name)
{
    size_t n = *list ? strlen(*list) : 0, m = strlen(name);
    *list = xrealloc(*list, n + m + 3);
    if (n > 0) {
        memcpy(*list + n, ", ", 2);
        n += 2;
    }
    memcpy(*list + n, name, m + 1);
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
            list_add(pos.oplog ? &oplog : &streams, shards->items[i].name);
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
static bool start_shard_tasks(struct topology *t, struct mcdc_error *err)
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
        bson_t *owned = xcalloc(shards.count, sizeof *owned);
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

/*
 * mongodb.connection.mode sharded (debezium-format.md §6.2/§6.3): one task on
 * the mongos pool streams the whole cluster; mongos merges the shards'
 * events by cluster time, hides migrations and orphans, and follows shards
 * coming and going itself, so there is no discovery, gate or chunk filter.
 * Offsets: merged.h. When the merged partition is empty, the start comes
 * from per-shard offsets if every shard has one (§4.4).
 */
static bool start_merged_task(struct topology *t, struct task *task, int64_t selection_ms,
                              struct mcdc_error *err)
{
    struct worker_merged m = {.name = MERGED_NAME, .rs_partition = merged_rs_partition(t->cfg)};
    struct mcdc_position start;
    bool has_start = false;

    position_init(&start);
    if (!merged_start_position(t->cfg, task->pool, &start, &has_start, err)) {
        mcdc_error_prefix(err, "cannot read the stored offsets");
        position_clear(&start);
        return false;
    }
    m.start = has_start ? &start : NULL;
    struct worker_options opt = {
        .cfg = t->cfg,
        .pool = task->pool,
        .selection_timeout_ms = selection_ms,
        .start_at = -1,
        .bus = t->bus,
        .notifier = t->notifier,
        .on_exit = task_ended,
        .ctx = t,
    };
    task->w = worker_start_merged(&opt, &m, err);
    position_clear(&start);
    return task->w != NULL;
}

/*
 * probe() for a seed whose addresses are used as given: the member names its
 * hello lists may not resolve here, so each address is asked directly, the
 * first that answers classifies the deployment.
 */
static bool probe_as_given(struct topology *t, const char *hosts, enum seed_kind *kind,
                           char **rs, struct mcdc_error *err)
{
    const char *p = hosts;

    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        char *addr = xstrndup(p, n);
        struct shard_info s = {.name = NULL, .rs = "", .hosts = addr};
        char *text = shard_connection_string(t->cfg->connection_string, &s, NULL, false, err);
        mongoc_client_pool_t *pool = NULL;
        bool ok = text != NULL && open_direct_pool(t, text, &pool, err) &&
                  seed_probe(pool, kind, rs, err);

        if (pool != NULL)
            mongoc_client_pool_destroy(pool);
        free(text);
        free(addr);
        if (ok)
            return true;
        p += n;
        if (*p == ',')
            p++;
    }
    return false;
}

struct topology *topology_start(const struct mcdc_config *cfg, struct ev_loop *loop,
                                struct signal_bus *bus, struct notifier *notifier,
                                struct mcdc_error *err)
{
    struct topology *t;
    struct mcdc_error perr = MCDC_ERROR_INIT;
    struct task seed = {0};
    char *rs = NULL;
    enum seed_kind kind = SEED_REPLICA_SET;
    char redacted[512];
    int64_t selection_ms;
    bool answered;
    char *as_given = NULL; /* the seed's addresses, used as given (topology/primary.h) */

    /* libmongoc is initialised by main, whose log handler (which redacts
     * secrets) receives the driver's logs. */
    config_redact_uri(cfg->connection_string, redacted, sizeof redacted);

    t = xcalloc(1, sizeof *t);
    t->cfg = cfg;
    t->loop = loop;
    t->bus = bus;
    t->notifier = notifier;
    if (!seed_open_pool(cfg, cfg->connection_string, &seed.uri, &seed.pool, &selection_ms, err))
        goto fail;

    as_given = primary_uri_hosts(cfg->connection_string);
    if (as_given != NULL && !primary_as_given(cfg, as_given)) {
        free(as_given);
        as_given = NULL;
    }
    answered = as_given != NULL ? probe_as_given(t, as_given, &kind, &rs, &perr)
                                : seed_probe(seed.pool, &kind, &rs, &perr);
    if (!answered) {
        /* Unreachable now: the task retries with backoff and discovers the set itself. */
        char *why = config_redact_text(perr.msg, cfg->connection_string);
        LOG_WARN("cannot reach %s yet: %s; the capture task retries with backoff", redacted, why);
        free(why);
    } else if (kind == SEED_STANDALONE) {
        mcdc_error_set(err, MCDC_ERR_CONFIG, 0,
                       "mongodb.connection.string points at a standalone server: a standalone has "
                       "no oplog, so it has no change streams to capture. Run it as a replica set "
                       "(mongod --replSet rs0, then rs.initiate(); one member is enough) and "
                       "connect with ?replicaSet=rs0");
        goto fail;
    } else if (kind == SEED_CONFIG_SERVER &&
               cfg->connection_mode == MCDC_CONNECTION_SHARDED) {
        mcdc_error_set(err, MCDC_ERR_CONFIG, 0,
                       "mongodb.connection.mode sharded streams through mongos, but "
                       "mongodb.connection.string names the config server replica set: give a "
                       "mongos connection string, or use replica_set (one task per shard)");
        goto fail;
    } else if (kind == SEED_MONGOS && cfg->connection_mode == MCDC_CONNECTION_SHARDED) {
        LOG_INFO("mongos found at %s: one change stream through mongos for the whole cluster "
                 "(mongodb.connection.mode sharded)",
                 redacted);
    } else if (kind == SEED_REPLICA_SET) {
        LOG_INFO("replica set %s found at %s", rs, redacted);
    } else {
        LOG_INFO("%s found at %s: one capture task per shard of config.shards",
                 kind == SEED_MONGOS ? "mongos" : "config server replica set", redacted);
    }

    ev_async_init(&t->notice, on_notice);
    t->notice.data = t;
    ev_async_start(loop, &t->notice);
    t->notice_started = true;
    if (cfg->connection_mode == MCDC_CONNECTION_SHARDED && (!answered || kind == SEED_MONGOS)) {
        /* Merged mode; an unreachable seed is taken for the mongos it must be. */
        free(rs);
        rs = NULL;
        *task_add(t) = seed;
        memset(&seed, 0, sizeof seed);
        if (!start_merged_task(t, &t->tasks[0], selection_ms, err)) {
            topology_request_stop(t);
            (void)topology_join(t);
            goto fail;
        }
        return t;
    }
    if (answered && (kind == SEED_MONGOS || kind == SEED_CONFIG_SERVER)) {
        /* The seed's pool serves the first read of config.shards, the chunk
         * maps and the order gate (discovery has a pool of its own). Reopened
         * with a bounded socket timeout: a mongos or config server that
         * accepts connections but never answers would otherwise hold up a
         * task's chunk read and the pool's endSessions at exit for the
         * driver's default of 300 s. */
        bool ok;
        if (!seed_reopen_bounded(&seed.uri, &seed.pool, SEED_SOCKET_TIMEOUT_MS, err))
            goto fail;
        t->seed = seed;
        memset(&seed, 0, sizeof seed);
        t->gate = gate_registry_new(t->seed.pool, GATE_MAX_SHARDS);
        ok = start_shard_tasks(t, err);
        free(rs);
        rs = NULL;
        if (!ok) {
            topology_request_stop(t);
            (void)topology_join(t);
            goto fail;
        }
        return t;
    }
    *task_add(t) = seed;
    memset(&seed, 0, sizeof seed);
    {
        struct worker_primary prim;
        const struct worker_primary *p =
            as_given != NULL
                ? use_finder(t, &t->tasks[0], as_given,
                             rs != NULL ? rs : mongoc_uri_get_replica_set(t->tasks[0].uri), NULL,
                             &prim)
                : NULL;
        struct worker_options opt = {
            .cfg = cfg,
            .pool = t->tasks[0].pool,
            .expected_rs = rs,
            .selection_timeout_ms = selection_ms,
            .start_at = -1,
            .primary = p,
            .bus = t->bus,
            .notifier = t->notifier,
            .on_exit = task_ended,
            .ctx = t,
        };
        t->tasks[0].w = worker_start(&opt, err);
    }
    free(as_given);
    as_given = NULL;
    free(rs);
    rs = NULL;
    if (t->tasks[0].w == NULL)
        goto fail;
    return t;
fail:
    free(rs);
    free(as_given);
    task_free(&seed);
    topology_destroy(t);
    return NULL;
}

void topology_request_stop(struct topology *t)
{
    if (t == NULL)
        return;
    t->stopping = true;
    discovery_request_stop(t->disc);
    if (t->notice_started) /* no task left to report: on_notice still breaks the loop */
        ev_async_send(t->loop, &t->notice);
    for (size_t i = 0; i < t->ntasks; i++) {
        if (t->tasks[i].w != NULL)
            worker_request_stop(t->tasks[i].w);
    }
}

int topology_join(struct topology *t)
{
    int code = t->failed_start || t->drain_failed ? MCDC_EXIT_FAILURE : MCDC_EXIT_OK;

    discovery_destroy(t->disc); /* bounded wait for an in-flight read (discovery.h) */
    t->disc = NULL;
    for (size_t i = 0; i < t->ntasks; i++) {
        if (t->tasks[i].w != NULL && worker_join(t->tasks[i].w, NULL) != MCDC_EXIT_OK)
            code = MCDC_EXIT_FAILURE;
    }
    return code;
}

void topology_destroy(struct topology *t)
{
    if (t == NULL)
        return;
    discovery_destroy(t->disc);
    for (size_t i = 0; i < t->ntasks; i++)
        task_free(&t->tasks[i]);
    free(t->tasks);
    gate_registry_destroy(t->gate); /* after every task that used it */
    task_free(&t->seed);
    if (t->notice_started && ev_is_active(&t->notice))
        ev_async_stop(t->loop, &t->notice);
    free(t);
}

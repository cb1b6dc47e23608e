/*
 * topology: design.md §2. Probes the deployment with `hello`, refuses what
 * cannot be captured (a standalone server has no oplog, hence no change
 * streams), and runs one capture task per replica set: the seed's own set,
 * or, when the seed is a mongos or the config server replica set, one task
 * per shard of config.shards (debezium-format.md §6.1; those tasks are in
 * topology_shards.c). Tasks report their end through an ev_async; when the
 * last one has ended the loop is broken.
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
#include "topology/topology_internal.h"
#include "worker/worker.h"

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
void topology_task_ended(struct worker *w, void *ctx)
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
const struct worker_primary *topology_use_finder(struct topology *t, struct task *task,
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
struct task *topology_task_add(struct topology *t)
{
    t->tasks = xrealloc(t->tasks, (t->ntasks + 1) * sizeof *t->tasks);
    memset(&t->tasks[t->ntasks], 0, sizeof *t->tasks);
    return &t->tasks[t->ntasks++];
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
        .on_exit = topology_task_ended,
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

/*
 * topology_start() step 1: which deployment the seed is. Its addresses, used
 * as given or not (*as_given, malloc'd, or NULL), are asked with `hello`;
 * *answered is false when none answered (not an error: the task retries),
 * else *kind and *rs (malloc'd or NULL) say what answered. Returns false
 * with err for a deployment that cannot be captured this way.
 */
static bool probe_seed(struct topology *t, mongoc_client_pool_t *pool, const char *redacted,
                       char **as_given, bool *answered, enum seed_kind *kind, char **rs,
                       struct mcdc_error *err)
{
    const struct mcdc_config *cfg = t->cfg;
    struct mcdc_error perr = MCDC_ERROR_INIT;

    *as_given = primary_uri_hosts(cfg->connection_string);
    if (*as_given != NULL && !primary_as_given(cfg, *as_given)) {
        free(*as_given);
        *as_given = NULL;
    }
    *answered = *as_given != NULL ? probe_as_given(t, *as_given, kind, rs, &perr)
                                  : seed_probe(pool, kind, rs, &perr);
    if (!*answered) {
        /* Unreachable now: the task retries with backoff and discovers the set itself. */
        char *why = config_redact_text(perr.msg, cfg->connection_string);
        LOG_WARN("cannot reach %s yet: %s; the capture task retries with backoff", redacted, why);
        free(why);
    } else if (*kind == SEED_STANDALONE) {
        mcdc_error_set(err, MCDC_ERR_CONFIG, 0,
                       "mongodb.connection.string points at a standalone server: a standalone has "
                       "no oplog, so it has no change streams to capture. Run it as a replica set "
                       "(mongod --replSet rs0, then rs.initiate(); one member is enough) and "
                       "connect with ?replicaSet=rs0");
        return false;
    } else if (*kind == SEED_CONFIG_SERVER && cfg->connection_mode == MCDC_CONNECTION_SHARDED) {
        mcdc_error_set(err, MCDC_ERR_CONFIG, 0,
                       "mongodb.connection.mode sharded streams through mongos, but "
                       "mongodb.connection.string names the config server replica set: give a "
                       "mongos connection string, or use replica_set (one task per shard)");
        return false;
    } else if (*kind == SEED_MONGOS && cfg->connection_mode == MCDC_CONNECTION_SHARDED) {
        LOG_INFO("mongos found at %s: one change stream through mongos for the whole cluster "
                 "(mongodb.connection.mode sharded)",
                 redacted);
    } else if (*kind == SEED_REPLICA_SET) {
        LOG_INFO("replica set %s found at %s", *rs, redacted);
    } else {
        LOG_INFO("%s found at %s: one capture task per shard of config.shards",
                 *kind == SEED_MONGOS ? "mongos" : "config server replica set", redacted);
    }
    return true;
}

/* topology_start(), merged mode: the seed becomes the one task (taken from
 * *seed, which is zeroed). On failure the task is stopped and joined. */
static bool start_merged(struct topology *t, struct task *seed, int64_t selection_ms,
                         struct mcdc_error *err)
{
    *topology_task_add(t) = *seed;
    memset(seed, 0, sizeof *seed);
    if (!start_merged_task(t, &t->tasks[0], selection_ms, err)) {
        topology_request_stop(t);
        (void)topology_join(t);
        return false;
    }
    return true;
}

/* topology_start(), per-shard tasks: the seed (taken from *seed, which is
 * zeroed, once reopened) serves config.shards, the chunk maps and the gate.
 * On failure to start the tasks, those started are stopped and joined. */
static bool start_per_shard(struct topology *t, struct task *seed, struct mcdc_error *err)
{
    /* The seed's pool serves the first read of config.shards, the chunk
     * maps and the order gate (discovery has a pool of its own). Reopened
     * with a bounded socket timeout: a mongos or config server that
     * accepts connections but never answers would otherwise hold up a
     * task's chunk read and the pool's endSessions at exit for the
     * driver's default of 300 s. */
    if (!seed_reopen_bounded(&seed->uri, &seed->pool, SEED_SOCKET_TIMEOUT_MS, err))
        return false;
    t->seed = *seed;
    memset(seed, 0, sizeof *seed);
    t->gate = gate_registry_new(t->seed.pool, GATE_MAX_SHARDS);
    if (!topology_start_shard_tasks(t, err)) {
        topology_request_stop(t);
        (void)topology_join(t);
        return false;
    }
    return true;
}

/* topology_start(), a replica set: the seed becomes the one task (taken from
 * *seed, which is zeroed), expecting set rs (or NULL), with a primary finder
 * over as_given when not NULL. */
static bool start_replica_set(struct topology *t, struct task *seed, const char *as_given,
                              const char *rs, int64_t selection_ms, struct mcdc_error *err)
{
    *topology_task_add(t) = *seed;
    memset(seed, 0, sizeof *seed);
    struct worker_primary prim;
    const struct worker_primary *p =
        as_given != NULL
            ? topology_use_finder(t, &t->tasks[0], as_given,
                                  rs != NULL ? rs : mongoc_uri_get_replica_set(t->tasks[0].uri),
                                  NULL, &prim)
            : NULL;
    struct worker_options opt = {
        .cfg = t->cfg,
        .pool = t->tasks[0].pool,
        .expected_rs = rs,
        .selection_timeout_ms = selection_ms,
        .start_at = -1,
        .primary = p,
        .bus = t->bus,
        .notifier = t->notifier,
        .on_exit = topology_task_ended,
        .ctx = t,
    };
    t->tasks[0].w = worker_start(&opt, err);
    return t->tasks[0].w != NULL;
}

struct topology *topology_start(const struct mcdc_config *cfg, struct ev_loop *loop,
                                struct signal_bus *bus, struct notifier *notifier,
                                struct mcdc_error *err)
{
    struct topology *t;
    struct task seed = {0};
    char *rs = NULL;
    enum seed_kind kind = SEED_REPLICA_SET;
    char redacted[512];
    int64_t selection_ms;
    bool answered = false;
    bool ok;
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
    if (!probe_seed(t, seed.pool, redacted, &as_given, &answered, &kind, &rs, err))
        goto fail;

    ev_async_init(&t->notice, on_notice);
    t->notice.data = t;
    ev_async_start(loop, &t->notice);
    t->notice_started = true;
    if (cfg->connection_mode == MCDC_CONNECTION_SHARDED && (!answered || kind == SEED_MONGOS)) {
        /* Merged mode; an unreachable seed is taken for the mongos it must be. */
        ok = start_merged(t, &seed, selection_ms, err);
    } else if (answered && (kind == SEED_MONGOS || kind == SEED_CONFIG_SERVER)) {
        ok = start_per_shard(t, &seed, err);
    } else {
        ok = start_replica_set(t, &seed, as_given, rs, selection_ms, err);
    }
    if (!ok)
        goto fail;
    free(as_given);
    free(rs);
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

/*
 * topology/gate: per-document order across shards (design.md §2).
 *
 * A chunk migration moves documents from a donor shard to a recipient at the
 * migration's commit time Tm (config.chunks `history`: {validAfter, shard},
 * newest first; mongo-sim-spec.md §6.3). Each shard has its own task, so the
 * recipient's task could publish a moved document's new events before the
 * donor's task (lagging, reconnecting) has published the older ones, and a
 * consumer of the key's Kafka partition would see them out of order. The gate
 * holds a recipient's event at cluster time T for a document whose chunk
 * became the recipient's at Tm <= T until the donor's task has had every
 * event before Tm acknowledged by Kafka (its committed position reaches Tm).
 * The config server trims that history (on a migration commit it drops the
 * entries older than the history window, minSnapshotHistoryWindowInSeconds,
 * default 300 s, keeping at least the donor's; a merge leaves one entry, the
 * merge time; a chunk never moved has one entry, its creation): when the
 * owner's entry at T is the oldest left, or no entry covers T, whoever owned
 * the document before is unknown and the event waits until every other
 * task has acknowledged up to the entry's validAfter (for no entry: T less
 * one increment), as a donor would be waited for. Other tasks are long past
 * such times in steady state, so the cost is one atomic read per task and
 * no wait. A task that has published nothing yet (no stored position, and
 * its shard not reached in this run) counts as passed: whatever it later
 * reads starts at a snapshot or stream position taken when it reaches its
 * shard, which is at or past every migration that shard took part in
 * before, so it will never produce the earlier events a wait would be for;
 * it starts counting at its first publish (gate_task_publish with 0 once
 * its shard answers). A task that resumes from a stored position publishes
 * that position before it connects. Events from before a chunk's
 * arrival on this shard pass at once. The gate costs one chunk lookup per
 * event of a sharded collection (a binary search of its chunks by min:
 * gate_internal.h).
 *
 * Each task publishes its acknowledged watermark (the cluster time of its
 * committed position) in a registry shared by all tasks; a task that has
 * ended (a removed shard, after delivering everything) counts as fully
 * acknowledged. Chunk maps are cached per task and re-read through the seed
 * pool when an event's document is not in a chunk the map gives this shard
 * at the event's time (the map is older than a migration); a re-read keeps
 * the history entries this task saw before and the server has trimmed since
 * (gate_history_extend). Collections with
 * a hashed shard key are gated alike, their documents looked up by the
 * hash64 of the hashed field (snapshot/hashkey.h), as the chunk bounds are.
 *
 * Thread: gate_registry_* on the main thread (before the tasks start and
 * after they end); gate_task_* on its task's thread; watermarks are atomics.
 */
#ifndef MCDC_TOPOLOGY_GATE_H
#define MCDC_TOPOLOGY_GATE_H

#include <stdbool.h>
#include <stdint.h>

#include <mongoc/mongoc.h>

#include "common/error.h"

struct gate_registry;
struct gate_task;

/* A registry for up to max_tasks shard tasks, reading chunk maps through
 * seed (borrowed, thread-safe pool; must outlive the registry). */
struct gate_registry *gate_registry_new(mongoc_client_pool_t *seed, size_t max_tasks);
void gate_registry_destroy(struct gate_registry *reg);

/* Registers shard `name` (copied). Returns NULL when the registry is full
 * (that shard's events then pass ungated, with a WARN). The task starts
 * loading: other tasks wait for it until gate_task_loaded, since until then
 * nobody knows whether it resumes from a stored position older than their
 * events' needs (its offsets may take seconds to load: a Kafka offsets
 * topic, init_transactions with exactly-once). */
struct gate_task *gate_registry_add(struct gate_registry *reg, const char *name);

/* The task has loaded its stored offsets and published the position it
 * resumes from, if any: from now on the rules above apply (with nothing
 * published it counts as passed until its shard answers). */
void gate_task_loaded(struct gate_task *t);

/* Marks a shard's task as ended: every event it had is acknowledged or will
 * never be produced by it. */
void gate_task_ended(struct gate_task *t);

/* Publishes the task's acknowledged watermark: ts is a BSON timestamp value
 * (seconds << 32 | increment) of its committed position, or the stored one it
 * starts from; never moves back. ts 0 only marks the task as started (its
 * shard answered; from now on other tasks wait for its watermark). */
void gate_task_publish(struct gate_task *t, uint64_t ts);

/*
 * For an event of task t on namespace db.coll (NUL-terminated), document key
 * key (the change event's documentKey), at cluster time ts: returns the
 * cluster time the donor must have acknowledged before the event may be
 * produced, or 0 for none; *donor gets the donor's task, or t itself (a task
 * is never its own donor) when the donor is unknown and every other task
 * must have acknowledged that time (see above); NULL when 0. A
 * failed chunk read is not an error here: the event passes and *err says why
 * (the caller logs it); returns 0 then.
 */
uint64_t gate_task_check(struct gate_task *t, const char *db, const char *coll, const bson_t *key,
                         uint64_t ts, struct gate_task **donor, struct mcdc_error *err);

/* For task t's event: true when donor's watermark is at or past need, or
 * donor has ended; donor == t: when that holds for every other registered
 * task. Never blocks (atomic reads). */
bool gate_task_passed(const struct gate_task *t, const struct gate_task *donor, uint64_t need);

/*
 * The shard key pattern of db.coll (config.collections `key`, field names in
 * order, each with value 1 whatever its kind) appended to out, read afresh
 * through the seed pool (task thread); nothing for an unsharded or dropped
 * collection. Returns false with err (retriable for network errors) when the
 * read fails. Used for event.key.mode document_key in snapshots.
 */
bool gate_task_shard_key(struct gate_task *t, const char *db, const char *coll, bson_t *out,
                         struct mcdc_error *err);

/* The shard name of a task (borrowed). */
const char *gate_task_name(const struct gate_task *t);

/* One config.chunks history entry (shard borrowed here). */
struct gate_entry {
    uint64_t valid_after; /* BSON timestamp value */
    const char *shard;
};

enum gate_wait {
    GATE_NONE,        /* nothing to wait for */
    GATE_DONOR,       /* the named donor must reach *need */
    GATE_EVERY_OTHER, /* the donor is unknown: every other task must reach *need */
    GATE_NOT_OWNER,   /* the history does not give self the chunk at ts (stale map) */
};

/*
 * The decision for an event of shard self at ts (BSON timestamp value) in a
 * chunk of history hist[0..n) (newest first): *need (0 unless GATE_DONOR or
 * GATE_EVERY_OTHER; at most ts - 1) and, for GATE_DONOR, *donor (borrowed
 * from hist). No history at all (n == 0) is GATE_NONE. Pure; exposed for
 * tests.
 */
enum gate_wait gate_decide(const struct gate_entry *hist, size_t n, const char *self, uint64_t ts,
                           uint64_t *need, const char **donor);

/*
 * Appends to *hist (newest first, *n entries, heap array of owned shard
 * strings, reallocated) the entries of seen[0..nseen) older than *hist's
 * oldest one, when that oldest entry is in seen (so nothing between is
 * missing); shard strings copied. Returns how many were appended. Keeps
 * what an earlier read of config.chunks showed after the server trimmed it.
 */
size_t gate_history_extend(struct gate_entry **hist, size_t *n, const struct gate_entry *seen,
                           size_t nseen);

/* BSON-order comparison of two values (-1, 0, 1), the order of chunk bounds
 * (MinKey < null < numbers < strings < objects < arrays < binData < ObjectId <
 * bool < date < timestamp < regex < MaxKey). Exposed for tests. */
int gate_compare_values(const bson_iter_t *a, const bson_iter_t *b);

#endif

/*
 * snapshot internals shared by snapshot.c (start, parts, the task thread's
 * side of the queue) and snapshot_reader.c (the reader threads). Not a
 * public contract.
 */
#ifndef MCDC_SNAPSHOT_SNAPSHOT_INTERNAL_H
#define MCDC_SNAPSHOT_SNAPSHOT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capture/resume.h"
#include "common/error.h"
#include "snapshot/snapshot.h"

/* The hand-over queue's bound: readers wait while it holds more. */
#define QUEUE_MAX_DOCS 4096
#define QUEUE_MAX_BYTES (16u * 1024u * 1024u)
/* A reader hands documents over in batches of up to this many documents or
 * bytes (one lock and one wake-up per batch instead of per document). */
#define BATCH_MAX_DOCS 256
#define BATCH_MAX_BYTES (1024u * 1024u)

/* One reader's unit of work: a collection, or one `_id` range of it. */
struct snapshot_part {
    struct snapshot_coll *coll; /* borrowed from the plan */
    /* the collection's filter, ANDed with the range when split; a heap bson_t
     * (bson_new) because parts is grown with realloc and a grown bson_t
     * points into itself */
    bson_t *filter;
    size_t index;               /* 1-based range number, for logs */
    size_t entry;               /* its progress entry (resumable plans) */
};

struct snapshot {
    const struct mcdc_config *cfg;
    mongoc_client_pool_t *pool;
    struct snapshot_plan *plan;
    const char *rs;
    const atomic_bool *stop;

    pthread_mutex_t lock;
    pthread_cond_t not_empty, not_full;
    struct snapshot_doc *head, *tail;
    /* documents (and their BSON bytes) queued or taken by the task thread
     * and not yet reported consumed: the bound readers wait on */
    size_t queued, queued_bytes;
    /* task thread only: the batch taken from the queue, and what it consumed
     * of it since its last report under the lock */
    struct snapshot_doc *taken;
    size_t consumed, consumed_bytes;
    /* set while the task thread waits on an empty queue: readers then hand
     * over what they hold at once instead of filling a batch (a slow server
     * would otherwise keep documents in a reader for several round trips) */
    atomic_bool starving;
    struct snapshot_part *parts;
    size_t nparts;
    size_t next_part; /* next part to hand to a reader */
    size_t readers_alive;
    bool quit; /* snapshot_destroy: readers leave */
    bool failed;
    struct resume_failure fail;
    struct mcdc_error err;
    int64_t total_done;
    /* resumable plans: what the task thread has emitted (task thread only) */
    struct snapshot_progress *progress;

    pthread_t *threads;
    size_t nthreads;
    int64_t started_ms, last_progress_ms;
};

/* A reader's batch not handed over yet: a chain of documents of one part. */
struct snapshot_batch {
    struct snapshot_doc *head, *tail;
    size_t n, bytes; /* items, and the BSON bytes of the documents among them */
    size_t markers;  /* end markers among the n (not documents) */
};

/*
 * Appends d (owned from now on: queued, or freed by snapshot_batch_free) to
 * the reader's batch b of collection c and hands b over to the queue
 * (snapshot_batch_push) when it holds BATCH_MAX_DOCS items or
 * BATCH_MAX_BYTES bytes, or at once when the task thread waits on an empty
 * queue (s->starving). Returns false when the snapshot is ending (b is kept
 * for the caller to free). Reader threads.
 */
bool snapshot_batch_offer(struct snapshot *s, struct snapshot_batch *b, struct snapshot_coll *c,
                          struct snapshot_doc *d);

/* Queues all of b (in order; counted as done for c), waiting while the queue
 * would go over QUEUE_MAX_DOCS or QUEUE_MAX_BYTES (an empty queue takes any
 * batch); one lock and one wake-up of the task thread. b is empty after.
 * Returns false when the snapshot is ending; b then stays with the caller. */
bool snapshot_batch_push(struct snapshot *s, struct snapshot_batch *b, struct snapshot_coll *c);

/* Frees what b still holds. */
void snapshot_batch_free(struct snapshot_batch *b);

struct reader_arg {
    struct snapshot *snap;
    size_t index;
};

/* A reader thread's body (pthread start routine): takes parts from s until
 * none is left, the snapshot fails or is stopped, copying each into the
 * queue; frees arg (a malloc'd struct reader_arg). Returns NULL. */
void *snapshot_reader_main(void *arg);

#endif

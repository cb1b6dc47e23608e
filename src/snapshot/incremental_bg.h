/*
 * snapshot/incremental_bg: the reader thread of one capture task's
 * incremental snapshot (incremental.h, "Reading in the background"). The
 * task's thread hands it one chunk read at a time (incr_job_begin) and takes
 * the finished job back (incr_job_attach) without ever waiting for the
 * server meanwhile, so streaming goes on while a chunk is read.
 *
 * Handoff: one slot under a mutex and a condition variable. The task's
 * thread polls incr_reader_take(r, false) (an atomic flag: no lock while
 * nothing is done) at every stream step; a getMore returns at the latest
 * after maxAwaitTimeMS, and with markers the close marker the reader writes
 * wakes the stream anyway.
 *
 * Each read pops a client from the task's pool (the same URI and settings
 * as the task's own client) and pushes it back after it.
 *
 * Thread: incr_reader_* on the task's thread; the reader thread runs the
 * jobs.
 */
#ifndef MCDC_SNAPSHOT_INCREMENTAL_BG_H
#define MCDC_SNAPSHOT_INCREMENTAL_BG_H

#include <stdatomic.h>
#include <stdbool.h>

#include <mongoc/mongoc.h>

#include "snapshot/incremental.h"

struct incr_reader;

/* What the reader runs for a job (incr_job_run; tests give their own). */
typedef void (*incr_reader_run_fn)(struct incr_job *j, mongoc_client_t *client,
                                   const atomic_bool *cancel);

/*
 * Starts a reader thread named after task (log lines). run NULL: incr_job_run.
 * Returns NULL with err when the thread cannot be created.
 */
struct incr_reader *incr_reader_new(const char *task, incr_reader_run_fn run,
                                    struct mcdc_error *err);

/*
 * Hands job j (taken) to the reader, which reads with a client popped from
 * pool (NULL: the run function gets a NULL client). Returns false (j not
 * taken) when a job is already in the reader (submitted and not taken back).
 */
bool incr_reader_submit(struct incr_reader *r, struct incr_job *j, mongoc_client_pool_t *pool);

/* Whether a job is in the reader (submitted, not taken back yet). */
bool incr_reader_busy(const struct incr_reader *r);

/*
 * The finished job (the caller owns it: incr_job_attach), or NULL when none
 * is finished. wait: blocks until the job in the reader is finished (NULL at
 * once when there is none).
 */
struct incr_job *incr_reader_take(struct incr_reader *r, bool wait);

/*
 * Stops the reader: a read in flight is cancelled (it ends after the round
 * trip under way: the cancel is tested between documents) and its job
 * discarded; the thread is joined. NULL is a no-op.
 */
void incr_reader_destroy(struct incr_reader *r);

#endif

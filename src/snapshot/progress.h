/*
 * snapshot/progress: the initial snapshot's progress as one offset member, so
 * that an interrupted snapshot resumes after the last document committed
 * (snapshot.resumable; docs/OPERATIONS.md "Resumable initial snapshot").
 *
 * With snapshot.resumable every collection or `_id` range is read in `_id`
 * order (sort {_id: 1}), and the position of every `r` record but the last
 * (the "during" position, initsync true) carries
 *
 *   "mongocdc_snapshot": "<progress JSON as a string>"
 *
 * The progress JSON (compact, canonical extended JSON for keys, written by
 * the project's own writer as the incremental snapshot's offsets are):
 *
 *   {"v":1,"done":["db.a","db.b"],"ranges":[
 *     {"ns":"db.c","hi":{"_id": {"$oid": "..."}},"done":true},
 *     {"ns":"db.c","lo":{"_id": {"$oid": "..."}},"after":{"_id": {"$oid": "..."}}}]}
 *
 * - done: collections copied completely;
 * - ranges: the `_id` ranges (lo, hi] started and not yet folded into done
 *   (lo / hi left out = open: from the lowest key / to the highest key; a
 *   collection read whole is the range with neither), each either
 *   "done":true or "after": the last `_id` handed over from it, the copy
 *   going on strictly after it;
 * - ranges not started are implicit: for a collection with ranges listed,
 *   every key outside them (the gaps) is still to copy; a collection named
 *   nowhere is planned from scratch.
 * Bounds cover keys across type brackets: the gaps and the rest of a range
 * are read with keyrange_span_filter (snapshot/keyrange.h).
 *
 * Why a string member: the offsets store re-renders extra members through
 * libbson; a nested object would come back in another JSON dialect (an
 * int64 key as a bare number, parsed back as int32), a string keeps the
 * bytes. Why "after" (the last `_id` handed over) and not a count: a count
 * depends on the sampled split points and on concurrent inserts, a key does
 * not.
 *
 * Two sides:
 * - the stored progress (struct snapshot_resume): parsed at start from the
 *   member (snapshot_resume_parse), checked against the new plan and turned
 *   into each collection's pieces (snapshot_resume_pieces), which snapshot.c
 *   reads;
 * - the tracker (struct snapshot_progress): the task thread's view of what
 *   it has emitted, one entry per range, which writes the member text of
 *   each record. Per record: one key written into a reused buffer, the
 *   entries in progress (at most one per reader) and the cached head copied.
 *
 * Thread: any for the stored side (pure); the tracker is the task thread's.
 */
#ifndef MCDC_SNAPSHOT_PROGRESS_H
#define MCDC_SNAPSHOT_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>

#include <bson/bson.h>

#include "common/error.h"

/* The offset member's name, and the version its "v" says (a stored member of
 * another version is not resumed). */
#define SNAPSHOT_PROGRESS_KEY "mongocdc_snapshot"
#define SNAPSHOT_PROGRESS_VERSION 1

enum progress_state {
    PROGRESS_NOT_STARTED = 0,
    PROGRESS_PARTIAL, /* documents up to and including `after` handed over */
    PROGRESS_DONE,
};

/* One stored range of a collection; values of type BSON_TYPE_EOD are absent
 * (an open bound; no after). Owned by its struct snapshot_resume. */
struct progress_range {
    char *ns; /* "db.coll" */
    bson_value_t lo, hi, after;
    enum progress_state state;
};

/* The stored progress of an interrupted initial snapshot. */
struct snapshot_resume {
    char **done; /* finished collections ("db.coll") */
    size_t ndone;
    struct progress_range *ranges;
    size_t nranges;
};

/* A piece of one collection to resume, in key order: a stored range or a
 * gap between them (NOT_STARTED). Values borrowed from the snapshot_resume;
 * NULL = open bound / none. */
struct progress_piece {
    const bson_value_t *lo, *hi, *after;
    enum progress_state state;
};

/*
 * Splits extra_json (a position's extra members as a JSON object text,
 * borrowed, may be NULL) into the progress member's string value (*member, a
 * new string, NULL when the member is absent) and the other members (*rest,
 * a new JSON object text, NULL when none is left). Returns false with err
 * (domain IO) when extra_json is not a JSON object or the member is not a
 * string; *member and *rest are then NULL.
 */
bool snapshot_progress_extract(const char *extra_json, char **member, char **rest,
                               struct mcdc_error *err);

/*
 * Parses the member's value (text, borrowed) into *out (free with
 * snapshot_resume_free). Returns false with err (domain IO) on anything that
 * is not the format above: bad JSON, an unknown version, a range without
 * "ns", a bound that is not {"_id": key}, a range neither done nor with an
 * after key.
 */
bool snapshot_resume_parse(const char *text, struct snapshot_resume **out,
                           struct mcdc_error *err);

void snapshot_resume_free(struct snapshot_resume *r);

/* True when ns is in r's list of finished collections. */
bool snapshot_resume_done(const struct snapshot_resume *r, const char *ns);

/* True when ns is named anywhere in r (finished, or with a range). */
bool snapshot_resume_names(const struct snapshot_resume *r, const char *ns);

/*
 * The pieces of collection ns in `_id` order (keyrange_compare): its stored
 * ranges and, between and around them, the gaps not started, together
 * covering every key once. *out is a new array of *n pieces (free()), NULL
 * and 0 when r lists no range of ns. Returns false with err (domain IO)
 * when ranges overlap, a range is empty (hi not above lo) or its after key
 * is outside it.
 */
bool snapshot_resume_pieces(const struct snapshot_resume *r, const char *ns,
                            struct progress_piece **out, size_t *n, struct mcdc_error *err);

/* ---- the tracker (task thread) ---- */

struct snapshot_progress;

/*
 * A tracker with nothing planned. base (borrowed, may be NULL) is the JSON
 * object text of the other extra members the records' position carries;
 * the progress member is written after them.
 */
struct snapshot_progress *progress_new(const char *base);

void progress_free(struct snapshot_progress *p);

/* Records ns (copied) as copied completely by an earlier attempt. */
void progress_add_done_coll(struct snapshot_progress *p, const char *ns);

/*
 * Adds a range (lo, hi] of ns (values copied; NULL = open) in state st,
 * after = its last key handed over (PARTIAL only, else NULL). The entries
 * of one collection must be added together. Returns the entry's number.
 */
size_t progress_add(struct snapshot_progress *p, const char *ns, const bson_value_t *lo,
                    const bson_value_t *hi, enum progress_state st, const bson_value_t *after);

/* Entries added so far; progress_truncate(p, n) drops those from n on (a
 * split that could not be built; none of them advanced yet). */
size_t progress_count(const struct snapshot_progress *p);
void progress_truncate(struct snapshot_progress *p, size_t n);

/* Entry e has handed over the document with `_id` key (borrowed). A key
 * whose JSON would not parse back to itself (a string, also inside a
 * document `_id`, that is not valid UTF-8: written with U+FFFD) leaves the
 * entry unchanged, so a resume emits that row again instead of passing over
 * keys between the two spellings. */
void progress_advance(struct snapshot_progress *p, size_t e, const bson_value_t *key);

/* Entry e has handed over its last document. When every entry of its
 * collection is done, the collection moves to the done list. */
void progress_finish(struct snapshot_progress *p, size_t e);

/*
 * The extra members text of the current state (base's members, then the
 * progress member), valid until the next call on p; *shared (may be NULL)
 * gets the length of its leading part that changes only when a range
 * finishes (struct mcdc_position's extra_shared hint).
 */
const char *progress_text(struct snapshot_progress *p, size_t *shared);

#endif

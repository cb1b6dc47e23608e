/*
 * offsets: where each capture task stands (design.md §7, debezium-format.md
 * §4). Two parts:
 *   - inflight: an ordered tracker of produced records; the committed position
 *     advances only over a prefix of acknowledged records (at-least-once).
 *   - store: durable per-replica-set offset values, `file` (temp file, fsync,
 *     rename, fsync of the folder) or `kafka` (compacted topic, Kafka Connect
 *     offsets format).
 *
 * Thread: worker (each task owns its tracker and store handle).
 */
#ifndef MCDC_OFFSETS_OFFSETS_H
#define MCDC_OFFSETS_OFFSETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

#include "common/error.h"
#include "config/config.h"

/*
 * A stream position: the Debezium offset value fields (§4.2). Owned values:
 * resume_token is a copy (bson_t) the position owns.
 */
struct mcdc_position {
    int64_t sec; /* clusterTime seconds, -1 when known only from a resume token */
    int64_t ord; /* clusterTime increment, -1 when unknown */
    bson_t resume_token; /* the full resume-token document; empty if none */
    bool has_resume_token;
    bool initsync;          /* an initial snapshot is in progress */
    bool oplog;             /* written by legacy oplog capture mode */
    int64_t h;              /* oplog h (1.9), 0 when none */
    int64_t tord;           /* oplog transaction order, 0 when none */
    char *lsid;             /* STRICT JSON of lsid, NULL when none */
    int64_t txn_number;     /* valid when lsid != NULL */
    char *extra_json;       /* other keys (transaction, incremental snapshot) as a JSON object text, or NULL */
};

void position_init(struct mcdc_position *pos);
void position_clear(struct mcdc_position *pos);
void position_copy(struct mcdc_position *dst, const struct mcdc_position *src);

/* JSON value of the Kafka Connect offset (§4.2), malloc'd; caller frees. */
char *position_to_json(const struct mcdc_position *pos);
/* Parses an offset value; accepts the Base64 token and the old hex-only form. */
bool position_from_json(const char *json, struct mcdc_position *pos, struct mcdc_error *err);

/* ---- in-flight tracker ---- */
struct inflight;

struct inflight *inflight_new(void);
void inflight_destroy(struct inflight *inf);

/*
 * Registers the next produced record with the position reached once it (and
 * every earlier record) is delivered. Takes a copy of pos. Returns the cookie
 * to pass as the sink's opaque.
 */
void *inflight_add(struct inflight *inf, const struct mcdc_position *pos);

/* Marks the record with this cookie acknowledged. */
void inflight_ack(struct inflight *inf, void *cookie);

/*
 * Advances the committable position with no record in flight (a post-batch
 * resume token while idle): committed once every earlier record is acked.
 */
void inflight_advance(struct inflight *inf, const struct mcdc_position *pos);

/*
 * Newest position whose predecessors are all acknowledged, or NULL if none
 * since the last call. Borrowed; valid until the next inflight_* call.
 */
const struct mcdc_position *inflight_committable(struct inflight *inf);

size_t inflight_pending(const struct inflight *inf);

/* ---- store ---- */
struct offset_store;

/* Opens the store configured by cfg (file or kafka). */
struct offset_store *offset_store_open(const struct mcdc_config *cfg, struct mcdc_error *err);
void offset_store_close(struct offset_store *store);

/* Loads the stored position of replica set rs. *found false when none. */
bool offset_store_load(struct offset_store *store, const char *rs, struct mcdc_position *pos,
                       bool *found, struct mcdc_error *err);

/* Durably stores pos for rs (atomic replace). */
bool offset_store_save(struct offset_store *store, const char *rs, const struct mcdc_position *pos,
                       struct mcdc_error *err);

#endif

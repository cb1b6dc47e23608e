/*
 * event/position: where a change sits in its stream, the unit every capture
 * source yields with its event and the offsets store keeps (the fields of
 * the Debezium offset value, debezium-format.md §4.2). This header holds the
 * value type, its lifecycle and its cluster time; the offset value's JSON
 * form and the stores are offsets' (offsets/offsets.h).
 *
 * Thread: any (no shared state).
 */
#ifndef MCDC_EVENT_POSITION_H
#define MCDC_EVENT_POSITION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

/*
 * A stream position: the Debezium offset value fields (§4.2). Owned values:
 * resume_token is a copy (bson_t) the position owns.
 */
struct mcdc_position {
    int64_t sec;         /* clusterTime seconds, -1 when known only from a resume token */
    int64_t ord;         /* clusterTime increment, -1 when unknown */
    bson_t resume_token; /* the full resume-token document; empty if none */
    bool has_resume_token;
    bool initsync;      /* an initial snapshot is in progress */
    bool oplog;         /* written by legacy oplog capture mode */
    int64_t h;          /* oplog h (1.9), valid if has_h */
    bool has_h;         /* h known; written as null otherwise (1.9 on MongoDB 4.4+) */
    int64_t tord;       /* oplog transaction order, 0 when none */
    int64_t t;          /* oplog entry's term, valid if has_t: in memory only (not in offsets):
                           a rollback check compares it with the entry at sec/ord */
    bool has_t;
    char stxnid[96];    /* 1.9 oplog session id "<uuid>:<txnNumber>" (oplog_stxnid), "" when none */
    char *lsid;         /* STRICT JSON of lsid, NULL when none */
    int64_t txn_number; /* valid when lsid != NULL */
    char *extra_json;   /* other keys (transaction, incremental snapshot) as a JSON object text, or
                           NULL */
    size_t extra_shared; /* a hint: the first extra_shared bytes of extra_json tend to repeat
                            from one position to the next (the queued-collections member of an
                            incremental snapshot), so the in-flight tracker keeps them once;
                            0: no hint. Never changes what is stored. */
    int writer;         /* enum offset_writer of the value it was parsed from (0 = mongocdc) */
};

/* Sets pos to "no position": sec = ord = -1, empty token, no strings. */
void position_init(struct mcdc_position *pos);
/* Frees what pos owns and re-initialises it. */
void position_clear(struct mcdc_position *pos);
/* Deep copy of src into dst (both initialised; dst's old contents are freed). */
void position_copy(struct mcdc_position *dst, const struct mcdc_position *src);
/* Moves src into dst (both initialised; dst's old contents are freed); src is
 * left as position_init leaves it. No allocation but the token's bytes. */
void position_move(struct mcdc_position *dst, struct mcdc_position *src);

/*
 * The cluster time a resume token encodes, as a BSON timestamp value
 * (seconds << 32 | increment), into *ts: its `_data` hex starts with the
 * KeyString type byte 0x82 and the 8-byte big-endian Timestamp (MongoDB's
 * ResumeTokenData encoding, mongo-sim-spec.md §3.11). token may be NULL.
 * Returns false, *ts untouched, when the token has no string `_data` in that
 * layout (e.g. the BinData tokens of MongoDB <= 4.0.6). The token itself
 * stays opaque: this time is for comparisons and messages only.
 */
bool position_token_time(const bson_t *token, uint64_t *ts);

/*
 * The cluster time of pos as a BSON timestamp value (seconds << 32 |
 * increment): sec/ord when sec > 0 (an unknown ord counts as 0), else the
 * time inside its resume token (position_token_time); 0 when neither is
 * known. The one conversion every module uses to order positions (the
 * stores' never-backwards rule, the shard gate, the drain point, the merged
 * stream's start).
 */
uint64_t position_time(const struct mcdc_position *pos);

#endif

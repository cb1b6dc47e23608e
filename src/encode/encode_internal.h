/*
 * encode internals shared by the encoder's files (style.md §4.2: a module's
 * private header). Nothing outside src/encode and its unit test includes it.
 *
 *   encode.c    lifecycle, encoder_encode: filters -> fields -> envelope -> records
 *   envelope.c  the per-dialect table and the value/key payload writers
 *   schema.c    Kafka Connect JsonConverter schemas, from the same table
 *   topics.c    topic names, sanitisation, schema-name adjustment, topic cache
 *   filters.c   namespace include/exclude (PCRE2) and the server-side $match
 *   fields.c    field.exclude.list / field.renames on documents and update descriptions
 *   txn.c       transaction BEGIN/END state and the per-event transaction block
 */
#ifndef MCDC_ENCODE_ENCODE_INTERNAL_H
#define MCDC_ENCODE_ENCODE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

#include "encode/ejson.h"
#include "encode/encode.h"

/* ---- envelope table (envelope.c) ------------------------------------------ */

/* Top-level fields of the value envelope (debezium-format.md §1.2). */
enum vfield {
    VF_BEFORE = 0,
    VF_AFTER,
    VF_PATCH,
    VF_FILTER,
    VF_UPDATE_DESCRIPTION,
    VF_SOURCE,
    VF_OP,
    VF_TS_MS,
    VF_TRANSACTION,
    VF_COUNT
};

/* Fields of the source block (debezium-format.md §1.5). */
enum sfield {
    SF_VERSION = 0,
    SF_CONNECTOR,
    SF_NAME,
    SF_TS_MS,
    SF_SNAPSHOT,
    SF_DB,
    SF_SEQUENCE,
    SF_TS_US,
    SF_TS_NS,
    SF_RS,
    SF_COLLECTION,
    SF_ORD,
    SF_H,
    SF_TORD,
    SF_STXNID,
    SF_LSID,
    SF_TXN_NUMBER,
    SF_WALL_TIME,
    SF_COUNT
};

/* How source.ts_ms is derived (debezium-format.md §1.5, "ts_ms rules"). */
enum ts_rule {
    TS_RULE_1_9 = 0, /* clusterTime s*1000 everywhere (snapshot: position's ts) */
    TS_RULE_3_4,     /* wallTime if present, else clusterTime s*1000; snapshot: now */
    TS_RULE_COUNT
};

/* One dialect: every difference between 1.9 and 3.x lives in this struct. */
struct dialect {
    const char *name;
    const char *default_version; /* source.version when the config sets none */
    enum vfield value_fields[VF_COUNT];
    size_t value_count;
    enum sfield source_fields[SF_COUNT];
    size_t source_count;
    enum ts_rule ts_rule;
    bool versioned_structs;       /* "version":1 on updatedescription, truncatedarray,
                                     event.block, transaction and heartbeat schemas */
    bool source_versioned;        /* "version":1 on the source struct (3.1+) */
    bool transaction_named;       /* transaction block struct named event.block */
    const char *snapshot_allowed; /* io.debezium.data.Enum "allowed" parameter */
    bool txn_value_ts_ms;         /* BEGIN/END carry ts_ms (2.0+) */
    bool txn_collection_with_rs;  /* data_collection is rs.db.coll (1.x-2.5) */
};

const struct dialect *dialect_get(enum mcdc_dialect d);

/* Field name text of a value/source field. */
const char *vfield_name(enum vfield f);
const char *sfield_name(enum sfield f);

/* ---- topics (topics.c) ---------------------------------------------------- */

struct field_rule;

/* Rules that apply to one collection, in application order; resolved once
 * per namespace and kept in its topic cache entry. */
struct field_sel {
    const struct field_rule **rules; /* owned array of borrowed rules; NULL when none */
    size_t count;
};

struct topic_entry {
    char *db;
    size_t db_len;
    char *coll;
    size_t coll_len;
    char *topic;          /* sanitised <prefix>.<db>.<coll> */
    bool captured;        /* filters_captures(), resolved once */
    struct field_sel sel; /* field rules of this collection, resolved once */
    uint64_t hash;
};

struct topic_cache {
    struct topic_entry **slots; /* open addressing, power-of-two capacity */
    size_t cap;
    size_t count;
    struct topic_entry **altered; /* captured entries whose topic the sanitiser changed */
    size_t n_altered, cap_altered;
};

void topics_cache_free(struct topic_cache *tc);

/* Appends the sanitised form of name (AbstractTopicNamingStrategy): chars
 * outside [A-Za-z0-9._-] become '_' (one per UTF-16 unit), at most 249 chars,
 * "." -> "_", ".." -> "__". */
void topics_sanitize(struct ejson_buf *out, const char *name, size_t n);

/* Appends name adjusted per mode (debezium-format.md §3.3). */
void topics_adjust_schema_name(struct ejson_buf *out, enum mcdc_schema_adjust mode,
                               const char *name, size_t n);

/* Returns the cache entry for db.coll, creating it (and its topic) on first
 * use. Entries live until encoder_destroy (records borrow their topic). */
struct topic_entry *topics_lookup(struct encoder *enc, const char *db, size_t db_len,
                                  const char *coll, size_t coll_len);

/* ---- schemas (schema.c) --------------------------------------------------- */

/* Appends the JsonConverter schema of a data key / value for topic te. */
void schema_write_data_key(struct encoder *enc, struct ejson_buf *out, const char *topic);
void schema_write_data_value(struct encoder *enc, struct ejson_buf *out, const char *topic);
void schema_write_txn_key(struct encoder *enc, struct ejson_buf *out);
void schema_write_txn_value(struct encoder *enc, struct ejson_buf *out);
void schema_write_heartbeat_key(struct encoder *enc, struct ejson_buf *out);
void schema_write_heartbeat_value(struct encoder *enc, struct ejson_buf *out);

/* ---- filters (filters.c) -------------------------------------------------- */

struct pattern_list {
    void **code; /* pcre2_code_8 * per entry (regex mode) */
    char **text; /* the entries (borrowed from the config) */
    size_t count;
};

struct filters {
    bool literal;
    struct pattern_list db_include, db_exclude, coll_include, coll_exclude;
    char *signal_db; /* split signal.data.collection, or NULL */
    char *signal_coll;
    void *match_data; /* pcre2_match_data_8 *, reused */
};

bool filters_init(struct filters *f, const struct mcdc_config *cfg, struct mcdc_error *err);
void filters_free(struct filters *f);
bool filters_captures(const struct filters *f, const char *db, size_t db_len, const char *coll,
                      size_t coll_len);

/* ---- field selection (fields.c) ------------------------------------------- */

struct field_rule {
    char *db_glob; /* lowercase glob on the database ("*" = any) */
    char *coll_glob;
    char **path; /* field path segments */
    size_t depth;
    char *rename_to; /* NULL for an exclusion */
};

struct field_rules {
    struct field_rule *rules; /* exclusions first, then renames, each in list order */
    size_t count;
    size_t exclude_count;
};

bool fields_init(struct field_rules *fr, const struct mcdc_config *cfg, struct mcdc_error *err);
void fields_free(struct field_rules *fr);
/* Fills sel with the rules matching db.coll (allocates sel->rules; free it
 * with fields_sel_free). */
void fields_select(const struct field_rules *fr, const char *db, size_t db_len, const char *coll,
                   size_t coll_len, struct field_sel *sel);
void fields_sel_free(struct field_sel *sel);

/* Applies sel to doc (exclusions, then renames, each in list order, each on
 * the previous result). Returns doc itself when sel is empty, else one of
 * pair[0]/pair[1] (initialised bson_t the encoder reuses). Returns NULL when a
 * rename would overwrite an existing field and sets *clash to its new name. */
const bson_t *fields_apply_document(const struct field_sel *sel, const bson_t *doc, bson_t pair[2],
                                    const char **clash);
/* The same for the dotted keys of updateDescription.updatedFields (§7.2). */
const bson_t *fields_apply_updated(const struct field_sel *sel, const bson_t *updated,
                                   bson_t pair[2], const char **clash);

/* Field-name lists (removedFields, truncatedArrays[].field): returns false if
 * the name is hidden; otherwise appends the (possibly renamed) name to out as
 * raw UTF-8 (no quotes). */
bool fields_map_name(const struct field_sel *sel, const char *name, size_t n,
                     struct ejson_buf *out);

/* ---- transactions (txn.c) ------------------------------------------------- */

struct txn_coll {
    char *name; /* data_collection text */
    size_t len;
    int64_t count;
};

struct txn_state {
    bool open;
    struct ejson_buf id;   /* current transaction id */
    struct ejson_buf next; /* id of the event being encoded (scratch) */
    int64_t total;         /* events so far */
    struct txn_coll *colls;
    size_t ncolls, cap;
    uint32_t ts_sec, ts_inc; /* clusterTime of the transaction's events */
};

/* The per-event transaction block values, filled by txn_on_event. */
struct txn_block {
    bool present;
    const char *id;
    size_t id_len;
    int64_t total_order;
    int64_t data_collection_order;
};

void txn_free(struct txn_state *t);

/* Runs the lazy BEGIN/END logic of debezium-format.md §3.4 for a data event
 * about to be emitted; appends END and/or BEGIN records to out and fills blk. */
bool txn_on_event(struct encoder *enc, const struct mcdc_event *ev, int64_t source_ts_ms,
                  struct mcdc_records *out, struct txn_block *blk, struct mcdc_error *err);

/* Appends an END record for the open transaction, if any, and closes it. */
void txn_close(struct encoder *enc, int64_t ts_ms, struct mcdc_records *out);

/* ---- the encoder (encode.c) ----------------------------------------------- */

struct encoder {
    const struct mcdc_config *cfg;
    const struct dialect *d;
    const char *version;   /* source.version */
    struct ejson_buf out;  /* record being built */
    struct ejson_buf json; /* inner extended JSON before string escaping */
    struct ejson_buf name; /* scratch for names */
    struct filters filters;
    struct field_rules fields;
    const struct field_sel *sel; /* rules of the current event's collection */
    struct topic_cache topics;
    struct txn_state txn;
    char *txn_topic;
    char *heartbeat_topic;
    char *source_schema_name;    /* adjusted io.debezium.connector.mongo.Source */
    bool skip_op[MCDC_OP_COUNT]; /* skipped.operations */
    bson_t scratch[9];           /* field selection results, reused: 4 pairs + a patch */
    char run_id[40];             /* __debezium.context.runId (UUID text) */
    struct mcdc_header headers[MCDC_HEADERS_MAX]; /* extended.headers.enabled */
    size_t header_count;
};

void json_append_lit(struct ejson_buf *out, const char *s);
void json_append_int(struct ejson_buf *out, int64_t v);

/* Appends a record on topic whose key is a copy of key[0..key_len) and whose
 * value is a copy of value[0..value_len), or NULL (a tombstone) when value is
 * NULL. Asserts there is room (MCDC_RECORDS_MAX). */
void records_push(struct mcdc_records *recs, const char *topic, const char *key, size_t key_len,
                  const char *value, size_t value_len);
/* Copies the encoder's out buffer into a new malloc'd string. */
char *encoder_take_out(struct encoder *enc, size_t *len);

/* Writes the key JSON (with schema if enabled) for the event's _id into out. */
bool envelope_write_key(struct encoder *enc, const struct mcdc_event *ev,
                        const struct topic_entry *te, struct mcdc_error *err);
/* Writes the value JSON (with schema if enabled) into out. updated/removed
 * are the field-selected update description parts. */
struct envelope_parts {
    const bson_t *after;
    const bson_t *patch; /* oplog mode (1.9) */
    const bson_t *before;
    const bson_t *updated;
    const struct txn_block *txn;
    int64_t source_ts_ms;
    int64_t ts_ms_now;
    int64_t ts_us_now; /* the same wall-clock read in µs */
};
void envelope_write_value(struct encoder *enc, const struct mcdc_event *ev,
                          const struct topic_entry *te, const struct envelope_parts *p);

/* source.ts_ms of ev per the dialect's rule. */
int64_t envelope_source_ts_ms(const struct encoder *enc, const struct mcdc_event *ev,
                              int64_t ts_ms_now);

#endif

/*
 * offsets internals shared by the offsets module's files (not a public
 * contract): a growable text buffer with a compact JSON writer, Base64, the
 * BSON form of an offset value and the store back-ends' table.
 *
 * Thread: any (no shared state).
 */
#ifndef MCDC_OFFSETS_OFFSETS_INTERNAL_H
#define MCDC_OFFSETS_OFFSETS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

#include "common/error.h"
#include "offsets/offsets.h"

/* A growable, always NUL-terminated byte buffer. */
struct jbuf {
    char *data;
    size_t len, cap;
};

void jbuf_init(struct jbuf *b);
void jbuf_free(struct jbuf *b);
void jbuf_putn(struct jbuf *b, const char *s, size_t n);
void jbuf_puts(struct jbuf *b, const char *s);
void jbuf_putc(struct jbuf *b, char c);
void jbuf_i64(struct jbuf *b, int64_t v);
/* Writes s (n bytes of UTF-8) as a JSON string with quotes: `"` `\` and
 * control characters escaped, everything else verbatim (as Jackson does). */
void jbuf_str(struct jbuf *b, const char *s, size_t n);
/* Writes the value under iter as compact JSON (documents, arrays, strings,
 * numbers, booleans, null; other BSON types as relaxed extended JSON). */
void jbuf_bson_value(struct jbuf *b, const bson_iter_t *iter);
/* Writes the members of doc (without braces), each preceded by "," when
 * *first is false; updates *first. */
void jbuf_bson_members(struct jbuf *b, const bson_t *doc, bool *first);
/* Hands the text over to the caller (malloc'd) and resets b. */
char *jbuf_steal(struct jbuf *b);

/* Standard Base64 with padding (java.util.Base64.getEncoder()). Caller frees. */
char *base64_encode(const uint8_t *data, size_t len);
/* Decodes standard Base64 (padding optional); returns false on a bad
 * character or length. *out is malloc'd (caller frees) on success. */
bool base64_decode(const char *s, size_t n, uint8_t **out, size_t *out_len);

/* Parses an offset value already in BSON form (see position_from_json). */
bool position_from_bson(const bson_t *doc, struct mcdc_position *pos, struct mcdc_error *err);

/*
 * The Kafka Connect offsets-topic key of a replica set's partition:
 * ["<name>",{"rs":"<rs>","server_id":"<prefix>"}] with JsonConverter's exact
 * (compact) spacing. name and prefix are both topic.prefix. rs NULL gives
 * the single partition of Debezium 2.6+ ["<name>",{"server_id":"<prefix>"}]
 * (one stream for the whole deployment, §4.1). Caller frees.
 */
char *offsets_partition_key(const char *name, const char *server_id, const char *rs);

/* A store back-end (file or kafka). */
struct offset_store_ops {
    bool (*load)(struct offset_store *store, const char *key, char **value_json,
                 struct mcdc_error *err);
    bool (*save)(struct offset_store *store, const char *key, const char *value_json,
                 struct mcdc_error *err);
    void (*close)(struct offset_store *store);
    /* every entry with its newest value (offset_store_list) */
    bool (*list)(struct offset_store *store, struct offset_entries *out, struct mcdc_error *err);
};

/* Sets key to value (NULL: removes it) in list, last write wins. */
void offset_entries_set(struct offset_entries *list, const char *key, size_t klen,
                        const char *value, size_t vlen);

struct offset_store {
    const struct offset_store_ops *ops;
    const struct mcdc_config *cfg;
    void *impl;
    bool read_only; /* offset_store_open_read_only: loads only, no file lock */
    char **other_prefixes; /* topic.prefix names of other daemons' entries seen by load */
    size_t other_count;
};

/*
 * Called by a back-end's load for every key it reads (len bytes, not
 * NUL-terminated). A mongocdc/Debezium partition key
 * ["<name>",{..."server_id"...}] whose name is not this store's topic.prefix
 * is remembered (once per name) so that offset_store_load can WARN about it:
 * offsets written under another topic.prefix are never used by this one.
 * Other keys (other Kafka Connect connectors sharing the topic) are ignored.
 */
void offsets_note_key(struct offset_store *store, const char *key, size_t len);

bool store_file_open(struct offset_store *store, struct mcdc_error *err);
bool store_kafka_open(struct offset_store *store, struct mcdc_error *err);

#endif

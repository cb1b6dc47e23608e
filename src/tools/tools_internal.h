/*
 * tools/tools_internal.h: what the files of `mongocdc offsets` share (not a
 * public API): the entry list, the offsets stores named on the command line
 * (offsets_ep.c) and the position helpers (offsets_pos.c); the property and
 * connector JSON readers of `mongocdc config convert` (convert_props.c).
 *
 * Thread: main.
 */
#ifndef MCDC_TOOLS_TOOLS_INTERNAL_H
#define MCDC_TOOLS_TOOLS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <bson/bson.h>

#include "common/error.h"
#include "config/config.h"
#include "offsets/offsets.h"

enum ep_kind { EP_STORE, EP_DBZFILE };

/* Entries being shown or copied: key and value JSON text (value NULL: a
 * deletion to write). */
struct kv {
    char *key;
    char *value;
};

struct kvlist {
    struct kv *items;
    size_t count;
};

/* An offsets store named on the command line. */
struct endpoint {
    enum ep_kind kind;
    struct mcdc_config cfg; /* shallow copy of the loaded one, storage fields replaced */
    const char *path;       /* EP_DBZFILE */
    const char *spec;       /* as given, for messages */
};

/* Frees every entry and empties the list. */
void kvlist_free(struct kvlist *l);
/* Sets key (klen bytes) to value (vlen bytes; NULL: a deletion to write),
 * last write wins; both copied. */
void kvlist_set(struct kvlist *l, const char *key, size_t klen, const char *value, size_t vlen);

/* Parses EP (store, file:PATH, kafka:TOPIC, debezium-file:PATH) into *ep,
 * storage fields over a shallow copy of cfg (borrowed, as spec). False
 * (message printed) when spec is none of them. */
bool parse_endpoint(const struct mcdc_config *cfg, const char *spec, struct endpoint *ep);
/* "offsets file PATH", "offsets topic T" or "Debezium offsets file PATH" in buf. */
const char *ep_label(const struct endpoint *ep, char *buf, size_t n);
/* Every stored entry of ep (deleted ones left out), read without a lock; a
 * Debezium file's keys and values without the converter envelope. False
 * with err on I/O, Kafka, a corrupt store or a missing Debezium file. */
bool ep_list(const struct endpoint *ep, struct kvlist *out, struct mcdc_error *err);
/* Writes every entry of in (value NULL deletes) into ep at once: a file
 * store under the daemon's lock (refused while a daemon holds it), a Kafka
 * topic and a Debezium file after a note on stderr that no lock protects
 * them; a Debezium file keeps the key form it has. False with err. */
bool ep_write(const struct endpoint *ep, const struct kvlist *in, struct mcdc_error *err);

/* Prints sec (seconds since 1970) as an ISO-8601 UTC time, or "unknown". */
void print_time(FILE *out, int64_t sec);
/* The clusterTime a resume token's _data starts with (MongoDB's KeyString
 * of ResumeTokenData: 0x82, then the Timestamp); false when it has none. */
bool token_time(const struct mcdc_position *pos, int64_t *sec, int64_t *inc);
/* SEC[:INC] (1 .. 2^32-1) or YYYY-MM-DDTHH:MM:SS[Z] (UTC, increment 0). */
bool parse_timestamp(const char *s, int64_t *sec, int64_t *inc);
/* A resume token as the _data hex string, Base64 of its BSON or a
 * {"_data": ...} document, into out (initialised by this call). */
bool parse_token(const char *s, bson_t *out);

/* Refuses (false, unless force; the keys named on stderr) to write any
 * entry of in whose position is older (offset_position_time) than the one
 * ep already stores under the same key: only `offsets set` and `reset` move
 * a position backwards (docs/MIGRATING.md). Deletions are not compared. A
 * Debezium file that does not exist yet holds nothing. False also when ep
 * cannot be read (message printed). */
bool check_not_backwards(const struct endpoint *to, const struct kvlist *in, bool force);

/* Whether key is an entry of this configuration's source: a MongoDB
 * partition key (offsets_parse_key) whose server_id is topic.prefix or
 * whose connector name is `name` or topic.prefix. Other entries of a shared
 * offsets topic (other connectors) are not. */
bool key_of_source(const struct mcdc_config *cfg, const char *key);
/* Whether a task of this configuration adopts key on start: byte for byte
 * one of the keys it looks up (offsets_partition_forms of the task, under
 * `name` and topic.prefix, written by offsets_partition_key). A replica
 * set's name is the connection string's replicaSet when given; without it
 * the key's own rs is taken as the set's or a shard's name. */
bool key_adopted(const struct mcdc_config *cfg, const char *key);
/* Whether key is JSON of the form [string, object], a Kafka Connect
 * partition key [name, {partition}]. */
bool key_well_formed(const char *key);
/* The connection string's replicaSet option (malloc'd), or NULL. */
char *config_replica_set(const struct mcdc_config *cfg);
/* Removes (and frees) every entry of l that is not this source's
 * (key_of_source); returns how many. */
size_t kvlist_keep_source(const struct mcdc_config *cfg, struct kvlist *l);

/* A flat list of properties (key order kept). */
struct props {
    char **keys, **values;
    size_t count;
};

/* Sets k (kl bytes) to v (vl bytes), replacing an earlier value (the last
 * one wins, as java.util.Properties.load). */
void props_add(struct props *p, const char *k, size_t kl, const char *v, size_t vl);
/* The value of k, or NULL. Borrowed. */
const char *props_get(const struct props *p, const char *k);
void props_free(struct props *p);
/* The whole file at path, NUL-terminated (malloc'd; *len its length), or
 * NULL with errno set. */
char *slurp(const char *path, size_t *len);
/* java.util.Properties.load's format into out (see convert_props.c). */
void parse_properties(const char *text, size_t len, struct props *out);
/* A connector JSON ({"name": ..., "config": {...}} or the config object)
 * into out; *name gets a malloc'd copy of "name" when present. False with
 * err (IO) when it is neither form; values neither string, number nor
 * boolean are named on stderr and left out. */
bool parse_connector_json(const char *text, size_t len, struct props *out, char **name,
                          struct mcdc_error *err);

/* Whether k is a librdkafka property under the same name as the Java
 * producer's (convert_kafka.c). */
bool librdkafka_key(const char *k);
/* Java producer settings librdkafka spells otherwise, rewritten in p in
 * place: max.request.size becomes message.max.bytes; a PLAIN or SCRAM
 * sasl.jaas.config (PlainLoginModule, ScramLoginModule) its sasl.username
 * and sasl.password (a comment saying so written to f). What stays is
 * named by the caller. */
void java_producer_keys(FILE *f, struct props *p);

/* The YAML output of `mongocdc config convert` (convert_yaml.c): f the file
 * written; the counts of keys not carried, carried but unsupported, and
 * refused (the command then exits 1). */
struct out {
    FILE *f;
    int dropped, unsupported;
    int refused; /* input mongocdc cannot stand in for: exit 1 */
};

/* Names the input's setting that makes a conversion wrong rather than
 * incomplete (a converter other than JsonConverter: consumers would get
 * different bytes), on stderr and as a YAML comment; counted in o->refused. */
void out_refuse(struct out *o, const char *key, const char *value, const char *why);
/* Names key as not carried, and why, on stderr and as a YAML comment;
 * counted in o->dropped. */
void out_drop(struct out *o, const char *key, const char *why);
/* Writes key: value when mongocdc carries it (under the name an alias
 * stands for; unsupported options named on stderr); else out_drop(). */
void out_carry(struct out *o, const char *key, const char *value);
/* The current name of a Debezium 1.x deprecated name, or NULL. */
const char *legacy_current(const char *key);
/* Writes s to f as a double-quoted YAML string. */
void yaml_str(FILE *f, const char *s);

#endif

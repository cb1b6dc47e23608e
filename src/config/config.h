/*
 * config: mongocdc's configuration, loaded once from one YAML file and then
 * immutable (style.md §4.8). Top-level keys are Debezium's property names
 * (debezium-format.md §7.1) plus mongocdc's own sections `sink`, `offsets`,
 * `kafka`, `log` and `debezium.compatibility`.
 *
 * One option table (schema.c) drives parsing, defaults, type and range
 * checks, --config-help and docs/CONFIGURATION.md. Problems are reported
 * compiler-style, `FILE:LINE:COL: KEY: problem (expected ...)`, all of them,
 * and the caller exits 2.
 *
 * Thread: config_load/config_free on the main thread; the loaded struct is
 * read-only and shared by every thread.
 */
#ifndef MCDC_CONFIG_CONFIG_H
#define MCDC_CONFIG_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

/* A list of strings (YAML list or Debezium comma-separated string, trimmed). */
struct mcdc_strlist {
    char **items;
    size_t count;
};

/* A key/value pair from a pass-through map (e.g. `kafka:`). */
struct mcdc_kv {
    char *key;
    char *value;
    int line, col; /* location of the key, 1-based, for librdkafka errors */
};

struct mcdc_kvlist {
    struct mcdc_kv *items;
    size_t count;
};

enum mcdc_dialect {
    MCDC_DIALECT_1_9 = 0, /* debezium.compatibility: "1.9" (default) */
    MCDC_DIALECT_3_X,     /* debezium.compatibility: "3.x" */
    MCDC_DIALECT_COUNT
};

enum mcdc_capture_mode {
    MCDC_CAPTURE_CHANGE_STREAMS = 0,
    MCDC_CAPTURE_CHANGE_STREAMS_UPDATE_FULL, /* default */
    MCDC_CAPTURE_CHANGE_STREAMS_WITH_PRE_IMAGE,
    MCDC_CAPTURE_CHANGE_STREAMS_UPDATE_FULL_WITH_PRE_IMAGE,
    MCDC_CAPTURE_OPLOG,
    MCDC_CAPTURE_MODE_COUNT
};

enum mcdc_snapshot_mode {
    MCDC_SNAPSHOT_INITIAL = 0, /* default */
    MCDC_SNAPSHOT_WHEN_NEEDED,
    MCDC_SNAPSHOT_INITIAL_ONLY,
    MCDC_SNAPSHOT_NEVER,
    MCDC_SNAPSHOT_NO_DATA,
    MCDC_SNAPSHOT_ALWAYS,
    MCDC_SNAPSHOT_MODE_COUNT
};

/* event.processing.failure.handling.mode (Debezium's CommonConnectorConfig
 * EventProcessingFailureHandlingMode; "ignore" is its old name for skip). */
enum mcdc_oversize_mode {
    MCDC_OVERSIZE_FAIL = 0, /* default: the server's 10334 stops the task */
    MCDC_OVERSIZE_SKIP,     /* events with a document over the threshold are skipped */
    MCDC_OVERSIZE_SPLIT,    /* $changeStreamSplitLargeEvent, fragments reassembled */
    MCDC_OVERSIZE_MODE_COUNT
};

enum mcdc_failure_mode {
    MCDC_FAILURE_FAIL = 0, /* default: stop with the error */
    MCDC_FAILURE_WARN,     /* WARN, count, move past the event */
    MCDC_FAILURE_SKIP,     /* INFO, count, move past the event */
    MCDC_FAILURE_IGNORE,   /* as skip */
    MCDC_FAILURE_MODE_COUNT
};

enum mcdc_sink_type {
    MCDC_SINK_KAFKA = 0, /* default */
    MCDC_SINK_FILE,
    MCDC_SINK_STDOUT,
    MCDC_SINK_TYPE_COUNT
};

enum mcdc_offset_storage {
    MCDC_OFFSETS_FILE = 0, /* default */
    MCDC_OFFSETS_KAFKA,
    MCDC_OFFSET_STORAGE_COUNT
};

/* exactly.once.support (Kafka Connect's connector-level name, KIP-618). */
enum mcdc_exactly_once {
    MCDC_EXACTLY_ONCE_DISABLED = 0, /* default: at-least-once */
    MCDC_EXACTLY_ONCE_REQUESTED,    /* transactions when the broker allows, else at-least-once */
    MCDC_EXACTLY_ONCE_REQUIRED,     /* transactions or no start */
    MCDC_EXACTLY_ONCE_COUNT
};

/* transaction.boundary (Kafka Connect's names; "connector" is not offered). */
enum mcdc_txn_boundary {
    MCDC_TXN_BOUNDARY_POLL = 0, /* default: one transaction per batch (max.batch.size) */
    MCDC_TXN_BOUNDARY_INTERVAL, /* one per transaction.boundary.interval.ms */
    MCDC_TXN_BOUNDARY_COUNT
};

enum mcdc_schema_adjust {
    MCDC_SCHEMA_ADJUST_NONE = 0,
    MCDC_SCHEMA_ADJUST_AVRO,
    MCDC_SCHEMA_ADJUST_AVRO_UNICODE,
    MCDC_SCHEMA_ADJUST_COUNT
};

/* incremental.snapshot.watermarking.strategy (debezium-format.md §5.4). */
enum mcdc_watermarking {
    MCDC_WATERMARK_INSERT_INSERT = 0,
    MCDC_WATERMARK_INSERT_DELETE,
};

enum mcdc_filter_match {
    MCDC_FILTER_MATCH_REGEX = 0,
    MCDC_FILTER_MATCH_LITERAL,
    MCDC_FILTER_MATCH_COUNT
};

enum mcdc_full_update_type {
    MCDC_FULL_UPDATE_LOOKUP = 0,
    MCDC_FULL_UPDATE_POST_IMAGE,
    MCDC_FULL_UPDATE_TYPE_COUNT
};

enum mcdc_key_mode {
    MCDC_KEY_ID = 0,           /* event.key.mode id: the key's id is the _id value (default) */
    MCDC_KEY_DOCUMENT_KEY,     /* document_key: the whole documentKey document */
    MCDC_KEY_MODE_COUNT
};

enum mcdc_connection_mode {
    MCDC_CONNECTION_REPLICA_SET = 0, /* one task per replica set / shard (default) */
    MCDC_CONNECTION_SHARDED,         /* one merged stream through mongos */
    MCDC_CONNECTION_MODE_COUNT
};

/* A collection's snapshot filter override (`snapshot.collection.filter.overrides`). */
struct mcdc_filter_override {
    char *ns;    /* "db.coll" */
    char *query; /* extended JSON query text */
};

struct mcdc_config {
    char *path; /* the file it came from */

    /* Connection / identity */
    char *topic_prefix;        /* topic.prefix (required) */
    char *connector_name;      /* name: Kafka Connect connector name of the offsets key; NULL =
                                  topic.prefix (mcdc_config_connector_name) */
    char *connection_string;   /* mongodb.connection.string (required); secret */
    enum mcdc_connection_mode connection_mode; /* mongodb.connection.mode */
    char *shard_params; /* mongodb.connection.string.shard.params, NULL when unset */
    bool members_auto_discover;     /* mongodb.members.auto.discover, true */
    bool allow_offset_invalidation; /* internal.mongodb.allow.offset.invalidation, false */
    int64_t connect_timeout_ms;          /* mongodb.connect.timeout.ms, 10000 */
    int64_t server_selection_timeout_ms; /* mongodb.server.selection.timeout.ms, 30000 */
    int64_t socket_timeout_ms;           /* mongodb.socket.timeout.ms, 0 */
    int64_t heartbeat_frequency_ms;      /* mongodb.heartbeat.frequency.ms, 10000 */
    int64_t poll_interval_ms_topology;   /* mongodb.poll.interval.ms, 30000 */
    int64_t backoff_initial_ms;          /* connect.backoff.initial.delay.ms, 1000 */
    int64_t backoff_max_ms;              /* connect.backoff.max.delay.ms, 120000 */
    int64_t connect_max_attempts;        /* connect.max.attempts, 16 */

    /* Capture */
    enum mcdc_capture_mode capture_mode;         /* capture.mode */
    enum mcdc_failure_mode failure_mode;         /* event.processing.failure.handling.mode */
    enum mcdc_full_update_type full_update_type; /* capture.mode.full.update.type */
    int64_t capture_start_op_time;               /* capture.start.op.time, -1 = unset */
    int64_t cursor_max_await_time_ms;            /* cursor.max.await.time.ms, 0 = server default */
    int64_t cursor_batch_size;                   /* cursor.batch.size (mongocdc), 0 = server default */
    char *cursor_pipeline;                       /* cursor.pipeline JSON array text, or NULL */
    enum mcdc_oversize_mode oversize_mode;       /* cursor.oversize.handling.mode */
    int64_t oversize_skip_threshold;             /* cursor.oversize.skip.threshold, bytes */
    struct mcdc_strlist skipped_operations;      /* skipped.operations: subset of c,u,d,t */
    bool tombstones_on_delete;                   /* tombstones.on.delete, true */
    bool provide_transaction_metadata;           /* provide.transaction.metadata, false */
    bool transaction_eager_end;                  /* transaction.eager.end (mongocdc), false */
    bool extended_headers_enabled;               /* extended.headers.enabled; dialect default */
    bool oplog_update_raw_diff; /* oplog.update.raw.diff (mongocdc), false: $v: 2 diffs -> $v: 1 */

    /* Filters */
    struct mcdc_strlist database_include, database_exclude;     /* database.*.list */
    struct mcdc_strlist collection_include, collection_exclude; /* collection.*.list */
    enum mcdc_filter_match filters_match_mode;                  /* filters.match.mode */
    struct mcdc_strlist field_exclude;                          /* field.exclude.list */
    struct mcdc_strlist field_renames;                          /* field.renames */
    char *signal_data_collection;                               /* signal.data.collection */

    /* Snapshot */
    enum mcdc_snapshot_mode snapshot_mode;              /* snapshot.mode */
    int64_t snapshot_max_threads;                       /* snapshot.max.threads, 1 */
    int64_t snapshot_fetch_size;                        /* snapshot.fetch.size, 0 */
    int64_t snapshot_split_min_docs; /* snapshot.collection.split.min.documents, 100000 */
    bool snapshot_resumable;         /* snapshot.resumable (mongocdc), false */
    int64_t snapshot_delay_ms;                          /* snapshot.delay.ms, 0 */
    int64_t streaming_delay_ms;                         /* streaming.delay.ms, 0 */
    struct mcdc_strlist snapshot_include_collections;   /* snapshot.include.collection.list */
    struct mcdc_filter_override *snapshot_filter_overrides;
    size_t snapshot_filter_override_count;
    int64_t incremental_snapshot_chunk_size;            /* incremental.snapshot.chunk.size, 1024 */
    int incremental_snapshot_watermarking; /* enum mcdc_watermarking, insert_insert */
    int64_t incremental_snapshot_window_max_bytes; /* incremental.snapshot.window.max.bytes */
    bool read_only;                                /* read.only, false */

    /* Topics, schemas, runtime */
    enum mcdc_dialect dialect;                 /* debezium.compatibility */
    char *topic_delimiter;                     /* topic.delimiter, "." */
    char *topic_transaction;                   /* topic.transaction, "transaction" */
    char *topic_heartbeat_prefix;              /* topic.heartbeat.prefix, "__debezium-heartbeat" */
    enum mcdc_schema_adjust schema_name_adjust; /* schema.name.adjustment.mode; dialect default */
    bool key_schemas_enable;                   /* key.converter.schemas.enable, false */
    enum mcdc_key_mode key_mode;               /* event.key.mode, id */
    bool value_schemas_enable;                 /* value.converter.schemas.enable, false */
    int64_t heartbeat_interval_ms;             /* heartbeat.interval.ms, 0 = off */
    int64_t max_batch_size;                    /* max.batch.size, 2048 */
    int64_t poll_interval_ms;                  /* poll.interval.ms, 500 */
    char *debezium_version;                    /* source.version text, dialect default */

    /* mongocdc sections */
    enum mcdc_sink_type sink_type;             /* sink.type */
    char *sink_path;                           /* sink.path (file sink) */
    int64_t sink_queue_bytes;                  /* sink.queue.max.bytes, 16 MiB */
    char *dlq_topic; /* errors.deadletterqueue.topic.name; NULL/empty = stop on too large */
    enum mcdc_offset_storage offset_storage;   /* offsets.storage */
    char *offsets_file;                        /* offsets.file.path */
    char *offsets_topic;                       /* offsets.topic */
    int64_t offsets_flush_interval_ms;         /* offsets.flush.interval.ms, 60000 */
    int64_t offsets_flush_timeout_ms;          /* offsets.flush.timeout.ms, 5000 */
    int64_t offsets_stall_threshold_ms;        /* offsets.stall.threshold.ms, 600000; 0 = off */
    enum mcdc_exactly_once exactly_once;       /* exactly.once.support, disabled */
    enum mcdc_txn_boundary txn_boundary;       /* transaction.boundary, poll */
    int64_t txn_boundary_interval_ms; /* transaction.boundary.interval.ms; -1 = offsets.flush.interval.ms */
    char *transactional_id_prefix;    /* transactional.id.prefix, "" */
    struct mcdc_kvlist kafka;                  /* kafka: passed to librdkafka as-is */
    int log_level;                             /* log.level (enum mcdc_log_level) */
    int log_format;                            /* log.format (enum mcdc_log_format) */
    char *log_file;                            /* log.file, NULL = stderr */
    bool metrics_enabled;                      /* metrics.enabled, false */
    char *metrics_bind_address;                /* metrics.http.bind.address, 127.0.0.1 */
    int64_t metrics_port;                      /* metrics.http.port, 9464 */
    int64_t metrics_ready_window_ms;           /* metrics.ready.window.ms, 60000 */
    int64_t metrics_collections_max;           /* metrics.collections.max, 100 */
    int64_t oplog_headroom_interval_ms;        /* oplog.headroom.check.interval.ms, 60000 */
    int64_t oplog_headroom_warn_s;             /* oplog.headroom.warn.seconds, 3600 */

    /* Signals and notifications (signals/) */
    struct mcdc_strlist signal_channels;       /* signal.enabled.channels, source */
    int64_t signal_poll_interval_ms;           /* signal.poll.interval.ms, 5000 */
    char *signal_kafka_topic;                  /* signal.kafka.topic, NULL = <prefix>-signal */
    char *signal_kafka_bootstrap;              /* signal.kafka.bootstrap.servers, NULL = kafka's */
    char *signal_kafka_group;                  /* signal.kafka.groupId, kafka-signal */
    int64_t signal_kafka_poll_timeout_ms;      /* signal.kafka.poll.timeout.ms, 100 */
    struct mcdc_kvlist signal_consumer;        /* signal.consumer.*: librdkafka, prefix cut */
    char *signal_file;                         /* signal.file, file-signals.txt */
    struct mcdc_strlist notification_channels; /* notification.enabled.channels */
    char *notification_sink_topic;             /* notification.sink.topic.name */

    /* Debezium connection properties that config_load folds into
     * connection_string (values already in the URI win, as in Debezium's
     * DefaultMongoDbClientFactory, debezium-format.md §6.3). Kept for
     * reference only: readers use connection_string. */
    char *mongodb_hosts;                       /* mongodb.hosts, 1.x seed list */
    char *mongodb_user;                        /* mongodb.user */
    char *mongodb_password;                    /* mongodb.password; secret */
    char *mongodb_authsource;                  /* mongodb.authsource, "admin" */
    bool mongodb_ssl_enabled;                  /* mongodb.ssl.enabled */
    bool mongodb_ssl_invalid_hostname_allowed; /* mongodb.ssl.invalid.hostname.allowed */
    struct mcdc_strlist snapshot_filter_override_names; /* snapshot.collection.filter.overrides */

    /* Options set to a non-default value whose behaviour is not delivered
     * yet (see config_unsupported_set); static strings. */
    const char **unsupported;
    size_t unsupported_count;
    /* Options the file sets that have no effect with the rest of the
     * configuration, as "<file>:<line>:<col>: <key>: <why>" (owned; see
     * config_ignored_set). */
    char **ignored;
    size_t ignored_count;
};

/*
 * Loads and validates the YAML file at path. On success returns a new config
 * the caller frees with config_free(). On failure returns NULL, prints every
 * problem to `diag` (usually stderr) as `FILE:LINE:COL: KEY: problem
 * (expected ...)`, and fills err (domain CONFIG) with a summary. Secrets are
 * never printed.
 */
struct mcdc_config *config_load(const char *path, FILE *diag, struct mcdc_error *err);

/* Frees a config; NULL is a no-op. */
void config_free(struct mcdc_config *cfg);

/* Prints every option with type, default and meaning (--config-help). */
void config_print_help(FILE *out);

/* Writes docs/CONFIGURATION.md (Markdown) from the option table. */
void config_print_markdown(FILE *out);

/*
 * Writes a copy of uri with any password replaced by "****" into out (at most
 * cap bytes, NUL-terminated). For logs and errors.
 */
void config_redact_uri(const char *uri, char *out, size_t cap);

/*
 * Returns a copy of text (a log line, a driver message) with the secrets of
 * uri masked as "****": the password and secret option values of uri, both as
 * written and percent-decoded, where they stand alone in text (never inside a
 * longer word: a password "p" leaves "previously" as it is), and the password
 * of any "user:password@" user info in text (after "://", or after uri's user
 * name). The user info is taken
 * up to the last '@' before a host list, whatever it contains (MongoDB
 * Connection String spec, "Userinfo"), so a malformed one is hidden whole.
 * uri may be NULL (then only user infos after "://" are masked). The caller
 * frees the result; never NULL.
 */
char *config_redact_text(const char *text, const char *uri);

/*
 * Returns the options whose behaviour a later release delivers and that cfg
 * sets to a value other than their default (to warn "not supported yet" at
 * startup; setting one to its default changes nothing): fills names
 * (borrowed, static strings, in file order) up to cap and returns how many
 * there are, which may exceed cap.
 */
size_t config_unsupported_set(const struct mcdc_config *cfg, const char **names, size_t cap);

/*
 * The options cfg sets that have no effect with the rest of it (e.g.
 * transaction.boundary while exactly.once.support is disabled, which Kafka
 * Connect also ignores: KIP-618), each as "<file>:<line>:<col>: <key>: <why>",
 * to warn at startup and in --validate: fills texts (borrowed from cfg) up
 * to cap and returns how many there are, which may exceed cap.
 */
size_t config_ignored_set(const struct mcdc_config *cfg, const char **texts, size_t cap);

/*
 * The connector name of the offsets key ["<name>", partition]: the `name`
 * option (Kafka Connect's connector name, Debezium Server's engine name), or
 * topic.prefix when it is unset or empty (what mongocdc wrote before `name`
 * existed). Borrowed from cfg.
 */
static inline const char *mcdc_config_connector_name(const struct mcdc_config *cfg)
{
    return cfg->connector_name && cfg->connector_name[0] ? cfg->connector_name
                                                          : cfg->topic_prefix;
}

/*
 * The producer's transaction.timeout.ms as the kafka: map sets it, ms:
 * librdkafka's default 60000 when unset, -1 when the value is not a positive
 * number (the load reports that; librdkafka CONFIGURATION.md,
 * transaction.timeout.ms). The one reader of the key for every module.
 */
static inline int64_t mcdc_config_kafka_txn_timeout_ms(const struct mcdc_config *cfg)
{
    for (size_t i = 0; i < cfg->kafka.count; i++) {
        if (strcmp(cfg->kafka.items[i].key, "transaction.timeout.ms") == 0) {
            char *end = NULL;
            long long v = strtoll(cfg->kafka.items[i].value, &end, 10);
            return end != NULL && end != cfg->kafka.items[i].value && *end == '\0' && v > 0
                       ? (int64_t)v
                       : -1;
        }
    }
    return 60000;
}

/*
 * Whether key (a librdkafka property of the kafka: map) is one only a
 * producer reads (type P in librdkafka's CONFIGURATION.md, librdkafka 2.x):
 * the consumers built from the same map (the Kafka offsets store's reader,
 * `mongocdc check`'s signal consumer) leave it out, or librdkafka warns
 * CONFWARN "... is a producer property and will be ignored by this consumer".
 */
static inline bool mcdc_kafka_producer_only(const char *key)
{
    static const char *const keys[] = {"transactional.id",
                                       "transaction.timeout.ms",
                                       "enable.idempotence",
                                       "enable.gapless.guarantee",
                                       "queue.buffering.max.messages",
                                       "queue.buffering.max.kbytes",
                                       "queue.buffering.max.ms",
                                       "linger.ms",
                                       "message.send.max.retries",
                                       "retries",
                                       "queue.buffering.backpressure.threshold",
                                       "compression.codec",
                                       "compression.type",
                                       "compression.level",
                                       "batch.num.messages",
                                       "batch.size",
                                       "delivery.report.only.error",
                                       "sticky.partitioning.linger.ms",
                                       "request.required.acks",
                                       "acks",
                                       "request.timeout.ms",
                                       "message.timeout.ms",
                                       "delivery.timeout.ms",
                                       "partitioner",
                                       NULL};
    for (const char *const *k = keys; *k != NULL; k++)
        if (!strcmp(key, *k))
            return true;
    return false;
}

#endif

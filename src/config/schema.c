/*
 * config/schema: the option table. One row per key drives parsing (value.c),
 * defaults, type and range checks, --config-help and docs/CONFIGURATION.md
 * (help.c), in the manner of librdkafka's property table (rdkafka_conf.c).
 *
 * Keys are Debezium's property names exactly as spelled in debezium-format.md
 * §7.1 (defaults from there too), then mongocdc's own sections. Rows whose
 * field is OPT_NO_FIELD are Debezium properties that are checked (type, enum,
 * range) and accepted so a Debezium configuration loads, but whose behaviour
 * mongocdc does not deliver yet: they carry OPT_F_UNSUPPORTED and main warns
 * when one is set to anything but its default.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config/internal.h"

#define F(field) offsetof(struct mcdc_config, field)
#define NF OPT_NO_FIELD
#define I32 INT32_MAX

static const char *const capture_modes[] = {"change_streams",
                                            "change_streams_update_full",
                                            "change_streams_with_pre_image",
                                            "change_streams_update_full_with_pre_image",
                                            "oplog",
                                            NULL};
static const char *const full_update_types[] = {"lookup", "post_image", NULL};
static const char *const snapshot_modes[] = {
    "initial", "when_needed", "initial_only", "never", "no_data", "always", NULL};
static const char *const sink_types[] = {"kafka", "file", "stdout", NULL};
static const char *const offset_storages[] = {"file", "kafka", NULL};
static const char *const schema_adjusts[] = {"none", "avro", "avro_unicode", NULL};
static const char *const match_modes[] = {"regex", "literal", NULL};
static const char *const connection_modes[] = {"replica_set", "sharded", NULL};
static const char *const dialects[] = {"1.9", "3.x", NULL};
static const char *const key_modes[] = {"id", "document_key", NULL};
static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};
static const char *const log_formats[] = {"text", "json", NULL};
static const char *const capture_scopes[] = {"deployment", "database", "collection", NULL};
static const char *const json_modes[] = {"legacy", "strict", "extended", "relaxed", NULL};
static const char *const pipeline_orders[] = {"internal_first", "user_first", "user_only", NULL};
static const char *const oversize_modes[] = {"fail", "skip", "split", NULL};
static const char *const watermarkings[] = {"insert_insert", "insert_delete", NULL};
static const char *const failure_modes[] = {"fail", "warn", "skip", "ignore", NULL};
static const char *const struct_versions[] = {"v1", "v2", NULL};
static const char *const guardrail_actions[] = {"warn", "fail", NULL};
static const char *const exactly_once_modes[] = {"disabled", "requested", "required", NULL};
static const char *const txn_boundaries[] = {"poll", "interval", NULL};

#define G_CONN "Connection"
#define G_CAPT "Capture"
#define G_FILT "Filters"
#define G_SNAP "Snapshot"
#define G_TOPI "Topics, schemas and runtime"
#define G_SINK "Sink (mongocdc)"
#define G_OFFS "Offsets (mongocdc)"
#define G_KAFK "Kafka (mongocdc)"
#define G_LOG "Log (mongocdc)"
#define G_METR "Metrics and probes (mongocdc)"

/* Row shorthands: S string, N integer, B boolean, E enum, L list. */
#define S(k, d, off, fl, g, doc)                                                                   \
    {                                                                                              \
        k, OPT_STRING, d, NULL, 0, 0, NULL, off, fl, NULL, g, doc                                  \
    }
#define N(k, d, lo, hi, off, fl, g, doc)                                                           \
    {                                                                                              \
        k, OPT_INT, d, NULL, lo, hi, NULL, off, fl, NULL, g, doc                                   \
    }
#define B(k, d, off, fl, g, doc)                                                                   \
    {                                                                                              \
        k, OPT_BOOL, d, NULL, 0, 0, NULL, off, fl, NULL, g, doc                                    \
    }
#define E(k, d, names, off, fl, g, doc)                                                            \
    {                                                                                              \
        k, OPT_ENUM, d, NULL, 0, 0, names, off, fl, NULL, g, doc                                   \
    }
#define L(k, d, off, fl, g, doc)                                                                   \
    {                                                                                              \
        k, OPT_LIST, d, NULL, 0, 0, NULL, off, fl, NULL, g, doc                                    \
    }
#define U OPT_F_UNSUPPORTED

const struct opt mcdc_options[] = {
    /* Connection / identity (debezium-format.md §7.1) */
    S("topic.prefix", NULL, F(topic_prefix), OPT_F_REQUIRED, G_CONN,
      "Logical name of the source: topic prefix, source.name and server_id of the offsets"),
    S("name", NULL, F(connector_name), 0, G_CONN,
      "Connector name (Kafka Connect's `name`, Debezium Server's engine name): the first element "
      "of the offsets key [name, partition]; default topic.prefix. Set it to the Debezium "
      "connector's name to take over (or hand back) its offsets"),
    {"mongodb.name", OPT_STRING, NULL, NULL, 0, 0, NULL, F(topic_prefix), 0, "topic.prefix", G_CONN,
     "Debezium 1.x name of topic.prefix"},
    {"mongodb.connection.string", OPT_URI, NULL, NULL, 0, 0, NULL, F(connection_string),
     OPT_F_REQUIRED | OPT_F_SECRET, NULL, G_CONN,
     "MongoDB connection string: a replica set, the config server replica set or mongos routers "
     "of a sharded cluster (then one capture task per shard); user name and password "
     "percent-encoded; its password is never printed"},
    S("mongodb.hosts", NULL, F(mongodb_hosts), 0, G_CONN,
      "Debezium 1.x seed list `rs/host:port,...`; builds the connection string when "
      "mongodb.connection.string is not set"),
    B("mongodb.members.auto.discover", "true", F(members_auto_discover), 0, G_CONN,
      "true lets the driver discover every member from the addresses (the replica set of "
      "the connection string, or each shard's from config.shards); false uses the addresses "
      "as given, for NAT and containers whose member names do not resolve: one address gets "
      "directConnection=true, among several the primary is found by asking each directly, and "
      "again among the same ones after a stepdown"),
    S("mongodb.user", NULL, F(mongodb_user), 0, G_CONN,
      "User name, used when the connection string has none"),
    {"mongodb.password", OPT_STRING, NULL, NULL, 0, 0, NULL, F(mongodb_password), OPT_F_SECRET,
     NULL, G_CONN, "Password of mongodb.user; never printed"},
    S("mongodb.authsource", "admin", F(mongodb_authsource), 0, G_CONN,
      "Authentication database for mongodb.user, used when the connection string sets no "
      "authSource (one it sets is kept, and mongodb.user/password combine with it)"),
    S("mongodb.authentication.class", "DefaultMongoDbAuthProvider", NF, U, G_CONN,
      "Java credentials provider class"),
    B("mongodb.ssl.enabled", "false", F(mongodb_ssl_enabled), 0, G_CONN,
      "Connect with TLS (adds tls=true unless the connection string sets it)"),
    B("mongodb.ssl.invalid.hostname.allowed", "false", F(mongodb_ssl_invalid_hostname_allowed), 0,
      G_CONN, "Skip TLS host name verification (adds tlsAllowInvalidHostnames=true)"),
    S("mongodb.ssl.keystore", NULL, NF, U, G_CONN, "Client certificate key store file"),
    {"mongodb.ssl.keystore.password", OPT_STRING, NULL, NULL, 0, 0, NULL, NF, U | OPT_F_SECRET,
     NULL, G_CONN, "Key store password; never printed"},
    S("mongodb.ssl.keystore.type", "PKCS12", NF, U, G_CONN, "Key store type"),
    S("mongodb.ssl.truststore", NULL, NF, U, G_CONN, "CA trust store file"),
    {"mongodb.ssl.truststore.password", OPT_STRING, NULL, NULL, 0, 0, NULL, NF, U | OPT_F_SECRET,
     NULL, G_CONN, "Trust store password; never printed"},
    S("mongodb.ssl.truststore.type", "PKCS12", NF, U, G_CONN, "Trust store type"),
    N("mongodb.connect.timeout.ms", "10000", 0, I32, F(connect_timeout_ms), 0, G_CONN,
      "Socket connect timeout, ms (connectTimeoutMS in the URI wins)"),
    N("mongodb.server.selection.timeout.ms", "30000", 1, I32, F(server_selection_timeout_ms), 0,
      G_CONN, "Server selection timeout, ms"),
    N("mongodb.socket.timeout.ms", "0", 0, I32, F(socket_timeout_ms), 0, G_CONN,
      "Socket read timeout, ms; 0 = none"),
    N("mongodb.heartbeat.frequency.ms", "10000", 500, I32, F(heartbeat_frequency_ms), 0, G_CONN,
      "Driver server monitoring interval, ms"),
    N("mongodb.poll.interval.ms", "30000", 1, I32, F(poll_interval_ms_topology), 0, G_CONN,
      "Sharded clusters: how often config.shards is read again to start tasks for added shards "
      "and stop those of removed ones, ms"),
    N("connect.backoff.initial.delay.ms", "1000", 1, I32, F(backoff_initial_ms), 0, G_CONN,
      "First reconnect delay, ms (doubles on each failure)"),
    N("connect.backoff.max.delay.ms", "120000", 1, I32, F(backoff_max_ms), 0, G_CONN,
      "Longest reconnect delay, ms"),
    N("connect.max.attempts", "16", 1, I32, F(connect_max_attempts), 0, G_CONN,
      "Failed connection attempts before a capture task gives up; also failed deliveries in a "
      "row with the stored offsets unmoved (a full disk, a topic that refuses every record)"),
    E("mongodb.connection.mode", "replica_set", connection_modes, F(connection_mode), 0, G_CONN,
      "replica_set: one capture task per replica set or shard; sharded: one change stream "
      "through mongos for the whole cluster (needs a mongos connection string)"),
    S("mongodb.connection.string.shard.params", NULL, F(shard_params), 0, G_CONN,
      "URI options appended to each shard's connection string (e.g. `authSource=admin&tls=true`); "
      "they win over the options carried over from mongodb.connection.string"),
    B("internal.mongodb.allow.offset.invalidation", "false", F(allow_offset_invalidation), 0,
      G_CONN,
      "Start per-shard tasks although offsets of the merged mongos stream are stored (they are "
      "then ignored and each shard follows snapshot.mode)"),

    /* Capture */
    E("capture.mode", "change_streams_update_full", capture_modes, F(capture_mode), 0, G_CAPT,
      "How changes are read: a change stream variant, or oplog (1.9 dialect)"),
    E("capture.mode.full.update.type", "lookup", full_update_types, F(full_update_type), 0, G_CAPT,
      "lookup: fullDocument updateLookup; post_image: fullDocument whenAvailable"),
    E("capture.scope", "deployment", capture_scopes, NF, U, G_CAPT,
      "Open the change stream on the deployment, a database or a collection"),
    S("capture.target", NULL, NF, U, G_CAPT, "Database, or db.coll, for capture.scope"),
    N("capture.start.op.time", "-1", -1, INT64_MAX, F(capture_start_op_time), 0, G_CAPT,
      "startAtOperationTime when there is no offset: BSON timestamp as t * 2^32 + i; -1 = unset"),
    E("json.serialization.mode", "legacy", json_modes, NF, U, G_CAPT,
      "Extended JSON flavour of documents"),
    N("cursor.max.await.time.ms", "0", 0, I32, F(cursor_max_await_time_ms), 0, G_CAPT,
      "maxAwaitTimeMS of change-stream and oplog getMore, ms; 0 = server default; in oplog mode "
      "also the longest single wait for the commit point (1000 at 0); bounds shutdown time"),
    N("cursor.batch.size", "0", 0, I32, F(cursor_batch_size), 0, G_CAPT,
      "batchSize of the change-stream cursor (mongocdc); 0 = server default"),
    {"cursor.pipeline", OPT_JSON_ARRAY, NULL, NULL, 0, 0, NULL, F(cursor_pipeline), 0, NULL, G_CAPT,
     "JSON array of extra aggregation stages appended to the change-stream pipeline"},
    E("cursor.pipeline.order", "internal_first", pipeline_orders, NF, U, G_CAPT,
      "Where cursor.pipeline goes relative to the internal stages"),
    E("cursor.oversize.handling.mode", "fail", oversize_modes, F(oversize_mode), 0, G_CAPT,
      "Change events over MongoDB's 16 MiB limit: fail stops with an error; skip drops, on the "
      "server, events whose fullDocument or fullDocumentBeforeChange is over "
      "cursor.oversize.skip.threshold (logged and counted); split reassembles "
      "$changeStreamSplitLargeEvent fragments into one event (MongoDB 6.0.9+ or 7.0+). No "
      "effect in oplog capture (refused there)"),
    N("cursor.oversize.skip.threshold", "0", 0, I32, F(oversize_skip_threshold), 0, G_CAPT,
      "Largest fullDocument / fullDocumentBeforeChange in bytes ($bsonSize) whose event is "
      "kept under cursor.oversize.handling.mode skip; must be > 0 then"),
    {"skipped.operations", OPT_LIST, NULL, "t", 0, 0, NULL, F(skipped_operations), 0, NULL, G_CAPT,
     "Operations not emitted: any of c, u, d, t, or none"},
    B("tombstones.on.delete", "true", F(tombstones_on_delete), 0, G_CAPT,
      "Emit a tombstone after each delete"),
    B("provide.transaction.metadata", "false", F(provide_transaction_metadata), 0, G_CAPT,
      "Emit transaction BEGIN/END events and the transaction block"),
    B("transaction.eager.end", "false", F(transaction_eager_end), 0, G_CAPT,
      "Emit a transaction's END as soon as its last event is seen (mongocdc)"),
    B("oplog.update.raw.diff", "false", F(oplog_update_raw_diff), 0, G_CAPT,
      "capture.mode oplog on MongoDB 5.0+: put an update's raw $v: 2 diff in `patch` instead of "
      "its $v: 1 form ($set/$unset with dotted paths, $push/$slice for truncations); not with "
      "field.exclude.list or field.renames, which do not reach a raw diff (mongocdc)"),

    /* Filters (§7.2) */
    L("database.include.list", NULL, F(database_include), 0, G_FILT,
      "Databases to capture: anchored, case-insensitive regexes (or literals)"),
    L("database.exclude.list", NULL, F(database_exclude), 0, G_FILT,
      "Databases not to capture; exclusive with database.include.list"),
    L("collection.include.list", NULL, F(collection_include), 0, G_FILT,
      "Collections to capture, matched against db.collection"),
    L("collection.exclude.list", NULL, F(collection_exclude), 0, G_FILT,
      "Collections not to capture; exclusive with collection.include.list"),
    E("filters.match.mode", "regex", match_modes, F(filters_match_mode), 0, G_FILT,
      "regex or literal (case-insensitive exact names) filter entries"),
    L("field.exclude.list", NULL, F(field_exclude), 0, G_FILT,
      "Fields removed from events: db.coll.field.nested (`*` for db or coll)"),
    L("field.renames", NULL, F(field_renames), 0, G_FILT,
      "Fields renamed in events: db.coll.field.nested:newName"),
    S("signal.data.collection", NULL, F(signal_data_collection), 0, G_FILT,
      "db.coll of the signal collection (incremental snapshots)"),
    L("snapshot.include.collection.list", NULL, F(snapshot_include_collections), 0, G_FILT,
      "Collections copied by the initial snapshot; default all captured"),
    {"snapshot.collection.filter.overrides", OPT_LIST, NULL, NULL, 0, 0, NULL,
     F(snapshot_filter_override_names), OPT_F_DYNAMIC, NULL, G_FILT,
     "Collections (db.coll) whose snapshot is filtered; each needs "
     "snapshot.collection.filter.overrides.<db>.<coll> set to a JSON query"},

    /* Snapshot (§5) */
    E("snapshot.mode", "initial", snapshot_modes, F(snapshot_mode), 0, G_SNAP,
      "When to copy the collections before streaming"),
    N("snapshot.max.threads", "1", 1, 1024, F(snapshot_max_threads), 0, G_SNAP,
      "Initial snapshot worker threads"),
    {"initial.sync.max.threads", OPT_INT, NULL, NULL, 1, 1024, NULL, F(snapshot_max_threads), 0,
     "snapshot.max.threads", G_SNAP, "Debezium 1.x name of snapshot.max.threads"},
    N("snapshot.fetch.size", "0", 0, I32, F(snapshot_fetch_size), 0, G_SNAP,
      "find() batch size during snapshots; 0 = server default"),
    N("snapshot.collection.split.min.documents", "100000", 0, INT64_MAX,
      F(snapshot_split_min_docs), 0, G_SNAP,
      "(mongocdc) With snapshot.max.threads > 1, a collection of at least this many documents "
      "(estimated) is split into _id ranges read in parallel, one range per this many "
      "documents up to one per thread; 0 = never split"),
    B("snapshot.resumable", "false", F(snapshot_resumable), 0, G_SNAP,
      "(mongocdc) An interrupted initial snapshot resumes after the last document committed: "
      "each collection or _id range is read in _id order and every snapshot record's offset "
      "carries the copy's progress (mongocdc_snapshot); false = an interrupted snapshot is "
      "redone whole; always on with exactly.once.support"),
    N("snapshot.delay.ms", "0", 0, I32, F(snapshot_delay_ms), U, G_SNAP,
      "Delay before a snapshot starts, ms"),
    N("streaming.delay.ms", "0", 0, I32, F(streaming_delay_ms), U, G_SNAP,
      "Delay between snapshot end and streaming start, ms"),
    N("incremental.snapshot.chunk.size", "1024", 1, I32, F(incremental_snapshot_chunk_size), 0,
      G_SNAP, "Documents per incremental snapshot chunk"),
    E("incremental.snapshot.watermarking.strategy", "insert_insert", watermarkings,
      F(incremental_snapshot_watermarking), 0, G_SNAP,
      "How window markers are written to the signal collection"),
    N("incremental.snapshot.window.max.bytes", "67108864", 0, INT64_MAX,
      F(incremental_snapshot_window_max_bytes), 0, G_SNAP,
      "Byte cap of one incremental snapshot window: a chunk of huge documents ends early "
      "(mongocdc; 0 = no cap)"),
    B("read.only", "false", F(read_only), 0, G_SNAP,
      "No writes to MongoDB: incremental snapshot windows by cluster time instead of markers "
      "(signals through kafka, file or the command)"),
    L("signal.enabled.channels", "source", F(signal_channels), 0, G_SNAP,
      "Signal channels: source (the signal collection), kafka (signal.kafka.*), file "
      "(signal.file); jmx is not supported"),
    N("signal.poll.interval.ms", "5000", 1, I32, F(signal_poll_interval_ms), 0, G_SNAP,
      "How often the file signal channel reads signal.file, ms"),
    S("signal.kafka.topic", NULL, F(signal_kafka_topic), 0, G_SNAP,
      "Signal topic of the kafka channel (partition 0); default <topic.prefix>-signal"),
    S("signal.kafka.bootstrap.servers", NULL, F(signal_kafka_bootstrap), 0, G_SNAP,
      "Brokers of the signal topic; default the kafka: map's bootstrap.servers. "
      "signal.consumer.<property> entries go to the signal consumer as librdkafka properties"),
    S("signal.kafka.groupId", "kafka-signal", F(signal_kafka_group), 0, G_SNAP,
      "Consumer group whose committed offset says which signals were read"),
    N("signal.kafka.poll.timeout.ms", "100", 0, I32, F(signal_kafka_poll_timeout_ms), 0, G_SNAP,
      "Longest wait of one poll of the signal topic, ms"),
    S("signal.file", "file-signals.txt", F(signal_file), 0, G_SNAP,
      "File of the file signal channel: one JSON signal per line, removed once read"),
    B("snapshot.mode.configuration.based.snapshot.data", "false", NF, U, G_SNAP,
      "configuration_based snapshot mode: copy data"),
    B("snapshot.mode.configuration.based.snapshot.schema", "false", NF, U, G_SNAP,
      "configuration_based snapshot mode: snapshot schema"),
    B("snapshot.mode.configuration.based.start.stream", "false", NF, U, G_SNAP,
      "configuration_based snapshot mode: stream after the snapshot"),
    B("snapshot.mode.configuration.based.snapshot.on.schema.error", "false", NF, U, G_SNAP,
      "configuration_based snapshot mode: snapshot on schema error"),
    B("snapshot.mode.configuration.based.snapshot.on.data.error", "false", NF, U, G_SNAP,
      "configuration_based snapshot mode: snapshot when the offset is no longer valid"),
    S("snapshot.mode.custom.name", NULL, NF, U, G_SNAP, "Custom snapshotter name"),

    /* Topics / schemas / runtime (§3) */
    E("debezium.compatibility", "1.9", dialects, F(dialect), 0, G_TOPI,
      "Event layout of this Debezium version (mongocdc)"),
    {"debezium.version", OPT_STRING, "1.9.8.Final", "3.6.1.Final", 0, 0, NULL, F(debezium_version),
     0, NULL, G_TOPI, "source.version text in events (mongocdc)"},
    S("topic.naming.strategy", "io.debezium.schema.DefaultTopicNamingStrategy", NF, U, G_TOPI,
      "Java topic naming class"),
    S("topic.delimiter", ".", F(topic_delimiter), 0, G_TOPI, "Separator in topic names"),
    N("topic.cache.size", "10000", 1, I32, NF, U, G_TOPI, "Topic name cache entries"),
    S("topic.heartbeat.prefix", "__debezium-heartbeat", F(topic_heartbeat_prefix), 0, G_TOPI,
      "Heartbeat topic is <topic.heartbeat.prefix>.<topic.prefix>"),
    {"heartbeat.topics.prefix", OPT_STRING, NULL, NULL, 0, 0, NULL, F(topic_heartbeat_prefix), 0,
     "topic.heartbeat.prefix", G_TOPI, "Debezium 1.x name of topic.heartbeat.prefix"},
    S("topic.heartbeat.name", NULL, NF, U, G_TOPI, "Full heartbeat topic name"),
    S("topic.transaction", "transaction", F(topic_transaction), 0, G_TOPI,
      "Transaction topic is <topic.prefix>.<topic.transaction>"),
    {"schema.name.adjustment.mode", OPT_ENUM, "avro", "none", 0, 0, schema_adjusts,
     F(schema_name_adjust), 0, NULL, G_TOPI, "Schema name sanitising: none, avro, avro_unicode"},
    B("key.converter.schemas.enable", "false", F(key_schemas_enable), 0, G_TOPI,
      "Wrap keys in Kafka Connect JSON schema envelopes"),
    E("event.key.mode", "id", key_modes, F(key_mode), 0, G_TOPI,
      "What the key's `id` holds (mongocdc): id = the `_id` value (Debezium 2.5+); document_key "
      "= the whole documentKey as a JSON document (shard key fields and `_id`), snapshot and "
      "stream alike, for sharded collections whose `_id` is unique only per shard"),
    B("value.converter.schemas.enable", "false", F(value_schemas_enable), 0, G_TOPI,
      "Wrap values in Kafka Connect JSON schema envelopes"),
    N("heartbeat.interval.ms", "0", 0, I32, F(heartbeat_interval_ms), 0, G_TOPI,
      "Heartbeat record interval, ms; 0 = off"),
    N("max.batch.size", "2048", 1, I32, F(max_batch_size), 0, G_TOPI,
      "Exactly-once with transaction.boundary poll: records per transaction at most (one batch)"),
    N("max.queue.size", "8192", 1, I32, NF, U, G_TOPI, "Internal queue capacity, events"),
    N("max.queue.size.in.bytes", "0", 0, INT64_MAX, NF, U, G_TOPI,
      "Internal queue capacity, bytes; 0 = unlimited"),
    N("poll.interval.ms", "500", 1, I32, F(poll_interval_ms), 0, G_TOPI,
      "Exactly-once with transaction.boundary poll: a batch (transaction) lasts at most this "
      "long, ms"),
    N("errors.max.retries", "-1", -1, I32, NF, U, G_TOPI,
      "Restarts after retriable errors; -1 = unlimited"),
    N("retriable.restart.connector.wait.ms", "10000", 0, I32, NF, U, G_TOPI,
      "Wait before a restart after a retriable error, ms"),
    E("event.processing.failure.handling.mode", "fail", failure_modes, F(failure_mode), 0, G_TOPI,
      "An event that cannot be encoded: fail = stop; warn / skip (ignore) = log its namespace, "
      "_id and reason, count it and move the offset past it"),
    {"extended.headers.enabled", OPT_BOOL, "false", "true", 0, 0, NULL,
     F(extended_headers_enabled), 0, NULL, G_TOPI,
     "Add the __debezium.context.* Kafka headers (connectorLogicalName, taskId, connectorName, "
     "runId) to every data record and tombstone, as Debezium 3.3+ does; default true in the "
     "3.x dialect, false in 1.9 (which has no headers)"},
    E("source.struct.version", "v2", struct_versions, NF, U, G_TOPI,
      "v1 = the legacy 1.x source block"),
    N("guardrail.collections.max", "0", 0, I32, NF, U, G_TOPI,
      "Most collections captured; 0 = no limit"),
    E("guardrail.collections.limit.action", "warn", guardrail_actions, NF, U, G_TOPI,
      "What happens past guardrail.collections.max"),
    L("notification.enabled.channels", NULL, F(notification_channels), 0, G_TOPI,
      "Notification channels: sink (notification.sink.topic.name), log; jmx is not supported"),
    S("notification.sink.topic.name", NULL, F(notification_sink_topic), 0, G_TOPI,
      "Topic of the sink notification channel (required with it; needs sink.type kafka)"),
    B("internal.log.position.check.enable", "true", NF, U, G_TOPI,
      "Check at start that the stored position is still on the server"),

    /* mongocdc's own sections */
    E("sink.type", "kafka", sink_types, F(sink_type), 0, G_SINK,
      "Where records go: kafka, file (JSON lines) or stdout (JSON lines)"),
    S("sink.path", NULL, F(sink_path), 0, G_SINK,
      "Output file of the file sink (appended to; a partial last line, from a crash or a full "
      "disk, is cut off when it is opened)"),
    N("sink.queue.max.bytes", "16777216", 1024, INT64_MAX, F(sink_queue_bytes), 0, G_SINK,
      "Bytes queued per capture task before the task waits (backpressure)"),
    S("errors.deadletterqueue.topic.name", NULL, F(dlq_topic), 0, G_SINK,
      "Kafka sink: topic for records over Kafka's size limit (the value, or only their "
      "metadata, with headers saying why); empty = stop on such a record"),
    E("offsets.storage", "file", offset_storages, F(offset_storage), 0, G_OFFS,
      "Where positions are stored: file, or kafka (a compacted topic)"),
    S("offsets.file.path", NULL, F(offsets_file), 0, G_OFFS,
      "Offset file (offsets.storage file); written atomically"),
    S("offsets.topic", "mongocdc-offsets", F(offsets_topic), 0, G_OFFS,
      "Compacted offset topic, Kafka Connect format (offsets.storage kafka)"),
    N("offsets.flush.interval.ms", "60000", 1, I32, F(offsets_flush_interval_ms), 0, G_OFFS,
      "How often delivered positions are written, ms"),
    N("offsets.flush.timeout.ms", "5000", 1, I32, F(offsets_flush_timeout_ms), 0, G_OFFS,
      "Longest wait for a flush, ms"),
    N("offsets.stall.threshold.ms", "600000", 0, I32, F(offsets_stall_threshold_ms), 0, G_OFFS,
      "A WARN and mongocdc_offset_stalled_seconds when the stored position has not moved for "
      "this long while the stream has read past it, ms; 0 = off"),
    E("exactly.once.support", "disabled", exactly_once_modes, F(exactly_once), 0, G_OFFS,
      "Exactly-once delivery through Kafka transactions (records and the offset covering them "
      "commit together): disabled (at-least-once), requested (when the broker allows, else "
      "at-least-once with a WARN) or required; needs sink.type kafka and offsets.storage kafka"),
    E("transaction.boundary", "poll", txn_boundaries, F(txn_boundary), 0, G_OFFS,
      "Exactly-once: where a transaction ends: poll (each batch: max.batch.size records, "
      "poll.interval.ms, or the source has nothing more ready, whichever comes first) or "
      "interval"),
    N("transaction.boundary.interval.ms", "-1", -1, I32, F(txn_boundary_interval_ms), 0, G_OFFS,
      "Exactly-once, transaction.boundary interval: how long a transaction stays open, ms; "
      "-1 = offsets.flush.interval.ms, at most half of kafka.transaction.timeout.ms"),
    S("transactional.id.prefix", "", F(transactional_id_prefix), 0, G_OFFS,
      "Exactly-once: prefix of each task's transactional id (<prefix><name>-<task>, name the "
      "connector name); two daemons with the same id fence each other"),
    {"kafka", OPT_MAP, NULL, NULL, 0, 0, NULL, F(kafka), 0, NULL, G_KAFK,
     "librdkafka properties, passed as-is (bootstrap.servers, security.protocol, ...)"},
    E("log.level", "info", log_levels, F(log_level), 0, G_LOG, "error, warn, info or debug"),
    E("log.format", "text", log_formats, F(log_format), 0, G_LOG,
      "text lines or one JSON object per line"),
    S("log.file", NULL, F(log_file), 0, G_LOG,
      "Log file (append; reopened on SIGHUP); default stderr"),
    B("metrics.enabled", "false", F(metrics_enabled), 0, G_METR,
      "Serve /metrics (Prometheus text format), /health and /ready over HTTP"),
    S("metrics.http.bind.address", "127.0.0.1", F(metrics_bind_address), 0, G_METR,
      "Address (IPv4 or IPv6 literal) the metrics listener binds"),
    N("metrics.http.port", "9464", 0, 65535, F(metrics_port), 0, G_METR,
      "Port of the metrics listener; 0 = chosen by the system (logged)"),
    N("metrics.ready.window.ms", "60000", 1, I32, F(metrics_ready_window_ms), 0, G_METR,
      "/ready answers 503 when a task made no progress for this long, ms"),
    N("metrics.collections.max", "100", 0, 10000, F(metrics_collections_max), 0, G_METR,
      "Distinct collections per task with their own metrics; later ones share "
      "collection=\"__overflow__\"; 0 = no per-collection metrics"),
    N("oplog.headroom.check.interval.ms", "60000", 0, I32, F(oplog_headroom_interval_ms), 0,
      G_METR, "How often the oplog's oldest entry is read for the headroom, ms; 0 = never"),
    N("oplog.headroom.warn.seconds", "3600", 0, I32, F(oplog_headroom_warn_s), 0, G_METR,
      "WARN when the stored position is less than this many seconds from the oplog's end"),
};

const size_t mcdc_option_count = sizeof mcdc_options / sizeof mcdc_options[0];

const struct opt *cfg_find_option(const char *key)
{
    for (size_t i = 0; i < mcdc_option_count; i++)
        if (strcmp(mcdc_options[i].key, key) == 0)
            return &mcdc_options[i];
    return NULL;
}

const char *cfg_default_text(const struct opt *o, enum mcdc_dialect dialect)
{
    if (dialect == MCDC_DIALECT_3_X && o->dflt_3x)
        return o->dflt_3x;
    return o->dflt;
}

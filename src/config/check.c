/*
 * config/check: config_check(), the rules that involve more than one option
 * (in the manner of librdkafka's rd_kafka_conf_finalize), the kafka:
 * pass-through map and the JSON-valued options. Each problem is reported at
 * the location of the key that is wrong; a problem between two keys is
 * reported at the one of them the file sets last (the one that conflicts with
 * what came before), at the only one set when the other is a default, and at
 * the top of the file only when the problem is a key that is missing.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <bson/bson.h>
#include <librdkafka/rdkafka.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "common/xalloc.h"
#include "config/check_internal.h"

#define OVERRIDE_PREFIX "snapshot.collection.filter.overrides."

/* Reports at key's entry, or at the top of the file when key is not set. */
void check_problem(struct checker *c, const char *key, const char *fmt, ...)
{
    const struct cfg_entry *at = cfg_entry_find(c->e, key, false);
    if (at && at->bad)
        return; /* its own problem is already reported */
    int line = at ? at->line : c->e->map_line, col = at ? at->col : c->e->map_col;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cfg_report(c->d, line, col, key, "%s", msg);
}

/* A rule broken by two keys together. Reported at the key set later in the
 * file (or the only one set): at key with msg_key, or at other with
 * msg_other; at the top of the file under key when neither is set. Quiet when
 * either value was already rejected on its own. */
void check_conflict(struct checker *c, const char *key, const char *other, const char *msg_key,
                     const char *msg_other)
{
    const struct cfg_entry *a = cfg_entry_find(c->e, key, false);
    const struct cfg_entry *b = cfg_entry_find(c->e, other, false);
    if ((a && a->bad) || (b && b->bad))
        return;
    if (b && (!a || b->line > a->line || (b->line == a->line && b->col > a->col)))
        cfg_report(c->d, b->line, b->col, other, "%s", msg_other);
    else
        check_problem(c, key, "%s", msg_key);
}

bool check_kafka_has(const struct mcdc_config *cfg, const char *key)
{
    for (size_t i = 0; i < cfg->kafka.count; i++)
        if (strcmp(cfg->kafka.items[i].key, key) == 0)
            return true;
    return false;
}

/* A namespace `db.coll`: a dot with text on both sides. */
static bool is_namespace(const char *s)
{
    const char *dot = strchr(s, '.');
    return dot && dot != s && dot[1] != '\0';
}

/* The producer settings the Kafka sink locks (sink/sink_kafka.c refuses the
 * same values when it opens, as a backstop): at-least-once delivery and
 * per-key order need an idempotent producer, which librdkafka only allows
 * with acks=all and at most 5 requests in flight per connection
 * (librdkafka CONFIGURATION.md, enable.idempotence). The rules are the
 * sink's: enable.idempotence "true" (any case) or "1"; acks (or its alias
 * request.required.acks) "all" or "-1"; max.in.flight (or
 * max.in.flight.requests.per.connection) 1 to 5. Values librdkafka itself
 * refuses are reported by check_kafka instead. */
static void check_kafka_locked(struct checker *c, const struct mcdc_kv *kv)
{
    char *shown = xasprintf("kafka.%s", kv->key);
    if (!strcmp(kv->key, "enable.idempotence") && strcasecmp(kv->value, "true") != 0 &&
        strcmp(kv->value, "1") != 0)
        cfg_report(c->d, kv->line, kv->col, shown,
                   "cannot be turned off: at-least-once delivery and per-key order need an "
                   "idempotent producer (retries would reorder and duplicate a document's "
                   "events) (expected true)");
    if ((!strcmp(kv->key, "acks") || !strcmp(kv->key, "request.required.acks")) &&
        strcmp(kv->value, "all") != 0 && strcmp(kv->value, "-1") != 0)
        cfg_report(c->d, kv->line, kv->col, shown,
                   "must wait for all in-sync replicas: at-least-once delivery needs "
                   "acks=all (a committed offset could cover records lost on failover) and "
                   "the idempotent producer requires it (expected all or -1)");
    if (!strcmp(kv->key, "max.in.flight") ||
        !strcmp(kv->key, "max.in.flight.requests.per.connection")) {
        char *end;
        long n = strtol(kv->value, &end, 10);
        if (*end == '\0' && end != kv->value && n > 5)
            cfg_report(c->d, kv->line, kv->col, shown,
                       "%ld is more than the idempotent producer allows: per-key order "
                       "needs idempotence, which keeps order only with at most 5 requests "
                       "in flight (expected 1 to 5)",
                       n);
    }
    free(shown);
}

static const struct mcdc_kv *kafka_item(const struct mcdc_config *cfg, const char *key)
{
    for (size_t i = 0; i < cfg->kafka.count; i++)
        if (strcmp(cfg->kafka.items[i].key, key) == 0)
            return &cfg->kafka.items[i];
    return NULL;
}

/* librdkafka's unsecured JWT handler (enable.sasl.oauthbearer.unsecure.jwt,
 * OAUTHBEARER; librdkafka CONFIGURATION.md, sasl.oauthbearer.config) needs
 * `principal=<value>` among the space-separated name=value pairs of
 * sasl.oauthbearer.config. Without it librdkafka 2.0 fails its token refresh
 * in a way that crashes the client some seconds after it starts (seen with
 * a metadata request), so the daemon and `mongocdc check` would die with no
 * message: refused here with the key's position instead. */
static void check_kafka_oauthbearer(struct checker *c)
{
    const struct mcdc_kv *jwt = kafka_item(c->cfg, "enable.sasl.oauthbearer.unsecure.jwt");
    const struct mcdc_kv *mech = kafka_item(c->cfg, "sasl.mechanism");
    if (mech == NULL)
        mech = kafka_item(c->cfg, "sasl.mechanisms");
    if (jwt == NULL || (strcasecmp(jwt->value, "true") != 0 && strcmp(jwt->value, "1") != 0) ||
        mech == NULL || strcmp(mech->value, "OAUTHBEARER") != 0)
        return;
    const struct mcdc_kv *oc = kafka_item(c->cfg, "sasl.oauthbearer.config");
    bool principal = false;
    for (const char *p = oc ? oc->value : ""; *p != '\0';) {
        p += strspn(p, " ");
        size_t len = strcspn(p, " ");
        if (len > strlen("principal=") && strncmp(p, "principal=", strlen("principal=")) == 0)
            principal = true;
        p += len;
    }
    if (principal)
        return;
    const struct mcdc_kv *at = oc ? oc : jwt;
    char *shown = xasprintf("kafka.%s", at->key);
    cfg_report(c->d, at->line, at->col, shown,
               "the unsecured JWT of enable.sasl.oauthbearer.unsecure.jwt needs a principal "
               "(expected sasl.oauthbearer.config with principal=<name>, e.g. "
               "\"principal=mongocdc\")");
    free(shown);
}

/* Each key goes through rd_kafka_conf_set on a scratch conf, so librdkafka
 * itself says what is wrong (kcat's -X handling). Secret values are masked
 * in librdkafka's message, which may quote them. */
static void check_kafka(struct checker *c)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    for (size_t i = 0; i < c->cfg->kafka.count; i++) {
        const struct mcdc_kv *kv = &c->cfg->kafka.items[i];
        char errstr[512];
        if (rd_kafka_conf_set(conf, kv->key, kv->value, errstr, sizeof errstr) ==
            RD_KAFKA_CONF_OK) {
            check_kafka_locked(c, kv);
            continue;
        }
        char *shown = xasprintf("kafka.%s", kv->key);
        char *msg = xstrdup(errstr);
        if (cfg_kafka_key_is_secret(kv->key))
            cfg_mask_secret(&msg, kv->value);
        cfg_report(c->d, kv->line, kv->col, shown, "%s (expected %s)", msg,
                   strstr(errstr, "No such configuration property") != NULL
                       ? "a librdkafka property"
                       : "a value librdkafka accepts for this property");
        free(msg);
        free(shown);
    }
    rd_kafka_conf_destroy(conf);
    check_kafka_oauthbearer(c);
}

/* Debezium rejects a topic.prefix that is not a valid topic name part
 * (CommonConnectorConfig's topic name check: letters, digits, '.', '_', '-'). */
static void check_topic_names(struct checker *c)
{
    const char *p = c->cfg->topic_prefix;
    if (p &&
        strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != strlen(p))
        check_problem(c, "topic.prefix",
                "invalid topic name \"%s\" (expected letters, digits, '.', '_' and '-' only)", p);
    else if (p && strlen(p) > 249)
        check_problem(c, "topic.prefix", "longer than 249 characters (expected a Kafka topic name)");
}

/* The metrics listener binds an address literal (metrics_http_start() refuses
 * anything else when the daemon starts, a host name included): --validate
 * refuses the same value, whether or not metrics.enabled is set. */
static void check_metrics(struct checker *c)
{
    const char *a = c->cfg->metrics_bind_address;
    unsigned char buf[sizeof(struct in6_addr)];
    if (a && inet_pton(AF_INET, a, buf) != 1 && inet_pton(AF_INET6, a, buf) != 1)
        check_problem(c, "metrics.http.bind.address",
                "\"%s\" is not an IPv4 or IPv6 address (expected an address literal such as "
                "127.0.0.1, 0.0.0.0 or ::1; host names are not resolved)",
                a);
}

static void check_capture(struct checker *c)
{
    struct mcdc_config *cfg = c->cfg;
    bool pre_image = cfg->capture_mode == MCDC_CAPTURE_CHANGE_STREAMS_WITH_PRE_IMAGE ||
                     cfg->capture_mode == MCDC_CAPTURE_CHANGE_STREAMS_UPDATE_FULL_WITH_PRE_IMAGE;
    /* Oplog capture is 1.x only; pre-images and post_image arrived in 2.0 and
     * 2.5, whose layout is the 3.x dialect (debezium-format.md §0). */
    if (cfg->capture_mode == MCDC_CAPTURE_OPLOG && cfg->dialect != MCDC_DIALECT_1_9)
        check_conflict(c, "capture.mode", "debezium.compatibility",
                 "oplog capture exists only in the 1.9 dialect (expected "
                 "debezium.compatibility \"1.9\" or a change_streams mode)",
                 "the 3.x dialect has no oplog capture (expected \"1.9\" with capture.mode "
                 "oplog, or a change_streams mode)");
    if (pre_image && cfg->dialect == MCDC_DIALECT_1_9)
        check_conflict(c, "capture.mode", "debezium.compatibility",
                 "pre-images need the 3.x dialect (expected "
                 "debezium.compatibility \"3.x\")",
                 "the 1.9 dialect has no pre-images (expected \"3.x\" with capture.mode "
                 "*_with_pre_image)");
    if (cfg->full_update_type == MCDC_FULL_UPDATE_POST_IMAGE && cfg->dialect == MCDC_DIALECT_1_9)
        check_conflict(c, "capture.mode.full.update.type", "debezium.compatibility",
                 "post_image needs the 3.x dialect (expected lookup)",
                 "the 1.9 dialect has no post_image full update type (expected \"3.x\" with "
                 "capture.mode.full.update.type post_image)");
    /* A raw $v: 2 diff is published as the server wrote it: field rules do
     * not reach inside it, so excluded values would leak and renames would be
     * missed. Refused rather than published unfiltered. */
    if (cfg->capture_mode == MCDC_CAPTURE_OPLOG && cfg->oplog_update_raw_diff &&
        (cfg->field_exclude.count > 0 || cfg->field_renames.count > 0)) {
        const char *rules = cfg->field_exclude.count > 0 ? "field.exclude.list" : "field.renames";
        check_conflict(c, "oplog.update.raw.diff", rules,
                 "field.exclude.list and field.renames do not reach a raw $v: 2 diff (expected "
                 "false, the decoded $v: 1 patch, when field rules are set)",
                 "field rules do not reach a raw $v: 2 diff (expected oplog.update.raw.diff "
                 "false with field rules)");
    }
    if (cfg->capture_mode == MCDC_CAPTURE_OPLOG && cfg->connection_mode == MCDC_CONNECTION_SHARDED)
        check_conflict(c, "mongodb.connection.mode", "capture.mode",
                 "mongos has no oplog (expected replica_set with capture.mode oplog)",
                 "mongos has no oplog (expected a change_streams mode with "
                 "mongodb.connection.mode sharded)");
    if (cfg->oversize_mode == MCDC_OVERSIZE_SKIP && cfg->oversize_skip_threshold <= 0)
        check_problem(c, "cursor.oversize.skip.threshold",
                "invalid threshold value for skipped document size (expected a number of bytes "
                "> 0 with cursor.oversize.handling.mode skip)");
    /* An oplog entry is itself at most 16 MiB + 16 KiB and find returns it
     * whole: the oplog reader never meets an oversized event. */
    if (cfg->capture_mode == MCDC_CAPTURE_OPLOG && cfg->oversize_mode != MCDC_OVERSIZE_FAIL)
        check_conflict(c, "cursor.oversize.handling.mode", "capture.mode",
                 "has no effect in oplog capture, whose entries are never over the limit "
                 "(expected fail with capture.mode oplog)",
                 "oplog capture has no oversized events (expected a change_streams mode with "
                 "cursor.oversize.handling.mode skip or split)");
    if (cfg->capture_mode == MCDC_CAPTURE_OPLOG && cfg->key_mode == MCDC_KEY_DOCUMENT_KEY)
        check_conflict(c, "event.key.mode", "capture.mode",
                 "document_key needs a change stream's documentKey (expected id with "
                 "capture.mode oplog)",
                 "oplog entries carry no documentKey for every operation (expected a "
                 "change_streams mode with event.key.mode document_key)");
    if (cfg->backoff_initial_ms > cfg->backoff_max_ms)
        check_conflict(c, "connect.backoff.initial.delay.ms", "connect.backoff.max.delay.ms",
                 "larger than connect.backoff.max.delay.ms (expected at most the maximum)",
                 "smaller than connect.backoff.initial.delay.ms (expected at least the initial "
                 "delay)");
    struct mcdc_strlist *ops = &cfg->skipped_operations;
    bool bad_ops = false;
    for (size_t i = 0; i < ops->count; i++) {
        const char *op = ops->items[i];
        if (strcmp(op, "none") == 0 && ops->count > 1) {
            check_problem(c, "skipped.operations",
                    "\"none\" with other operations (expected none alone)");
            bad_ops = true;
        } else if (strcmp(op, "none") != 0 && (strlen(op) != 1 || !strchr("cudt", op[0]))) {
            check_problem(c, "skipped.operations", "invalid operation \"%s\" (expected %s)", op,
                    "c, u, d, t or none");
            bad_ops = true;
        }
    }
    /* Debezium's "none" means nothing is skipped: readers see an empty list. */
    if (!bad_ops && ops->count == 1 && strcmp(ops->items[0], "none") == 0)
        cfg_strlist_free(ops);
}

static void check_json_array(struct checker *c, const char *key, const char *text)
{
    bson_error_t error;
    char *wrapped = xasprintf("{\"stages\": %s}", text);
    bson_t *b = bson_new_from_json((const uint8_t *)wrapped, -1, &error);
    bson_iter_t it;
    if (!b)
        check_problem(c, key, "invalid JSON: %s (expected %s)", error.message, "a JSON array of stages");
    else if (!bson_iter_init_find(&it, b, "stages") || !BSON_ITER_HOLDS_ARRAY(&it))
        check_problem(c, key, "not a JSON array (expected a JSON array of stages)");
    bson_destroy(b);
    free(wrapped);
}

/* Filter entries are regexes in regex mode (Debezium's Filters, §7.2); they
 * are compiled here with the options the encoder uses so that --validate
 * catches a bad one with its location. */
static void check_regexes(struct checker *c, const char *key, const struct mcdc_strlist *l)
{
    for (size_t i = 0; i < l->count; i++) {
        int code;
        PCRE2_SIZE off;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)l->items[i], PCRE2_ZERO_TERMINATED,
                                       PCRE2_CASELESS | PCRE2_UTF | PCRE2_MATCH_INVALID_UTF |
                                           PCRE2_ANCHORED | PCRE2_ENDANCHORED,
                                       &code, &off, NULL);
        if (re) {
            pcre2_code_free(re);
            continue;
        }
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        check_problem(c, key, "invalid regex \"%s\": %s at offset %zu (expected a regular expression)",
                l->items[i], (const char *)msg, (size_t)off);
    }
}

/* A field.exclude.list / field.renames entry the encoder takes
 * (encode/fields.c parse_rule): <db>.<coll>.<field>[.<field>...], no empty
 * part, and for a rename ":<newName>" after it, newName without a dot. */
static bool field_rule_ok(const char *entry, bool rename)
{
    const char *end = entry + strlen(entry);
    if (rename) {
        const char *colon = strrchr(entry, ':');
        if (colon == NULL || colon[1] == '\0' || strchr(colon + 1, '.') != NULL)
            return false;
        end = colon;
    }
    size_t parts = 1;
    for (const char *p = entry; p < end; p++) {
        if (*p != '.')
            continue;
        if (p == entry || p + 1 == end || p[1] == '.')
            return false; /* an empty part */
        parts++;
    }
    return parts >= 3 && end > entry;
}

static void check_filters(struct checker *c)
{
    struct mcdc_config *cfg = c->cfg;
    if (cfg->filters_match_mode == MCDC_FILTER_MATCH_REGEX) {
        check_regexes(c, "database.include.list", &cfg->database_include);
        check_regexes(c, "database.exclude.list", &cfg->database_exclude);
        check_regexes(c, "collection.include.list", &cfg->collection_include);
        check_regexes(c, "collection.exclude.list", &cfg->collection_exclude);
    }
    check_regexes(c, "snapshot.include.collection.list", &cfg->snapshot_include_collections);
    if (cfg->database_include.count && cfg->database_exclude.count)
        check_conflict(c, "database.exclude.list", "database.include.list",
                 "cannot be used with database.include.list (expected only one of them)",
                 "cannot be used with database.exclude.list (expected only one of them)");
    if (cfg->collection_include.count && cfg->collection_exclude.count)
        check_conflict(c, "collection.exclude.list", "collection.include.list",
                 "cannot be used with collection.include.list (expected only one of them)",
                 "cannot be used with collection.exclude.list (expected only one of them)");
    if (cfg->signal_data_collection && !is_namespace(cfg->signal_data_collection))
        check_problem(c, "signal.data.collection", "not a namespace: \"%s\" (expected %s)",
                cfg->signal_data_collection, "db.collection");
    for (size_t i = 0; i < cfg->field_renames.count; i++)
        if (!field_rule_ok(cfg->field_renames.items[i], true))
            check_problem(c, "field.renames", "invalid entry \"%s\" (expected %s)",
                    cfg->field_renames.items[i], "db.coll.field:newName");
    for (size_t i = 0; i < cfg->field_exclude.count; i++)
        if (!field_rule_ok(cfg->field_exclude.items[i], false))
            check_problem(c, "field.exclude.list", "invalid entry \"%s\" (expected %s)",
                    cfg->field_exclude.items[i], "db.coll.field, a nested field as db.coll.a.b");
    if (cfg->cursor_pipeline)
        check_json_array(c, "cursor.pipeline", cfg->cursor_pipeline);
}

/* snapshot.collection.filter.overrides names collections; each has its query
 * in snapshot.collection.filter.overrides.<db>.<coll> (Debezium's layout). */
static void check_overrides(struct checker *c)
{
    struct mcdc_config *cfg = c->cfg;
    const struct mcdc_strlist *names = &cfg->snapshot_filter_override_names;
    cfg->snapshot_filter_overrides =
        xcalloc(names->count + 1, sizeof *cfg->snapshot_filter_overrides);
    for (size_t i = 0; i < names->count; i++) {
        char *key = xasprintf(OVERRIDE_PREFIX "%s", names->items[i]);
        const struct cfg_entry *q = cfg_entry_find(c->e, key, false);
        const char *text = q ? cfg_scalar(q->value) : NULL;
        bson_error_t error;
        bson_t *b = NULL;
        if (!is_namespace(names->items[i]))
            check_problem(c, "snapshot.collection.filter.overrides",
                    "not a namespace: \"%s\" (expected %s)", names->items[i], "db.collection");
        else if (!q)
            check_problem(c, "snapshot.collection.filter.overrides",
                    "no query for \"%s\" (expected %s to be set)", names->items[i], key);
        else if (!text || cfg_is_null(q->value))
            cfg_report(c->d, q->vline, q->vcol, key, "no query (expected a JSON query document)");
        else if (!(b = bson_new_from_json((const uint8_t *)text, -1, &error)))
            cfg_report(c->d, q->vline, q->vcol, key,
                       "invalid JSON: %s (expected a JSON query "
                       "document)",
                       error.message);
        else
            cfg->snapshot_filter_overrides[cfg->snapshot_filter_override_count++] =
                (struct mcdc_filter_override){xstrdup(names->items[i]), xstrdup(text)};
        bson_destroy(b);
        free(key);
    }
    for (size_t i = 0; i < c->e->count; i++) {
        const struct cfg_entry *q = &c->e->items[i];
        if (q->kafka || q->opt || strncmp(q->key, OVERRIDE_PREFIX, strlen(OVERRIDE_PREFIX)) != 0)
            continue;
        bool listed = false;
        for (size_t j = 0; j < names->count && !listed; j++)
            listed = strcmp(q->key + strlen(OVERRIDE_PREFIX), names->items[j]) == 0;
        if (!listed)
            cfg_report(c->d, q->line, q->col, q->key,
                       "collection not listed in snapshot.collection.filter.overrides (expected "
                       "it in that list)");
    }
}

/* Each name of list (at key) must be one of known[]; unsupported[] names get
 * "not supported" with why. */
static void check_channel_names(struct checker *c, const char *key, const struct mcdc_strlist *l,
                                const char *const *known, const char *expected,
                                const char *unsupported, const char *why)
{
    const struct cfg_entry *at = cfg_entry_find(c->e, key, false);
    for (size_t i = 0; i < l->count; i++) {
        const char *n = l->items[i];
        bool ok = false;
        for (size_t j = 0; known[j] && !ok; j++)
            ok = strcmp(n, known[j]) == 0;
        if (ok)
            continue;
        /* at the value, as other invalid values are */
        if (at && unsupported && strcmp(n, unsupported) == 0)
            cfg_report(c->d, at->vline, at->vcol, key, "%s: not supported (%s) (expected %s)", n,
                       why, expected);
        else if (at)
            cfg_report(c->d, at->vline, at->vcol, key, "unknown channel \"%s\" (expected %s)", n,
                       expected);
    }
}

static bool list_has(const struct mcdc_strlist *l, const char *name)
{
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->items[i], name) == 0)
            return true;
    return false;
}

/* signal.enabled.channels, signal.consumer.* (each through rd_kafka_conf_set
 * like kafka:), notification.enabled.channels and the sink topic it needs. */
static void check_signals(struct checker *c)
{
    struct mcdc_config *cfg = c->cfg;
    static const char *const sig_known[] = {"source", "kafka", "file", NULL};
    static const char *const notif_known[] = {"sink", "log", NULL};
    check_channel_names(c, "signal.enabled.channels", &cfg->signal_channels, sig_known,
                        "source, kafka or file", "jmx",
                        "mongocdc has no JVM; use kafka, file or mongocdc signal");
    check_channel_names(c, "notification.enabled.channels", &cfg->notification_channels,
                        notif_known, "sink or log", "jmx", "mongocdc has no JVM; use sink or log");
    if (list_has(&cfg->signal_channels, "kafka") &&
        (!cfg->signal_kafka_bootstrap || !*cfg->signal_kafka_bootstrap) &&
        !check_kafka_has(cfg, "bootstrap.servers") && !check_kafka_has(cfg, "metadata.broker.list"))
        check_problem(c, "signal.enabled.channels",
                "the kafka channel needs brokers (expected signal.kafka.bootstrap.servers or "
                "kafka.bootstrap.servers to be set)");
    if (list_has(&cfg->notification_channels, "sink")) {
        if (!cfg->notification_sink_topic || !*cfg->notification_sink_topic)
            check_problem(c, "notification.enabled.channels",
                    "Notification topic name must be provided when kafka notification channel "
                    "is enabled (expected notification.sink.topic.name)");
        else if (cfg->sink_type != MCDC_SINK_KAFKA)
            check_problem(c, "notification.enabled.channels",
                    "the sink channel publishes to Kafka (expected sink.type kafka)");
    }
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    size_t n = 0;
    for (size_t i = 0; i < c->e->count; i++)
        if (!c->e->items[i].kafka && !c->e->items[i].opt &&
            strncmp(c->e->items[i].key, "signal.consumer.", 16) == 0)
            n++;
    cfg->signal_consumer.items = xcalloc(n + 1, sizeof *cfg->signal_consumer.items);
    for (size_t i = 0; i < c->e->count; i++) {
        const struct cfg_entry *q = &c->e->items[i];
        if (q->kafka || q->opt || strncmp(q->key, "signal.consumer.", 16) != 0)
            continue;
        const char *text = cfg_scalar(q->value);
        char errstr[512];
        if (!text || cfg_is_null(q->value)) {
            cfg_report(c->d, q->vline, q->vcol, q->key, "no value (expected a librdkafka value)");
            continue;
        }
        if (rd_kafka_conf_set(conf, q->key + 16, text, errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
            cfg_report(c->d, q->vline, q->vcol, q->key, "%s",
                       cfg_kafka_key_is_secret(q->key + 16) ? "invalid librdkafka property"
                                                            : errstr);
            continue;
        }
        struct mcdc_kv *kv = &cfg->signal_consumer.items[cfg->signal_consumer.count++];
        kv->key = xstrdup(q->key + 16);
        kv->value = xstrdup(text);
        kv->line = q->line;
        kv->col = q->col;
    }
    rd_kafka_conf_destroy(conf);
}

/* Values accepted (they are valid Debezium) whose behaviour no module
 * delivers yet; main warns about them at start. */
static void flag_unsupported_values(struct mcdc_config *cfg)
{
    (void)cfg;
}

void config_check(struct mcdc_config *cfg, const struct cfg_entries *e, struct cfg_diag *d)
{
    struct checker c = {cfg, e, d};
    cfg_check_uri(cfg, e, d);
    check_kafka(&c);
    check_topic_names(&c);
    check_sink_and_offsets(&c);
    check_exactly_once(&c);
    check_metrics(&c);
    check_capture(&c);
    check_filters(&c);
    check_overrides(&c);
    check_signals(&c);
    flag_unsupported_values(cfg);
}

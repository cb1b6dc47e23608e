/*
 * tools/convert: `mongocdc config convert FILE [--worker WORKER.properties]`,
 * a Debezium MongoDB connector configuration to mongocdc's YAML
 * (docs/MIGRATING.md). Input forms:
 *   - Kafka Connect's connector JSON {"name": ..., "config": {...}} (POST
 *     /connectors) or the bare config object (PUT /connectors/NAME/config);
 *   - Debezium Server's application.properties: debezium.source.* is the
 *     connector configuration, debezium.sink.type and
 *     debezium.sink.kafka.producer.* the sink, debezium.format.* the
 *     converters, quarkus.log.level the log level.
 * --worker reads a Kafka Connect worker's properties for what a connector
 * JSON does not hold: bootstrap.servers, offset.storage.topic, the
 * converters' schemas.enable and producer.* settings.
 *
 * Keys are Debezium's property names in both mongocdc and Debezium, so a key
 * mongocdc's option table (config/schema.c) knows is carried as is (older
 * aliases under their current name) when its value is one mongocdc accepts;
 * every other key is named on stderr with the reason, and the YAML says
 * where it stands (convert_yaml.c). The result passes `mongocdc --validate`
 * whenever the input's values do.
 *
 * Thread: main.
 */
#include "tools/tools.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <bson/bson.h>

#include "common/error.h"
#include "common/xalloc.h"
#include "config/internal.h"
#include "tools/tools_internal.h"

/* Connector properties handled here rather than by the option table. */
static bool special(const char *k)
{
    static const char *const keys[] = {"name",
                                       "connector.class",
                                       "tasks.max",
                                       "key.converter",
                                       "value.converter",
                                       "header.converter",
                                       NULL};
    for (const char *const *p = keys; *p; p++)
        if (!strcmp(k, *p))
            return true;
    return !strncmp(k, "offset.", 7) || !strcmp(k, "offsets.storage.topic") ||
           !strcmp(k, "bootstrap.servers") || !strncmp(k, "producer.override.", 18) ||
           !strncmp(k, "transforms", 10) || !strncmp(k, "predicates", 10) ||
           !strncmp(k, "key.converter.", 14) || !strncmp(k, "value.converter.", 16) ||
           !strncmp(k, "header.converter.", 17);
}

struct conv {
    struct props src;    /* connector properties (debezium.source.* without the prefix) */
    struct props kafka;  /* producer settings */
    struct props worker; /* --worker */
    char *name;
    const char *cli_name;                    /* --name */
    bool server;                             /* Debezium Server properties */
    const char *key_schemas, *value_schemas; /* as found, or NULL */
    const char *sink_type;                   /* Debezium Server's, or NULL */
    const char *log_level;                   /* quarkus.log.level */
    struct props dropped; /* Debezium Server keys without a counterpart: key -> why */
    struct props formats; /* Debezium Server's debezium.format.key/value other than json */
};

/* emit(): the YAML's opening comments, the input's settings refused or
 * dropped as a whole (Debezium Server keys, formats, another connector
 * class), and debezium.compatibility from the input's property names. */
static void emit_preamble(struct conv *c, struct out *o, const char *input)
{
    FILE *f = o->f;
    const struct props *s = &c->src;

    fprintf(f, "# mongocdc configuration converted from %s (%s) by mongocdc config convert.\n",
            input,
            c->server ? "Debezium Server application.properties"
                      : "Kafka Connect connector configuration");
    fputs("# Check with: mongocdc --validate -c FILE; then docs/MIGRATING.md.\n", f);
    for (size_t i = 0; i < c->dropped.count; i++)
        out_drop(o, c->dropped.keys[i], c->dropped.values[i]);
    for (size_t i = 0; i < c->formats.count; i++)
        out_refuse(o, c->formats.keys[i], c->formats.values[i],
                   "mongocdc writes JsonConverter's JSON only (format json): consumers of these "
                   "topics expect other bytes");
    const char *cls = props_get(s, "connector.class");
    if (cls && strcmp(cls, "io.debezium.connector.mongodb.MongoDbConnector") != 0)
        out_refuse(o, "connector.class", cls,
                   "not Debezium's MongoDB connector (io.debezium.connector.mongodb."
                   "MongoDbConnector): mongocdc cannot take its place");
    /* the layout: 1.x properties mean the 1.9 layout */
    bool v1 = props_get(s, "mongodb.name") || props_get(s, "mongodb.hosts") ||
              props_get(s, "initial.sync.max.threads") ||
              (props_get(s, "capture.mode") && !strcmp(props_get(s, "capture.mode"), "oplog"));
    if (!props_get(s, "debezium.compatibility")) {
        fprintf(f, "# %s\n",
                v1 ? "Debezium 1.x properties: the 1.9 event layout."
                   : "Debezium 2.x/3.x properties: the 3.x event layout (Debezium "
                     "2.0-2.5 events differ from it: docs/MIGRATING.md).");
        fprintf(f, "debezium.compatibility: \"%s\"\n", v1 ? "1.9" : "3.x");
    }
}

/* emit(): the connector's name, the first element of its offsets keys
 * (--name, the connector JSON's, or Debezium Server's sink type). */
static void emit_name(struct conv *c, struct out *o)
{
    FILE *f = o->f;
    const struct props *s = &c->src;

    /* the connector's name: the offsets key ["<name>",{...}] */
    const char *name = c->cli_name ? c->cli_name : c->name ? c->name : props_get(s, "name");
    if (!name && !c->server) {
        /* PUT/GET /connectors/NAME/config holds no name: without it the
         * offsets key differs from the connector's and the start snapshots */
        fputs("# WARNING: the input names no connector: set `name:` to the connector's name\n"
              "# (the first element of its offsets keys), or the first start takes a new "
              "snapshot.\n",
              f);
        fprintf(stderr,
                "mongocdc config convert: WARNING: the input holds no connector \"name\" (a "
                "/connectors/NAME/config body?): set `name:` to the connector's name, or pass "
                "--name NAME; without it name defaults to topic.prefix, no stored position is "
                "found and the first start takes a new snapshot\n");
    }
    if (name) {
        fputs("# The connector's name: the offsets key is [name, partition].\n", f);
        out_carry(o, "name", name);
    } else if (c->server) {
        /* Debezium Server names its engine after the sink type, which is the
         * first element of its offsets keys (["kafka",{...}]) */
        const char *engine = c->sink_type ? c->sink_type : "kafka";
        fputs("# Debezium Server names its engine after the sink type: the first element of "
              "its\n# offsets keys (check: mongocdc offsets show --from debezium-file:PATH).\n",
              f);
        out_carry(o, "name", engine);
        fprintf(stderr,
                "mongocdc config convert: note: name set to \"%s\", the sink type Debezium "
                "Server names its engine after; check it against the first element of the keys "
                "`mongocdc offsets show --from debezium-file:PATH` lists\n",
                engine);
    }
}

/* emit(): the connector's properties the option table knows, carried
 * (Debezium 1.x aliases under their current name), and those without a
 * counterpart (transforms, converters) dropped or refused. */
static void emit_connector_keys(struct conv *c, struct out *o)
{
    FILE *f = o->f;
    const struct props *s = &c->src;

    for (size_t i = 0; i < s->count; i++) {
        const char *k = s->keys[i], *cur = legacy_current(k);
        if (special(k))
            continue;
        if (!cur) {
            out_carry(o, k, s->values[i]);
        } else if (props_get(s, cur)) {
            /* as Debezium: the current name wins over its deprecated alias */
            char why[128];
            snprintf(why, sizeof why, "Debezium 1.x name of %s, which the input also sets", cur);
            out_drop(o, k, why);
        } else {
            fprintf(f, "# %s: Debezium 1.x name of %s\n", k, cur);
            out_carry(o, cur, s->values[i]);
        }
    }
    for (size_t i = 0; i < s->count; i++) {
        const char *k = s->keys[i];
        if (!strncmp(k, "transforms", 10) || !strncmp(k, "predicates", 10))
            out_drop(o, k, "single message transforms do not exist in mongocdc");
        else if (!strcmp(k, "tasks.max"))
            fprintf(f, "# tasks.max: mongocdc runs one capture task per replica set or shard\n");
        else if ((!strcmp(k, "key.converter") || !strcmp(k, "value.converter")) &&
                 strcmp(s->values[i], "org.apache.kafka.connect.json.JsonConverter") != 0)
            out_refuse(o, k, s->values[i],
                       "mongocdc writes JsonConverter's JSON only: consumers of these topics "
                       "expect other bytes");
        else if (!strcmp(k, "header.converter") ||
                 (!strncmp(k, "key.converter.", 14) && strcmp(k, "key.converter.schemas.enable")) ||
                 (!strncmp(k, "value.converter.", 16) &&
                  strcmp(k, "value.converter.schemas.enable")) ||
                 !strncmp(k, "header.converter.", 17))
            out_drop(o, k, "converter settings other than schemas.enable");
    }
}

/* emit(): the converters' schemas.enable (JsonConverter's default is true,
 * mongocdc's false). */
static void emit_converters(struct conv *c, struct out *o)
{
    FILE *f = o->f;
    const struct props *s = &c->src;

    /* converters: JsonConverter's schemas.enable default is true, mongocdc's false */
    const char *ks = c->key_schemas ? c->key_schemas : props_get(s, "key.converter.schemas.enable");
    const char *vs =
        c->value_schemas ? c->value_schemas : props_get(s, "value.converter.schemas.enable");
    if (!ks)
        ks = props_get(&c->worker, "key.converter.schemas.enable");
    if (!vs)
        vs = props_get(&c->worker, "value.converter.schemas.enable");
    if (!ks || !vs) {
        fputs(c->server ? "# schemas.enable not given: JsonConverter's default (true) is what "
                          "Debezium Server\n# wrote; make it match "
                          "debezium.format.key/value.schemas.enable.\n"
                        : "# schemas.enable not given: JsonConverter's default (true) is what "
                          "Debezium wrote; make it match your Connect worker.\n",
              f);
        fprintf(stderr,
                "mongocdc config convert: note: %s.converter.schemas.enable not found: "
                "JsonConverter's default (true) written; check the worker's setting "
                "(or pass --worker)\n",
                !ks ? "key" : "value");
    }
    out_carry(o, "key.converter.schemas.enable", ks ? ks : "true");
    out_carry(o, "value.converter.schemas.enable", vs ? vs : "true");
}

/* emit(): where the offsets are kept: a file to import once (Debezium
 * Server's or a standalone worker's), or Kafka Connect's offsets topic. */
static void emit_offsets_storage(struct conv *c, struct out *o)
{
    FILE *f = o->f;
    const struct props *s = &c->src;

    /* offsets */
    const char *storage = props_get(s, "offset.storage");
    if (c->server && (!storage || strstr(storage, "FileOffsetBackingStore"))) {
        const char *file = props_get(s, "offset.storage.file.filename");
        fputs("# Debezium Server kept offsets in a FileOffsetBackingStore file; import them "
              "once with:\n",
              f);
        fprintf(f, "#   mongocdc offsets copy -c FILE --from debezium-file:%s --to store\n",
                file ? file : "PATH");
        fputs("offsets.storage: \"file\"\noffsets.file.path: \"mongocdc-offsets.json\"\n", f);
        fprintf(stderr,
                "mongocdc config convert: note: import the offsets with `mongocdc "
                "offsets copy -c FILE --from debezium-file:%s --to store`\n",
                file ? file : "PATH");
    } else if (!c->server && !props_get(s, "offsets.storage.topic") &&
               !props_get(&c->worker, "offset.storage.topic") &&
               props_get(&c->worker, "offset.storage.file.filename")) {
        /* connect-standalone: its offsets file has Debezium Server's format */
        const char *file = props_get(&c->worker, "offset.storage.file.filename");
        fputs("# A standalone Kafka Connect worker kept offsets in a file (the same Java format "
              "as\n# Debezium Server's); import them once with:\n",
              f);
        fprintf(f, "#   mongocdc offsets copy -c FILE --from debezium-file:%s --to store\n", file);
        fputs("offsets.storage: \"file\"\noffsets.file.path: \"mongocdc-offsets.json\"\n", f);
        fprintf(stderr,
                "mongocdc config convert: note: the worker keeps offsets in %s: import them "
                "with `mongocdc offsets copy -c FILE --from debezium-file:%s --to store`\n",
                file, file);
    } else if (c->server && !strstr(storage, "KafkaOffsetBackingStore")) {
        out_drop(o, "offset.storage",
                 "only file and Kafka offset stores have a mongocdc counterpart");
    } else {
        /* Debezium Server's KafkaOffsetBackingStore writes to the cluster of
         * debezium.source.bootstrap.servers; mongocdc keeps its offsets
         * topic on the kafka: cluster, the sink's */
        const char *obs = c->server ? props_get(s, "bootstrap.servers") : NULL;
        const char *sbs = props_get(&c->kafka, "bootstrap.servers");
        if (obs && !sbs) {
            props_add(&c->kafka, "bootstrap.servers", 17, obs, strlen(obs));
        } else if (obs && strcmp(obs, sbs) != 0) {
            char why[600];
            snprintf(why, sizeof why,
                     "the offsets topic is on %s, not on the sink's cluster %s, where mongocdc "
                     "keeps its offsets topic: copy the entries over first (offsets export "
                     "with kafka.bootstrap.servers %s, then offsets import)",
                     obs, sbs, obs);
            out_drop(o, "debezium.source.bootstrap.servers", why);
        }
        /* Kafka 3.5+ (KIP-618): a connector may name its own offsets topic */
        const char *topic = c->server ? props_get(s, "offset.storage.topic")
                                      : props_get(s, "offsets.storage.topic");
        if (!topic && !c->server)
            topic = props_get(&c->worker, "offset.storage.topic");
        fputs("# Kafka Connect's offsets topic, read and written in its own format.\n", f);
        fputs("offsets.storage: \"kafka\"\n", f);
        fputs("offsets.topic: ", f);
        yaml_str(f, topic ? topic : "connect-offsets");
        fputc('\n', f);
        if (!topic)
            fprintf(stderr, "mongocdc config convert: note: offsets.topic set to "
                            "connect-offsets; use the worker's offset.storage.topic\n");
    }
}

/* emit(): the offsets' flush interval and timeout; other offset.* settings
 * are dropped. */
static void emit_offsets_flush(struct conv *c, struct out *o)
{
    FILE *f = o->f;
    const struct props *s = &c->src;

    const char *flush = props_get(s, "offset.flush.interval.ms");
    if (!flush)
        flush = props_get(&c->worker, "offset.flush.interval.ms");
    if (flush && !strcmp(flush, "0")) {
        fputs("# offset.flush.interval.ms 0 (flush after every batch): the shortest mongocdc "
              "interval\n",
              f);
        flush = "1";
    }
    if (flush)
        out_carry(o, "offsets.flush.interval.ms", flush);
    const char *flush_to = props_get(s, "offset.flush.timeout.ms");
    if (!flush_to)
        flush_to = props_get(&c->worker, "offset.flush.timeout.ms");
    if (flush_to)
        out_carry(o, "offsets.flush.timeout.ms", flush_to);
    for (size_t i = 0; i < s->count; i++) {
        static const char *const used[] = {
            "offset.storage",           "offset.storage.file.filename", "offset.storage.topic",
            "offset.flush.interval.ms", "offset.flush.timeout.ms",      NULL};
        const char *k = s->keys[i];
        bool known = false;
        for (const char *const *u = used; *u; u++)
            known |= !strcmp(k, *u);
        if (!known && !strncmp(k, "offset.", 7))
            out_drop(o, k, "a Kafka Connect offset store setting without a mongocdc counterpart");
    }
}

/* emit(): the sink type and the log level. */
static void emit_sink(struct conv *c, struct out *o)
{
    FILE *f = o->f;

    /* sink */
    if (c->sink_type && strcmp(c->sink_type, "kafka") != 0) {
        out_drop(o, "debezium.sink.type",
                 "mongocdc publishes to Kafka (or a file or stdout); "
                 "stdout written");
        fputs("sink.type: \"stdout\"\n", f);
    } else {
        fputs("sink.type: \"kafka\"\n", f);
    }
    if (c->log_level) {
        const char *l = !strcasecmp(c->log_level, "DEBUG") || !strcasecmp(c->log_level, "TRACE")
                            ? "debug"
                        : !strcasecmp(c->log_level, "WARN")  ? "warn"
                        : !strcasecmp(c->log_level, "ERROR") ? "error"
                                                             : "info";
        fprintf(f, "log.level: \"%s\"\n", l);
    }
}

/* emit(): the kafka: map, from the producer settings of every source the
 * input has; Java producer keys without a librdkafka counterpart dropped. */
static void emit_kafka(struct conv *c, struct out *o)
{
    FILE *f = o->f;
    const struct props *s = &c->src;

    /* kafka: the producer settings (Server: debezium.sink.kafka.producer.*;
     * Connect: the worker's bootstrap.servers and producer.*, the
     * connector's producer.override.*) */
    for (size_t i = 0; i < c->worker.count; i++) {
        const char *k = c->worker.keys[i];
        if (!strcmp(k, "bootstrap.servers"))
            props_add(&c->kafka, k, strlen(k), c->worker.values[i], strlen(c->worker.values[i]));
        else if (!strncmp(k, "producer.", 9))
            props_add(&c->kafka, k + 9, strlen(k + 9), c->worker.values[i],
                      strlen(c->worker.values[i]));
    }
    for (size_t i = 0; i < s->count; i++)
        if (!strncmp(s->keys[i], "producer.override.", 18))
            props_add(&c->kafka, s->keys[i] + 18, strlen(s->keys[i] + 18), s->values[i],
                      strlen(s->values[i]));
    if (!props_get(&c->kafka, "bootstrap.servers")) {
        props_add(&c->kafka, "bootstrap.servers", 17, "localhost:9092", 14);
        fputs("# bootstrap.servers was not in the input: localhost:9092 is a placeholder.\n", f);
        fprintf(stderr, "mongocdc config convert: note: kafka bootstrap.servers not found: "
                        "localhost:9092 written (pass --worker, or edit it)\n");
    }
    java_producer_keys(o->f, &c->kafka);
    for (size_t i = 0; i < c->kafka.count; i++) {
        if (!librdkafka_key(c->kafka.keys[i])) {
            char key[300];
            snprintf(key, sizeof key, "producer %s", c->kafka.keys[i]);
            out_drop(o, key,
                     "a Java producer setting without a librdkafka counterpart here; "
                     "see librdkafka's CONFIGURATION.md");
        }
    }
    fputs("kafka:\n", f);
    for (size_t i = 0; i < c->kafka.count; i++) {
        const char *k = c->kafka.keys[i];
        if (!librdkafka_key(k))
            continue;
        fprintf(f, "  %s: ", !strcmp(k, "sasl.mechanism") ? "sasl.mechanisms" : k);
        yaml_str(f, c->kafka.values[i]);
        fputc('\n', f);
    }
}

/* Writes the YAML of conversion c to o, section by section; input names the
 * file converted. Refusals and drops are counted in o and named on stderr. */
static void emit(struct conv *c, struct out *o, const char *input)
{
    emit_preamble(c, o, input);
    emit_name(c, o);
    emit_connector_keys(c, o);
    emit_converters(c, o);
    emit_offsets_storage(c, o);
    emit_offsets_flush(c, o);
    emit_sink(c, o);
    emit_kafka(c, o);
}

static bool load_server(struct conv *c, const struct props *all)
{
    bool any = false;
    for (size_t i = 0; i < all->count; i++) {
        const char *k = all->keys[i], *v = all->values[i];
        if (!strncmp(k, "debezium.source.", 16)) {
            props_add(&c->src, k + 16, strlen(k + 16), v, strlen(v));
            any = true;
        } else if (!strncmp(k, "debezium.sink.kafka.producer.", 29)) {
            props_add(&c->kafka, k + 29, strlen(k + 29), v, strlen(v));
        } else if (!strcmp(k, "debezium.sink.type")) {
            c->sink_type = v;
        } else if (!strcmp(k, "debezium.format.key.schemas.enable")) {
            c->key_schemas = v;
        } else if (!strcmp(k, "debezium.format.value.schemas.enable")) {
            c->value_schemas = v;
        } else if (!strcmp(k, "quarkus.log.level")) {
            c->log_level = v;
        } else if (!strcmp(k, "debezium.format.key") || !strcmp(k, "debezium.format.value")) {
            /* json is JsonConverter: what mongocdc writes; any other format
             * (avro, protobuf, cloudevents, ...) is refused in emit() */
            if (strcmp(v, "json") != 0)
                props_add(&c->formats, k, strlen(k), v, strlen(v));
        } else {
            const char *why =
                !strncmp(k, "debezium.format.", 16) ? "mongocdc writes JsonConverter's JSON"
                : !strncmp(k, "debezium.transforms", 19) || !strncmp(k, "debezium.predicates", 19)
                    ? "single message transforms do not exist in mongocdc"
                    : "no mongocdc counterpart";
            props_add(&c->dropped, k, strlen(k), why, strlen(why));
        }
    }
    return any;
}

/* config_cli_main()'s arguments into *file, *worker and *cli_name (borrowed
 * from argv). Returns -1 to go on, else the exit code: 0 after --help, 2 on
 * a usage error (the usage written). */
static int parse_args(int argc, char **argv, const char **file, const char **worker,
                      const char **cli_name)
{
    if (argc < 2 || strcmp(argv[1], "convert") != 0) {
        fputs("usage: mongocdc config convert FILE [--worker WORKER.properties] [--name NAME]\n"
              "Converts a Kafka Connect connector JSON ({\"name\": ..., \"config\": {...}}) or a\n"
              "Debezium Server application.properties into mongocdc's YAML on stdout; every\n"
              "key it cannot carry is named on stderr. --worker: the Kafka Connect worker's\n"
              "properties (bootstrap.servers, offset.storage.topic or a standalone worker's\n"
              "offset.storage.file.filename, converters, producer.*). --name: the connector's\n"
              "name, for a bare config object (/connectors/NAME/config) that holds none.\n"
              "Exit 0 converted; 1 unreadable input, or a setting mongocdc cannot stand in\n"
              "for (another connector class, a converter other than JsonConverter); 2 usage.\n",
              argc >= 2 && !strcmp(argv[1], "--help") ? stdout : stderr);
        return argc >= 2 && !strcmp(argv[1], "--help") ? 0 : 2;
    }
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--worker") && i + 1 < argc)
            *worker = argv[++i];
        else if (!strcmp(argv[i], "--name") && i + 1 < argc)
            *cli_name = argv[++i];
        else if (argv[i][0] != '-' && !*file)
            *file = argv[i];
        else {
            fprintf(stderr, "mongocdc config convert: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!*file) {
        fputs("mongocdc config convert: FILE is required\n", stderr);
        return 2;
    }
    return -1;
}

int config_cli_main(int argc, char **argv)
{
    const char *file = NULL, *worker = NULL, *cli_name = NULL;
    int usage = parse_args(argc, argv, &file, &worker, &cli_name);

    if (usage >= 0)
        return usage;
    size_t len;
    char *text = slurp(file, &len);
    if (!text) {
        fprintf(stderr, "mongocdc config convert: %s: %s\n", file, strerror(errno));
        return 1;
    }
    struct conv c = {0};
    c.cli_name = cli_name;
    struct out o = {stdout, 0, 0, 0};
    struct props all = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    int rc = 0;
    size_t k = 0;
    while (k < len && isspace((unsigned char)text[k]))
        k++;
    if (worker) {
        size_t wl;
        char *wt = slurp(worker, &wl);
        if (!wt) {
            fprintf(stderr, "mongocdc config convert: %s: %s\n", worker, strerror(errno));
            free(text);
            return 1;
        }
        parse_properties(wt, wl, &c.worker);
        free(wt);
    }
    if (k < len && text[k] == '{') {
        if (!parse_connector_json(text, len, &c.src, &c.name, &err)) {
            fprintf(stderr, "mongocdc config convert: %s: %s\n", file, err.msg);
            rc = 1;
        }
    } else {
        parse_properties(text, len, &all);
        c.server = true;
        if (!load_server(&c, &all)) {
            fprintf(stderr,
                    "mongocdc config convert: %s: neither a connector JSON nor a "
                    "Debezium Server application.properties (no debezium.source.*)\n",
                    file);
            rc = 1;
        }
    }
    if (rc == 0) {
        emit(&c, &o, file);
        fprintf(stderr, "mongocdc config convert: %d key%s not carried%s\n", o.dropped,
                o.dropped == 1 ? "" : "s",
                o.unsupported ? "; some carried keys are not supported yet (see above)" : "");
        if (o.refused) {
            fprintf(stderr,
                    "mongocdc config convert: %d setting%s mongocdc cannot stand in for "
                    "(ERROR above): not converted\n",
                    o.refused, o.refused == 1 ? "" : "s");
            rc = 1;
        }
    }
    props_free(&all);
    props_free(&c.src);
    props_free(&c.kafka);
    props_free(&c.worker);
    props_free(&c.dropped);
    props_free(&c.formats);
    free(c.name);
    free(text);
    return rc;
}

/*
 * signals/cli.c: `mongocdc signal -c FILE <type> [args]`, which writes one
 * Debezium signal (debezium-format.md §5.3) through the first channel of
 * signal.enabled.channels that can carry it, so nobody hand-writes signal
 * documents. Under read.only the source channel is passed over: that mode
 * writes nothing to MongoDB. Exit 0 sent, 1 failed, 2 usage.
 */
#include "signals/signals.h"

#include <errno.h>
#include <fcntl.h>
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/log.h"
#include "common/uuid.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "signals/signals_internal.h"

static void usage(FILE *out)
{
    fputs("usage: mongocdc signal -c FILE execute-snapshot DB.COLL [DB.COLL ...] [--blocking]\n"
          "                                [--filter DB.COLL=JSON]...\n"
          "       mongocdc signal -c FILE stop-snapshot [DB.COLL ...]\n"
          "       mongocdc signal -c FILE pause-snapshot | resume-snapshot\n"
          "       mongocdc signal -c FILE log MESSAGE     ({} in MESSAGE: the offset)\n"
          "Sends the signal through the first channel of signal.enabled.channels that can\n"
          "carry it (source: an insert into signal.data.collection; kafka: a record on the\n"
          "signal topic keyed topic.prefix; file: a line appended to signal.file) and prints\n"
          "its id. Exit 0 sent, 1 failed, 2 usage or configuration.\n",
          out);
}

/* Builds the data document of the command (argv after the type). Returns
 * false (message printed) on a usage error. */
static bool build_data(enum mcdc_signal_type type, int argc, char **argv, bson_t *data)
{
    bson_t colls, conds;
    int n = 0, nc = 0;
    bool blocking = false;
    if (type == MCDC_SIGNAL_LOG) {
        if (argc != 1) {
            fprintf(stderr, "mongocdc signal: log takes one MESSAGE argument\n");
            return false;
        }
        BSON_APPEND_UTF8(data, "message", argv[0]);
        return true;
    }
    if (type == MCDC_SIGNAL_PAUSE_SNAPSHOT || type == MCDC_SIGNAL_RESUME_SNAPSHOT) {
        if (argc != 0) {
            fprintf(stderr, "mongocdc signal: %s takes no arguments\n",
                    mcdc_signal_type_name(type));
            return false;
        }
        BSON_APPEND_UTF8(data, "type", "incremental");
        return true;
    }
    BSON_APPEND_ARRAY_BEGIN(data, "data-collections", &colls);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (type == MCDC_SIGNAL_EXECUTE_SNAPSHOT && strcmp(a, "--blocking") == 0) {
            blocking = true;
        } else if (type == MCDC_SIGNAL_EXECUTE_SNAPSHOT && strcmp(a, "--filter") == 0) {
            i++; /* checked in the second pass */
        } else if (a[0] == '-') {
            fprintf(stderr, "mongocdc signal: unknown option '%s' for %s\n", a,
                    mcdc_signal_type_name(type));
            return false;
        } else {
            char k[16];
            snprintf(k, sizeof k, "%d", n++);
            bson_append_utf8(&colls, k, -1, a, -1);
        }
    }
    bson_append_array_end(data, &colls);
    if (type == MCDC_SIGNAL_EXECUTE_SNAPSHOT && n == 0) {
        fprintf(stderr, "mongocdc signal: execute-snapshot needs at least one DB.COLL\n");
        return false;
    }
    BSON_APPEND_UTF8(data, "type", blocking ? "blocking" : "incremental");
    if (type != MCDC_SIGNAL_EXECUTE_SNAPSHOT)
        return true;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--filter") != 0)
            continue;
        const char *spec = i + 1 < argc ? argv[i + 1] : NULL;
        const char *eq = spec ? strchr(spec, '=') : NULL;
        bson_t probe;
        bson_error_t berr;
        if (!eq || eq == spec) {
            fprintf(stderr, "mongocdc signal: --filter needs DB.COLL=JSON\n");
            return false;
        }
        if (!bson_init_from_json(&probe, eq + 1, -1, &berr)) {
            fprintf(stderr, "mongocdc signal: --filter %.*s: not a JSON document: %s\n",
                    (int)(eq - spec), spec, berr.message);
            return false;
        }
        bson_destroy(&probe);
        if (nc == 0)
            BSON_APPEND_ARRAY_BEGIN(data, "additional-conditions", &conds);
        char k[16], *coll = xstrndup(spec, (size_t)(eq - spec));
        bson_t c;
        snprintf(k, sizeof k, "%d", nc++);
        bson_append_document_begin(&conds, k, -1, &c);
        BSON_APPEND_UTF8(&c, "data-collection", coll);
        BSON_APPEND_UTF8(&c, "filter", eq + 1);
        bson_append_document_end(&conds, &c);
        free(coll);
        i++;
    }
    if (nc > 0)
        bson_append_array_end(data, &conds);
    return true;
}

static bool send_source(const struct mcdc_config *cfg, const char *id, const char *type,
                        const bson_t *data, struct mcdc_error *err)
{
    const char *ns = cfg->signal_data_collection, *dot = strchr(ns, '.');
    char *db = xstrndup(ns, (size_t)(dot - ns));
    bson_error_t be;
    mongoc_uri_t *uri = mongoc_uri_new_with_error(cfg->connection_string, &be);
    mongoc_client_t *client = NULL;
    bool ok = false;
    if (uri) {
        if (!mongoc_uri_has_option(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS))
            mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS, 10000);
        client = mongoc_client_new_from_uri_with_error(uri, &be);
    }
    if (client) {
        mongoc_client_set_appname(client, "mongocdc-signal");
        mongoc_collection_t *coll = mongoc_client_get_collection(client, db, dot + 1);
        bson_t doc = BSON_INITIALIZER;
        BSON_APPEND_UTF8(&doc, "_id", id);
        BSON_APPEND_UTF8(&doc, "type", type);
        BSON_APPEND_DOCUMENT(&doc, "data", data);
        ok = mongoc_collection_insert_one(coll, &doc, NULL, NULL, &be);
        bson_destroy(&doc);
        mongoc_collection_destroy(coll);
        mongoc_client_destroy(client);
    }
    if (!ok) {
        char *why = config_redact_text(be.message, cfg->connection_string);
        mcdc_error_set(err, MCDC_ERR_MONGO, (int)be.code, "insert into %s: %s", ns, why);
        free(why);
    }
    mongoc_uri_destroy(uri);
    free(db);
    return ok;
}

static void cli_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    *(rd_kafka_resp_err_t *)opaque = m->err;
}

static bool send_kafka(const struct mcdc_config *cfg, const char *json, struct mcdc_error *err)
{
    char tbuf[512], errstr[512];
    const char *topic = sig_kafka_topic(cfg, tbuf, sizeof tbuf);
    rd_kafka_resp_err_t result = RD_KAFKA_RESP_ERR__IN_PROGRESS;
    rd_kafka_conf_t *conf = mcdc_kafka_client_conf(cfg, err);
    if (!conf)
        return false;
    if ((cfg->signal_kafka_bootstrap && !mcdc_kafka_set(conf, cfg, "", "bootstrap.servers",
                                                        cfg->signal_kafka_bootstrap, NULL, err)) ||
        !mcdc_kafka_set(conf, cfg, "", "message.timeout.ms", "15000", NULL, err)) {
        rd_kafka_conf_destroy(conf);
        return false;
    }
    rd_kafka_conf_set_dr_msg_cb(conf, cli_dr);
    rd_kafka_conf_set_opaque(conf, &result);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        return mcdc_error_set(err, MCDC_ERR_KAFKA, 0, "%s", errstr);
    }
    const char *key = cfg->topic_prefix;
    rd_kafka_resp_err_t e = rd_kafka_producev(
        rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(0),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_KEY(key, strlen(key)),
        RD_KAFKA_V_VALUE((void *)json, strlen(json)), RD_KAFKA_V_END);
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_flush(rk, 20000);
        e = result == RD_KAFKA_RESP_ERR__IN_PROGRESS ? RD_KAFKA_RESP_ERR__TIMED_OUT : result;
    }
    rd_kafka_destroy(rk);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        return mcdc_error_set(err, MCDC_ERR_KAFKA, e, "produce to %s: %s", topic,
                              rd_kafka_err2str(e));
    return true;
}

static bool send_file(const struct mcdc_config *cfg, const char *json, struct mcdc_error *err)
{
    const char *path = cfg->signal_file;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return mcdc_error_set(err, MCDC_ERR_IO, errno, "open %s: %s", path, strerror(errno));
    /* the daemon rewrites the file under the same lock */
    char *line = xasprintf("%s\n", json);
    size_t len = strlen(line);
    bool ok = flock(fd, LOCK_EX) == 0 && write(fd, line, len) == (ssize_t)len;
    int e = errno;
    free(line);
    if (close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (!ok)
        return mcdc_error_set(err, MCDC_ERR_IO, e, "append to %s: %s", path, strerror(e));
    return true;
}

static const enum mcdc_signal_type cli_types[] = {
    MCDC_SIGNAL_EXECUTE_SNAPSHOT, MCDC_SIGNAL_STOP_SNAPSHOT, MCDC_SIGNAL_PAUSE_SNAPSHOT,
    MCDC_SIGNAL_RESUME_SNAPSHOT, MCDC_SIGNAL_LOG};

int signal_cli_main(int argc, char **argv)
{
    const char *path = NULL;
    int i = 1;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return MCDC_EXIT_OK;
        } else if ((strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--config") == 0) &&
                   i + 1 < argc) {
            path = argv[++i];
        } else if (strncmp(argv[i], "--config=", 9) == 0) {
            path = argv[i] + 9;
        } else {
            break;
        }
    }
    if (!path || i >= argc) {
        fprintf(stderr, "mongocdc signal: %s\n", !path ? "needs -c FILE" : "needs a signal type");
        usage(stderr);
        return MCDC_EXIT_USAGE;
    }
    bool known = false;
    enum mcdc_signal_type type = MCDC_SIGNAL_LOG;
    for (size_t t = 0; t < sizeof cli_types / sizeof cli_types[0]; t++)
        if (strcmp(argv[i], mcdc_signal_type_name(cli_types[t])) == 0) {
            type = cli_types[t];
            known = true;
        }
    if (!known) {
        fprintf(stderr, "mongocdc signal: unknown signal type '%s'\n", argv[i]);
        usage(stderr);
        return MCDC_EXIT_USAGE;
    }
    bson_t data = BSON_INITIALIZER;
    if (!build_data(type, argc - i - 1, argv + i + 1, &data)) {
        bson_destroy(&data);
        return MCDC_EXIT_USAGE;
    }
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_config *cfg = config_load(path, stderr, &err);
    if (!cfg) {
        fprintf(stderr, "mongocdc signal: %s\n", err.msg);
        bson_destroy(&data);
        return MCDC_EXIT_USAGE;
    }
    char id[37];
    mcdc_uuid_v4(id);
    const char *tname = mcdc_signal_type_name(type);
    char *json = sig_to_json(id, tname, &data);
    const char *used = NULL;
    bool ok = false;
    for (size_t c = 0; c < cfg->signal_channels.count && !used; c++) {
        const char *ch = cfg->signal_channels.items[c];
        if (strcmp(ch, "source") == 0) {
            if (!cfg->signal_data_collection || !strchr(cfg->signal_data_collection, '.'))
                continue; /* no signal collection: the source channel carries nothing */
            if (cfg->read_only)
                continue; /* read.only: nothing is written to MongoDB, not even a signal */
            used = "source";
            ok = send_source(cfg, id, tname, &data, &err);
        } else if (strcmp(ch, "kafka") == 0) {
            used = "kafka";
            ok = send_kafka(cfg, json, &err);
        } else if (strcmp(ch, "file") == 0) {
            used = "file";
            ok = send_file(cfg, json, &err);
        }
    }
    int rc = MCDC_EXIT_OK;
    if (!used) {
        fprintf(stderr,
                "mongocdc signal: %s: no channel can carry a signal (signal.enabled.channels "
                "source needs signal.data.collection and read.only false; or enable kafka or "
                "file)\n",
                path);
        rc = MCDC_EXIT_FAILURE;
    } else if (!ok) {
        fprintf(stderr, "mongocdc signal: %s through the %s channel failed: %s\n", tname, used,
                err.msg);
        rc = MCDC_EXIT_FAILURE;
    } else {
        printf("%s\n", id);
        fprintf(stderr, "mongocdc signal: %s sent through the %s channel\n", tname, used);
    }
    free(json);
    bson_destroy(&data);
    config_free(cfg);
    return rc;
}

/*
 * tools/offsets_cli: `mongocdc offsets`, the stored positions by hand
 * (docs/MIGRATING.md, debezium-format.md §4).
 *
 *   show   [--from EP]                           every stored partition, decoded
 *   export [--from EP] [-o FILE]                 JSON lines {"key":"...","value":{...}}
 *   import [--to EP] [-i FILE] [--force]         the same lines back
 *   copy   --from EP --to EP [--force]           every entry from one store to another
 *   set    [--to EP] [--rs RS | --key KEY] (--timestamp T | --resume-token TOKEN)
 *   reset  [--to EP] [--rs RS | --key KEY]       delete a task's position
 *
 * EP (an offsets store): `store` (the configured one, the default),
 * `file:PATH` (a mongocdc offsets file), `kafka:TOPIC` (a Kafka Connect
 * offsets topic, e.g. connect-offsets, through the configuration's kafka:
 * map) or `debezium-file:PATH` (a FileOffsetBackingStore file of Debezium
 * Server or the embedded engine, offsets/dbzfile.h). Keys and values are
 * copied byte for byte: the Kafka Connect key ["<name>",{...}] is the same
 * in all four.
 *
 * Writing into a mongocdc file store takes the daemon's lock ("<path>.lock",
 * store_file.c): while a daemon runs on that file the command is refused.
 * A Kafka topic and a Debezium file have no such lock (Kafka Connect keeps
 * none either): the command says so on stderr, and the operator stops the
 * writer first (a running writer overwrites the change at its next flush).
 *
 * Values written by import and copy must parse as offsets (position_from_json)
 * and must not be older than the position the target stores under the same
 * key, unless --force. `set` writes mongocdc's value form (position_to_json),
 * which Debezium 2.7+ and mongocdc read; `set` and `reset` are the only
 * writes allowed to move a position backwards.
 *
 * Thread: main.
 */
#include "tools/tools.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bson/bson.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "offsets/dbzfile.h"
#include "offsets/offsets.h"
#include "offsets/offsets_internal.h"
#include "tools/tools_internal.h"

static void usage(FILE *out)
{
    fputs("usage: mongocdc offsets show   -c FILE [--from EP]\n"
          "       mongocdc offsets export -c FILE [--from EP] [-o OUT]\n"
          "       mongocdc offsets import -c FILE [--to EP] [-i IN] [--force]\n"
          "       mongocdc offsets copy   -c FILE --from EP --to EP [--force] [--all]\n"
          "       mongocdc offsets set    -c FILE [--to EP] [--rs RS | --key KEY]\n"
          "                               (--timestamp SEC[:INC] | --timestamp ISO8601 |\n"
          "                                --resume-token TOKEN)\n"
          "       mongocdc offsets reset  -c FILE [--to EP] [--rs RS | --key KEY]\n"
          "EP is an offsets store: store (the configured one, default), file:PATH (a\n"
          "mongocdc offsets file), kafka:TOPIC (e.g. connect-offsets, through the kafka:\n"
          "settings) or debezium-file:PATH (Debezium Server's / the embedded engine's\n"
          "offset.storage.file.filename). Entries are keyed [\"<name>\",{partition}] as\n"
          "Kafka Connect writes them, name being the `name` option (default topic.prefix);\n"
          "show, export and copy take this source's entries (its name or topic.prefix)\n"
          "and leave other connectors' out unless --all;\n"
          "without --key, set/reset address this configuration's task: --rs RS the\n"
          "partition {rs, server_id} (a shard's task), else the configured layout's\n"
          "partition of the replica set or merged stream (3.x {server_id}; 1.9 {rs,\n"
          "server_id}, rs from the connection string's replicaSet). set writes the value\n"
          "the layout's Debezium reads (1.9: hex token).\n"
          "TOKEN: the _data hex string, Base64 of the token's BSON (Debezium 2.7+ offsets)\n"
          "or the token document as JSON. A file store is refused while a daemon holds it;\n"
          "stop Kafka Connect or Debezium Server yourself before writing their offsets.\n"
          "Exit 0 done, 1 failed, 2 usage or configuration.\n",
          out);
}

/* ---- show ---- */

static void show_entry(FILE *out, const struct kv *e, const struct mcdc_config *cfg)
{
    fprintf(out, "%s\n", e->key);
    if (!key_of_source(cfg, e->key)) {
        /* a shared offsets topic: not this source's, never touched */
        fputs("  another connector's entry, not used\n", out);
        return;
    }
    bool rs_partition = strstr(e->key, "{\"rs\":") != NULL;
    bson_error_t berr;
    bson_t *doc = bson_new_from_json((const uint8_t *)e->value, -1, &berr);
    const char *token_form = "none";
    bson_iter_t it;
    if (doc && bson_iter_init_find(&it, doc, "resume_token") && BSON_ITER_HOLDS_UTF8(&it)) {
        const char *t = bson_iter_utf8(&it, NULL);
        size_t n = strlen(t);
        token_form = n > 0 && strspn(t, "0123456789abcdefABCDEF") == n
                         ? "_data hex (Debezium 1.x-2.6 form)"
                         : "Base64 of BSON (Debezium 2.7+ form)";
    }
    if (doc)
        bson_destroy(doc);
    fprintf(out, "  writer:        %s\n", offset_writer_name(offset_value_writer(e->value)));
    /* the layout that writes this partition form (debezium-format.md §4.1);
     * per-shard tasks use {rs, server_id} in both */
    fprintf(out, "  layout:        %s\n",
            rs_partition ? "1.9: partition {rs, server_id} (Debezium 1.x-2.5; mongocdc 1.9, or a "
                           "per-shard task)"
                         : "3.x: partition {server_id} (Debezium 2.6+; mongocdc 3.x)");
    fprintf(out, "  resume token:  %s\n", token_form);
    if (key_adopted(cfg, e->key))
        fputs("  this config:   yes (its tasks adopt the newest of their partition forms)\n", out);
    else
        fputs("  this config:   no (not a key its tasks look up: check `name`, topic.prefix, "
              "the replica set and debezium.compatibility)\n",
              out);
    struct mcdc_position pos;
    position_init(&pos);
    struct mcdc_error err = MCDC_ERROR_INIT;
    if (!position_from_json(e->value, &pos, &err)) {
        fprintf(out, "  value:         %s\n  UNUSABLE:      %s\n", e->value, err.msg);
        return;
    }
    int64_t tsec = pos.sec, tinc = pos.ord;
    if (tsec <= 0)
        token_time(&pos, &tsec, &tinc);
    fputs("  time:          ", out);
    print_time(out, tsec);
    fprintf(out, " (sec %" PRId64 ", ord %" PRId64 ")%s\n", tsec, tinc,
            pos.sec <= 0 && tsec > 0 ? " from the resume token" : "");
    bson_iter_t ti;
    if (pos.has_resume_token && bson_iter_init_find(&ti, &pos.resume_token, "_data") &&
        BSON_ITER_HOLDS_UTF8(&ti))
        fprintf(out, "  token _data:   %s\n", bson_iter_utf8(&ti, NULL));
    fprintf(out, "  capture mode:  %s\n", pos.oplog ? "oplog" : "change streams");
    /* the member snapshot/progress.h names (SNAPSHOT_PROGRESS_KEY) */
    fprintf(out, "  snapshot in progress: %s\n",
            !pos.initsync ? "no"
            : pos.extra_json && strstr(pos.extra_json, "\"mongocdc_snapshot\"")
                ? "yes (initsync, with its progress: resumed with snapshot.resumable, else "
                  "redone)"
                : "yes (initsync: the snapshot is redone)");
    if (pos.lsid)
        fprintf(out, "  transaction:   lsid %s txnNumber %" PRId64 "\n", pos.lsid, pos.txn_number);
    if (pos.extra_json && strstr(pos.extra_json, "incremental_snapshot"))
        fputs("  incremental snapshot: in progress\n", out);
    position_clear(&pos);
}

/* ---- JSON lines ---- */

/* {"key":"<key>","value":<value>} — the value verbatim (it is JSON). */
static void export_line(FILE *out, const struct kv *e)
{
    struct jbuf b;
    jbuf_init(&b);
    jbuf_puts(&b, "{\"key\":");
    jbuf_str(&b, e->key, strlen(e->key));
    jbuf_puts(&b, ",\"value\":");
    jbuf_puts(&b, e->value);
    jbuf_puts(&b, "}\n");
    fputs(b.data, out);
    jbuf_free(&b);
}

/* Parses one exported line into (key, value); value NULL for "value":null. */
static bool import_line(const char *line, char **key, char **value, struct mcdc_error *err)
{
    bson_error_t berr;
    bson_t *doc = bson_new_from_json((const uint8_t *)line, -1, &berr);
    *key = *value = NULL;
    if (!doc)
        return mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "not JSON: %s", berr.message);
    bson_iter_t it;
    bool ok = false;
    if (!bson_iter_init_find(&it, doc, "key") || !BSON_ITER_HOLDS_UTF8(&it)) {
        mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "no \"key\" string");
        goto out;
    }
    *key = xstrdup(bson_iter_utf8(&it, NULL));
    if ((*key)[0] != '[') {
        mcdc_error_set(err, MCDC_ERR_IO, EINVAL,
                       "key %.80s is not a Kafka Connect partition "
                       "key [\"<name>\",{...}]",
                       *key);
        goto out;
    }
    if (!bson_iter_init_find(&it, doc, "value")) {
        mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "no \"value\"");
        goto out;
    }
    if (BSON_ITER_HOLDS_NULL(&it)) {
        ok = true;
        goto out;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
        mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "\"value\" is not an object or null");
        goto out;
    }
    struct jbuf b;
    jbuf_init(&b);
    jbuf_bson_value(&b, &it);
    *value = jbuf_steal(&b);
    ok = true;
out:
    bson_destroy(doc);
    if (!ok) {
        free(*key);
        *key = NULL;
    }
    return ok;
}

/* Refuses (unless force) a value that is no usable position. */
static bool check_values(const struct kvlist *list, bool force)
{
    bool ok = true;
    for (size_t i = 0; i < list->count; i++) {
        if (!list->items[i].value)
            continue;
        struct mcdc_position pos;
        struct mcdc_error err = MCDC_ERROR_INIT;
        position_init(&pos);
        if (!position_from_json(list->items[i].value, &pos, &err)) {
            fprintf(stderr, "mongocdc offsets: %s %s: %s\n",
                    force ? "warning:" : "refused:", list->items[i].key, err.msg);
            ok = force;
        }
        position_clear(&pos);
    }
    if (!ok)
        fputs("mongocdc offsets: nothing written (--force writes such values anyway)\n", stderr);
    return ok;
}

/* ---- main ---- */

struct args {
    const char *cmd, *config, *from, *to, *in, *out, *rs, *key, *ts, *token;
    bool force, all;
};

static int parse(int argc, char **argv, struct args *a)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? MCDC_EXIT_USAGE : MCDC_EXIT_OK;
    }
    a->cmd = argv[1];
    static const char *const cmds[] = {"show", "export", "import", "copy", "set", "reset"};
    bool known = false;
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++)
        known |= !strcmp(a->cmd, cmds[i]);
    if (!known) {
        fprintf(stderr, "mongocdc offsets: unknown subcommand '%s'\n", a->cmd);
        usage(stderr);
        return MCDC_EXIT_USAGE;
    }
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i];
        const char **dst = NULL;
        if (!strcmp(o, "-c") || !strcmp(o, "--config"))
            dst = &a->config;
        else if (!strcmp(o, "--from"))
            dst = &a->from;
        else if (!strcmp(o, "--to"))
            dst = &a->to;
        else if (!strcmp(o, "-i") || !strcmp(o, "--input"))
            dst = &a->in;
        else if (!strcmp(o, "-o") || !strcmp(o, "--output"))
            dst = &a->out;
        else if (!strcmp(o, "--rs"))
            dst = &a->rs;
        else if (!strcmp(o, "--key"))
            dst = &a->key;
        else if (!strcmp(o, "--timestamp"))
            dst = &a->ts;
        else if (!strcmp(o, "--resume-token"))
            dst = &a->token;
        else if (!strcmp(o, "--force")) {
            a->force = true;
            continue;
        } else if (!strcmp(o, "--all")) {
            a->all = true;
            continue;
        } else {
            fprintf(stderr, "mongocdc offsets %s: unknown argument '%s'\n", a->cmd, o);
            return MCDC_EXIT_USAGE;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "mongocdc offsets %s: %s needs a value\n", a->cmd, o);
            return MCDC_EXIT_USAGE;
        }
        *dst = argv[++i];
    }
    if (!a->config) {
        fprintf(stderr, "mongocdc offsets %s: -c FILE is required\n", a->cmd);
        return MCDC_EXIT_USAGE;
    }
    if (!strcmp(a->cmd, "copy") && (!a->from || !a->to)) {
        fprintf(stderr, "mongocdc offsets copy: --from EP and --to EP are required\n");
        return MCDC_EXIT_USAGE;
    }
    if (!strcmp(a->cmd, "set") && !a->ts == !a->token) {
        fprintf(stderr, "mongocdc offsets set: give --timestamp or --resume-token (one)\n");
        return MCDC_EXIT_USAGE;
    }
    if (a->rs && a->key) {
        fprintf(stderr, "mongocdc offsets %s: --rs and --key exclude each other\n", a->cmd);
        return MCDC_EXIT_USAGE;
    }
    return -1;
}

/* The configuration was checked by config_load: what fails here (a store
 * held by a daemon, I/O, Kafka) is a failure, exit 1. */
static int fail(struct mcdc_error *err)
{
    fprintf(stderr, "mongocdc offsets: %s\n", err->msg);
    return MCDC_EXIT_FAILURE;
}

static int cmd_show_export(const struct args *a, const struct mcdc_config *cfg,
                           const struct endpoint *ep)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct kvlist list = {0};
    if (!ep_list(ep, &list, &err))
        return fail(&err);
    size_t others = a->all ? 0 : kvlist_keep_source(cfg, &list);
    int rc = MCDC_EXIT_OK;
    if (!strcmp(a->cmd, "export")) {
        FILE *out = a->out ? fopen(a->out, "w") : stdout;
        if (!out) {
            fprintf(stderr, "mongocdc offsets export: %s: %s\n", a->out, strerror(errno));
            kvlist_free(&list);
            return MCDC_EXIT_FAILURE;
        }
        for (size_t i = 0; i < list.count; i++)
            export_line(out, &list.items[i]);
        if (out != stdout && fclose(out) != 0)
            rc = MCDC_EXIT_FAILURE;
        fprintf(stderr, "mongocdc offsets: exported %zu entr%s\n", list.count,
                list.count == 1 ? "y" : "ies");
    } else {
        char label[512];
        printf("%s: %zu entr%s\n", ep_label(ep, label, sizeof label), list.count,
               list.count == 1 ? "y" : "ies");
        for (size_t i = 0; i < list.count; i++)
            show_entry(stdout, &list.items[i], cfg);
    }
    if (others)
        fprintf(stderr,
                "mongocdc offsets: %zu entr%s of other connectors (neither name \"%s\" nor "
                "topic.prefix \"%s\") left out; --all takes them too\n",
                others, others == 1 ? "y" : "ies", mcdc_config_connector_name(cfg),
                cfg->topic_prefix);
    kvlist_free(&list);
    return rc;
}

static int cmd_import_copy(const struct args *a, const struct mcdc_config *cfg,
                           const struct endpoint *from, const struct endpoint *to)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct kvlist list = {0};
    if (!strcmp(a->cmd, "copy")) {
        if (!ep_list(from, &list, &err))
            return fail(&err);
        size_t others = a->all ? 0 : kvlist_keep_source(cfg, &list);
        if (others)
            fprintf(stderr,
                    "mongocdc offsets copy: %zu entr%s of other connectors (neither name "
                    "\"%s\" nor topic.prefix \"%s\") not copied; --all copies them too\n",
                    others, others == 1 ? "y" : "ies", mcdc_config_connector_name(cfg),
                    cfg->topic_prefix);
    } else {
        FILE *in = a->in ? fopen(a->in, "r") : stdin;
        if (!in) {
            fprintf(stderr, "mongocdc offsets import: %s: %s\n", a->in, strerror(errno));
            return MCDC_EXIT_FAILURE;
        }
        char *line = NULL;
        size_t cap = 0;
        long lineno = 0;
        bool ok = true;
        while (ok && getline(&line, &cap, in) >= 0) {
            lineno++;
            if (strspn(line, " \t\r\n") == strlen(line))
                continue;
            char *k, *v;
            if (!import_line(line, &k, &v, &err)) {
                fprintf(stderr, "mongocdc offsets import: %s:%ld: %s\n", a->in ? a->in : "stdin",
                        lineno, err.msg);
                ok = false;
                break;
            }
            /* keep NULL values as deletions: set() would drop them */
            list.items = xrealloc(list.items, (list.count + 1) * sizeof *list.items);
            list.items[list.count].key = k;
            list.items[list.count++].value = v;
        }
        free(line);
        if (in != stdin)
            fclose(in);
        if (!ok) {
            kvlist_free(&list);
            return MCDC_EXIT_FAILURE;
        }
    }
    if (!check_values(&list, a->force) || !check_not_backwards(to, &list, a->force)) {
        kvlist_free(&list);
        return MCDC_EXIT_FAILURE;
    }
    bool ok = ep_write(to, &list, &err);
    size_t n = list.count;
    kvlist_free(&list);
    if (!ok)
        return fail(&err);
    char label[512];
    fprintf(stderr, "mongocdc offsets: wrote %zu entr%s to %s\n", n, n == 1 ? "y" : "ies",
            ep_label(to, label, sizeof label));
    return MCDC_EXIT_OK;
}

/* The key a task of this configuration stores its position under: [name,
 * the configured layout's partition] (offsets_layout_partition). rs: the
 * replica set (shard) given with --rs, a per-shard task's partition; else the
 * single task of a replica set (its name from the connection string, needed
 * by the 1.9 layout) or of the merged stream. NULL (message printed) when the
 * 1.9 layout needs a replica set name that is nowhere. */
static char *task_key(const struct mcdc_config *cfg, const char *rs)
{
    const char *name = mcdc_config_connector_name(cfg);
    if (rs)
        return offsets_partition_key(name, cfg->topic_prefix, rs);
    bool merged = cfg->connection_mode == MCDC_CONNECTION_SHARDED;
    char *set = merged ? NULL : config_replica_set(cfg);
    const char *part = offsets_layout_partition(cfg, set, merged, false);
    if (!merged && cfg->dialect == MCDC_DIALECT_1_9 && !set) {
        fputs("mongocdc offsets: the 1.9 layout keys a replica set's position by its name: "
              "give --rs RS (the connection string names no replicaSet)\n",
              stderr);
        return NULL;
    }
    char *key = offsets_partition_key(name, cfg->topic_prefix, part);
    free(set);
    return key;
}

static int cmd_set_reset(const struct args *a, const struct mcdc_config *cfg,
                         const struct endpoint *to)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    if (a->key && !key_well_formed(a->key)) {
        fprintf(stderr,
                "mongocdc offsets %s: --key '%s' is not a Kafka Connect partition key "
                "[\"<name>\",{partition}] (JSON)\n",
                a->cmd, a->key);
        return MCDC_EXIT_USAGE;
    }
    char *key = a->key ? xstrdup(a->key) : task_key(cfg, a->rs);
    if (!key)
        return MCDC_EXIT_USAGE;
    if (!key_adopted(cfg, key)) {
        if (!a->key) {
            /* --rs names no partition of this configuration's tasks */
            char *set = config_replica_set(cfg);
            if (cfg->connection_mode == MCDC_CONNECTION_SHARDED)
                fprintf(stderr,
                        "mongocdc offsets %s: --rs %s: mongodb.connection.mode sharded keeps "
                        "one merged stream, without --rs\n",
                        a->cmd, a->rs);
            else
                fprintf(stderr,
                        "mongocdc offsets %s: --rs %s: the connection string names replicaSet "
                        "%s, the only replica set of this configuration\n",
                        a->cmd, a->rs, set ? set : "(none)");
            fprintf(stderr,
                    "mongocdc offsets %s: nothing written (--key KEY writes any key "
                    "on purpose)\n",
                    a->cmd);
            free(set);
            free(key);
            return MCDC_EXIT_USAGE;
        }
        fprintf(stderr,
                "mongocdc offsets %s: warning: no task of this configuration looks %s up "
                "(name \"%s\", topic.prefix \"%s\", its layout's partition forms): "
                "the daemon will not adopt it\n",
                a->cmd, key, mcdc_config_connector_name(cfg), cfg->topic_prefix);
    }
    struct kvlist one = {0};
    one.items = xcalloc(1, sizeof *one.items);
    one.count = 1;
    one.items[0].key = key;
    if (!strcmp(a->cmd, "set")) {
        struct mcdc_position pos;
        position_init(&pos);
        if (a->ts && !parse_timestamp(a->ts, &pos.sec, &pos.ord)) {
            fprintf(stderr,
                    "mongocdc offsets set: --timestamp '%s' is not SEC[:INC] (seconds since "
                    "1970, 1 .. 2^32-1) or YYYY-MM-DDTHH:MM:SSZ\n",
                    a->ts);
            kvlist_free(&one);
            return MCDC_EXIT_USAGE;
        }
        if (a->token) {
            bson_destroy(&pos.resume_token);
            if (!parse_token(a->token, &pos.resume_token)) {
                bson_init(&pos.resume_token);
                fprintf(stderr,
                        "mongocdc offsets set: --resume-token is not a _data hex string, Base64 "
                        "of a token's BSON or a {\"_data\": ...} document\n");
                kvlist_free(&one);
                return MCDC_EXIT_USAGE;
            }
            pos.has_resume_token = true;
            int64_t s, i;
            if (token_time(&pos, &s, &i)) {
                pos.sec = s;
                pos.ord = i;
            }
        }
        /* the value form the configured layout's Debezium reads */
        one.items[0].value = position_to_json_dialect(&pos, cfg->dialect);
        position_clear(&pos);
    }
    bool ok = ep_write(to, &one, &err);
    if (ok)
        printf("%s %s%s%s\n", !strcmp(a->cmd, "set") ? "set" : "reset", key,
               one.items[0].value ? " = " : "", one.items[0].value ? one.items[0].value : "");
    kvlist_free(&one);
    return ok ? MCDC_EXIT_OK : fail(&err);
}

int offsets_cli_main(int argc, char **argv)
{
    struct args a = {0};
    int rc = parse(argc, argv, &a);
    if (rc >= 0)
        return rc;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_config *cfg = config_load(a.config, stderr, &err);
    if (!cfg) {
        fprintf(stderr, "mongocdc: %s\n", err.msg);
        return MCDC_EXIT_USAGE;
    }
    /* The stores' own messages (librdkafka) at WARN and above only. */
    mcdc_log_open(MCDC_LOG_WARN, MCDC_LOG_FORMAT_TEXT, NULL, &err);
    struct endpoint from, to;
    if (!parse_endpoint(cfg, a.from ? a.from : "store", &from) ||
        !parse_endpoint(cfg, a.to ? a.to : "store", &to)) {
        config_free(cfg);
        return MCDC_EXIT_USAGE;
    }
    if (!strcmp(a.cmd, "show") || !strcmp(a.cmd, "export"))
        rc = cmd_show_export(&a, cfg, &from);
    else if (!strcmp(a.cmd, "import") || !strcmp(a.cmd, "copy"))
        rc = cmd_import_copy(&a, cfg, &from, &to);
    else
        rc = cmd_set_reset(&a, cfg, &to);
    mcdc_log_close();
    config_free(cfg);
    return rc;
}

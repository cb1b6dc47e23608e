/*
 * config/config: config_load orchestrates the other files of the module
 * (see internal.h): walk the YAML file into entries, read
 * debezium.compatibility first (some defaults depend on the dialect), apply
 * every default from the option table, then every entry, then the required
 * keys and the cross-field rules (check.c). Every problem is printed as it is
 * found and loading goes on, so one run shows them all; the caller exits 2.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "config/internal.h"

void cfg_report(struct cfg_diag *d, int line, int col, const char *key, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if ((size_t)d->count == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 16;
        d->items = xrealloc(d->items, d->cap * sizeof *d->items);
    }
    /* line 0: about the file as a whole (it cannot be read). */
    char *text = line > 0 ? xasprintf("%s:%d:%d: %s: %s", d->path, line, col, key, msg)
                          : xasprintf("%s: %s", d->path, msg);
    d->items[d->count++] = (struct cfg_problem){line, col, text};
}

void cfg_diag_flush(struct cfg_diag *d)
{
    /* Insertion sort: stable, and a file has few problems. */
    for (int i = 1; i < d->count; i++) {
        struct cfg_problem p = d->items[i];
        int j = i;
        for (; j > 0 && (d->items[j - 1].line > p.line ||
                         (d->items[j - 1].line == p.line && d->items[j - 1].col > p.col));
             j--)
            d->items[j] = d->items[j - 1];
        d->items[j] = p;
    }
    for (int i = 0; i < d->count; i++) {
        fprintf(d->out, "%s\n", d->items[i].text);
        free(d->items[i].text);
    }
    free(d->items);
    d->items = NULL;
    d->cap = 0;
}

bool cfg_kafka_key_is_secret(const char *key)
{
    /* librdkafka's properties flagged _RK_SENSITIVE (CONFIGURATION.md): passwords,
     * client secrets, private keys and the OAUTHBEARER config string. */
    return strstr(key, "password") || strstr(key, "secret") || strcmp(key, "ssl.key.pem") == 0 ||
           strcmp(key, "sasl.oauthbearer.config") == 0 || strcmp(key, "ssl_key") == 0;
}

void cfg_add_ignored(struct mcdc_config *cfg, int line, int col, const char *key, const char *why)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s:%d:%d: %s: %s", cfg->path ? cfg->path : "config", line, col, key,
             why);
    cfg->ignored = xrealloc(cfg->ignored, (cfg->ignored_count + 1) * sizeof(char *));
    cfg->ignored[cfg->ignored_count++] = xstrdup(buf);
}

void cfg_add_unsupported(struct mcdc_config *cfg, const char *name)
{
    cfg->unsupported = xrealloc(cfg->unsupported, (cfg->unsupported_count + 1) * sizeof(char *));
    cfg->unsupported[cfg->unsupported_count++] = name;
}

/* Applies one table entry, rejecting an old Debezium name used together with
 * the current one (they share a field). */
static void apply_entry(struct mcdc_config *cfg, struct cfg_entry *e, const struct cfg_entries *all,
                        yaml_document_t *doc, struct cfg_diag *d)
{
    const struct opt *o = e->opt;
    if (o->alias_of) {
        const struct cfg_entry *cur = cfg_entry_find(all, o->alias_of, false);
        if (cur) {
            cfg_report(d, e->line, e->col, e->key,
                       "same option as %s (line %d) (expected only one of them)", o->alias_of,
                       cur->line);
            return;
        }
    }
    bool nondefault = false;
    e->bad = !cfg_set_value(cfg, e, doc, d, &nondefault);
    if (!e->bad && nondefault && (o->flags & OPT_F_UNSUPPORTED))
        cfg_add_unsupported(cfg, o->key);
}

static void apply_kafka(struct mcdc_config *cfg, const struct cfg_entry *e, struct cfg_diag *d)
{
    const char *v = cfg_scalar(e->value);
    if (!v || cfg_is_null(e->value)) {
        char *shown = xasprintf("kafka.%s", e->key);
        cfg_report(d, e->vline, e->vcol, shown, "%s (expected a librdkafka property value)",
                   v ? "no value" : "not a scalar");
        free(shown);
        return;
    }
    struct mcdc_kvlist *kv = &cfg->kafka;
    kv->items = xrealloc(kv->items, (kv->count + 1) * sizeof *kv->items);
    kv->items[kv->count++] = (struct mcdc_kv){xstrdup(e->key), xstrdup(v), e->line, e->col};
}

static void check_required(const struct cfg_entries *e, struct cfg_diag *d)
{
    for (size_t i = 0; i < mcdc_option_count; i++) {
        const struct opt *o = &mcdc_options[i];
        if (!(o->flags & OPT_F_REQUIRED))
            continue;
        bool found = false;
        for (size_t j = 0; j < e->count && !found; j++)
            found = !e->items[j].kafka && e->items[j].opt && e->items[j].opt->off == o->off;
        /* Debezium 1.x configurations name the seeds instead (check.c builds the URI). */
        if (!found && strcmp(o->key, "mongodb.connection.string") == 0)
            found = cfg_entry_find(e, "mongodb.hosts", false) != NULL;
        if (!found)
            cfg_report(d, e->map_line, e->map_col, o->key, "missing required key");
    }
}

static void load_entries(struct mcdc_config *cfg, struct cfg_entries *e, yaml_document_t *doc,
                         struct cfg_diag *d)
{
    struct cfg_entry *dialect =
        (struct cfg_entry *)cfg_entry_find(e, "debezium.compatibility", false);
    if (dialect)
        apply_entry(cfg, dialect, e, doc, d);
    enum mcdc_dialect dialect_set = cfg->dialect;
    for (size_t i = 0; i < mcdc_option_count; i++)
        cfg_set_default(cfg, &mcdc_options[i], dialect_set);
    cfg->dialect = dialect_set; /* its own default must not undo it */
    for (size_t i = 0; i < e->count; i++) {
        struct cfg_entry *it = &e->items[i];
        if (it->kafka)
            apply_kafka(cfg, it, d);
        else if (it->opt && it != dialect)
            apply_entry(cfg, it, e, doc, d);
    }
    check_required(e, d);
}

struct mcdc_config *config_load(const char *path, FILE *diag, struct mcdc_error *err)
{
    struct cfg_diag d = {diag ? diag : stderr, path, 0, NULL, 0};
    struct cfg_entries entries = {0};
    yaml_document_t doc;
    struct mcdc_config *cfg = xcalloc(1, sizeof *cfg);
    cfg->path = xstrdup(path);

    memset(&doc, 0, sizeof doc);
    if (cfg_walk_file(path, &doc, &entries, &d)) {
        load_entries(cfg, &entries, &doc, &d);
        config_check(cfg, &entries, &d);
        yaml_document_delete(&doc);
    }
    cfg_entries_free(&entries);
    cfg_diag_flush(&d);
    if (d.count > 0) {
        mcdc_error_set(err, MCDC_ERR_CONFIG, d.count, "%s: %d problem%s", path, d.count,
                       d.count == 1 ? "" : "s");
        config_free(cfg);
        return NULL;
    }
    return cfg;
}

void config_free(struct mcdc_config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < mcdc_option_count; i++) {
        const struct opt *o = &mcdc_options[i];
        if (o->off == OPT_NO_FIELD || o->alias_of)
            continue;
        char *field = (char *)cfg + o->off;
        if (o->type == OPT_LIST) {
            cfg_strlist_free((struct mcdc_strlist *)(void *)field);
        } else if (o->type == OPT_STRING || o->type == OPT_URI || o->type == OPT_JSON_ARRAY) {
            char *s;
            memcpy(&s, field, sizeof s);
            free(s);
        }
    }
    for (size_t i = 0; i < cfg->kafka.count; i++) {
        free(cfg->kafka.items[i].key);
        free(cfg->kafka.items[i].value);
    }
    free(cfg->kafka.items);
    for (size_t i = 0; i < cfg->signal_consumer.count; i++) {
        free(cfg->signal_consumer.items[i].key);
        free(cfg->signal_consumer.items[i].value);
    }
    free(cfg->signal_consumer.items);
    for (size_t i = 0; i < cfg->snapshot_filter_override_count; i++) {
        free(cfg->snapshot_filter_overrides[i].ns);
        free(cfg->snapshot_filter_overrides[i].query);
    }
    free(cfg->snapshot_filter_overrides);
    free(cfg->unsupported);
    for (size_t i = 0; i < cfg->ignored_count; i++)
        free(cfg->ignored[i]);
    free(cfg->ignored);
    free(cfg->path);
    free(cfg);
}

size_t config_unsupported_set(const struct mcdc_config *cfg, const char **names, size_t cap)
{
    for (size_t i = 0; i < cfg->unsupported_count && i < cap; i++)
        names[i] = cfg->unsupported[i];
    return cfg->unsupported_count;
}

size_t config_ignored_set(const struct mcdc_config *cfg, const char **texts, size_t cap)
{
    for (size_t i = 0; i < cfg->ignored_count && i < cap; i++)
        texts[i] = cfg->ignored[i];
    return cfg->ignored_count;
}

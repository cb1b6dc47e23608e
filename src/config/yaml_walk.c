/*
 * config/yaml_walk: reads the file with libyaml's document API
 * (yaml_parser_load), so every node keeps its start mark (line, column), and
 * flattens it into dotted keys: `log: {level: debug}` and `log.level: debug`
 * are the same key. A mapping is walked into when some option starts with
 * its dotted path; `kafka:` is a pass-through map whose keys are librdkafka's.
 *
 * Problems found here: syntax errors, a top level that is not a map, keys
 * that are not strings, unknown keys (with the nearest valid name) and
 * duplicate keys (libyaml keeps duplicates, it does not check them).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/xalloc.h"
#include "config/internal.h"

const char *cfg_scalar(const yaml_node_t *node)
{
    if (!node || node->type != YAML_SCALAR_NODE)
        return NULL;
    return (const char *)node->data.scalar.value;
}

bool cfg_is_null(const yaml_node_t *node)
{
    const char *s = cfg_scalar(node);
    if (!s || node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    return *s == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
           strcmp(s, "NULL") == 0;
}

/* Levenshtein distance, two rows. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t *prev = xcalloc(lb + 1, sizeof *prev), *cur = xcalloc(lb + 1, sizeof *cur);
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            cur[j] = del < ins ? del : ins;
            if (sub < cur[j])
                cur[j] = sub;
        }
        size_t *t = prev;
        prev = cur;
        cur = t;
    }
    size_t d = prev[lb];
    free(prev);
    free(cur);
    return d;
}

const char *cfg_suggest(const char *key)
{
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i < mcdc_option_count; i++) {
        size_t dist = edit_distance(key, mcdc_options[i].key);
        if (dist < best_d) {
            best_d = dist;
            best = mcdc_options[i].key;
        }
    }
    /* Close enough to be a typo: a few edits, fewer for short keys. */
    size_t limit = 1 + strlen(key) / 5;
    if (limit > 4)
        limit = 4;
    return best_d <= limit ? best : NULL;
}

static bool option_prefix(const char *path)
{
    size_t n = strlen(path);
    for (size_t i = 0; i < mcdc_option_count; i++)
        if (strncmp(mcdc_options[i].key, path, n) == 0 && mcdc_options[i].key[n] == '.')
            return true;
    return false;
}

const struct cfg_entry *cfg_entry_find(const struct cfg_entries *e, const char *key, bool kafka)
{
    for (size_t i = 0; i < e->count; i++)
        if (e->items[i].kafka == kafka && strcmp(e->items[i].key, key) == 0)
            return &e->items[i];
    return NULL;
}

static void add_entry(struct cfg_entries *out, char *key, yaml_node_t *k, yaml_node_t *v,
                      const struct opt *o, bool kafka, struct cfg_diag *d)
{
    int line = (int)k->start_mark.line + 1, col = (int)k->start_mark.column + 1;
    const struct cfg_entry *prev = cfg_entry_find(out, key, kafka);
    if (prev) {
        char *shown = kafka ? xasprintf("kafka.%s", key) : xstrdup(key);
        cfg_report(d, line, col, shown, "duplicate key (first set at line %d)", prev->line);
        free(shown);
        free(key);
        return;
    }
    if (out->count == out->cap) {
        out->cap = out->cap ? out->cap * 2 : 32;
        out->items = xrealloc(out->items, out->cap * sizeof *out->items);
    }
    out->items[out->count++] = (struct cfg_entry){
        .key = key,
        .value = v,
        .line = line,
        .col = col,
        .vline = (int)v->start_mark.line + 1,
        .vcol = (int)v->start_mark.column + 1,
        .opt = o,
        .kafka = kafka,
    };
}

static void walk_kafka(yaml_document_t *doc, yaml_node_t *map, struct cfg_entries *out,
                       struct cfg_diag *d)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        const char *ks = cfg_scalar(k);
        if (!ks || !*ks) {
            cfg_report(d, (int)k->start_mark.line + 1, (int)k->start_mark.column + 1, "kafka",
                       "key is not a string (expected a librdkafka property name)");
            continue;
        }
        add_entry(out, xstrdup(ks), k, v, NULL, true, d);
    }
}

static void walk_map(yaml_document_t *doc, yaml_node_t *map, const char *prefix,
                     struct cfg_entries *out, struct cfg_diag *d)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        int line = (int)k->start_mark.line + 1, col = (int)k->start_mark.column + 1;
        const char *ks = cfg_scalar(k);
        if (!ks || !*ks || cfg_is_null(k)) {
            cfg_report(d, line, col, *prefix ? prefix : "(top level)",
                       "key is not a string (expected an option name)");
            continue;
        }
        char *key = *prefix ? xasprintf("%s.%s", prefix, ks) : xstrdup(ks);
        const struct opt *o = cfg_find_option(key);
        if (o && o->type == OPT_MAP) {
            if (v->type == YAML_MAPPING_NODE)
                walk_kafka(doc, v, out, d);
            else if (!cfg_is_null(v)) /* `kafka:` with nothing under it is an empty map */
                cfg_report(d, (int)v->start_mark.line + 1, (int)v->start_mark.column + 1, key,
                           "not a map (expected a map of librdkafka properties)");
            free(key);
        } else if (o) {
            add_entry(out, key, k, v, o, false, d);
        } else if (v->type == YAML_MAPPING_NODE &&
                   (option_prefix(key) || strcmp(key, "signal.consumer") == 0)) {
            walk_map(doc, v, key, out, d);
            free(key);
        } else if (option_prefix(key)) {
            cfg_report(d, (int)v->start_mark.line + 1, (int)v->start_mark.column + 1, key,
                       "not a map (expected a map of %s options, or dotted keys %s.*)", key, key);
            free(key);
        } else if (strncmp(key, "kafka.", 6) == 0) {
            add_entry(out, xstrdup(key + 6), k, v, NULL, true, d);
            free(key);
        } else if (strncmp(key, "snapshot.collection.filter.overrides.", 37) == 0 ||
                   (strncmp(key, "signal.consumer.", 16) == 0 && key[16] != '\0')) {
            add_entry(out, key, k, v, NULL, false, d); /* checked in check.c */
        } else {
            const char *hint = cfg_suggest(key);
            if (hint)
                cfg_report(d, line, col, key, "unknown key (did you mean %s?)", hint);
            else
                cfg_report(d, line, col, key, "unknown key (see mongocdc --config-help)");
            free(key);
        }
    }
}

/*
 * Options nest a few levels (log.level, kafka.<name>); CFG_MAX_DEPTH leaves
 * plenty of room. Checked with libyaml's event parser before the document is
 * loaded: building the node tree of a file nested 100,000 levels deep takes
 * tens of seconds of CPU, the event pass stops at the first level too many.
 */
#define CFG_MAX_DEPTH 64

/* True when f (rewound afterwards) nests no deeper than CFG_MAX_DEPTH; syntax
 * errors are left to the loading pass, which reports them with context. */
static bool depth_ok(FILE *f, struct cfg_diag *d)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    int depth = 0;
    bool ok = true;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, f);
    while (yaml_parser_parse(&parser, &ev)) {
        yaml_event_type_t t = ev.type;
        if (t == YAML_MAPPING_START_EVENT || t == YAML_SEQUENCE_START_EVENT) {
            if (++depth > CFG_MAX_DEPTH) {
                cfg_report(d, (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1, "yaml",
                           "nested more than %d levels deep (options nest a few levels)",
                           CFG_MAX_DEPTH);
                ok = false;
            }
        } else if (t == YAML_MAPPING_END_EVENT || t == YAML_SEQUENCE_END_EVENT) {
            depth--;
        }
        yaml_event_delete(&ev);
        if (!ok || t == YAML_STREAM_END_EVENT)
            break;
    }
    yaml_parser_delete(&parser);
    rewind(f);
    return ok;
}

bool cfg_walk_file(const char *path, yaml_document_t *doc, struct cfg_entries *out,
                   struct cfg_diag *d)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        cfg_report(d, 0, 0, "file", "cannot open: %s", strerror(errno));
        return false;
    }
    struct stat st;
    bool have_st = fstat(fileno(f), &st) == 0;
    if (have_st && S_ISDIR(st.st_mode)) {
        cfg_report(d, 0, 0, "file", "is a directory (expected a YAML file)");
        fclose(f);
        return false;
    }
    /* The depth pass rewinds: only on a regular file (a pipe cannot be read twice). */
    if (have_st && S_ISREG(st.st_mode) && !depth_ok(f, d)) {
        fclose(f);
        return false;
    }
    yaml_parser_t parser;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, f);
    bool loaded = yaml_parser_load(&parser, doc) != 0;
    if (loaded) {
        /* A second document would be ignored silently: say so instead. */
        yaml_document_t next;
        if (yaml_parser_load(&parser, &next)) {
            yaml_node_t *root = yaml_document_get_root_node(&next);
            if (root)
                cfg_report(d, (int)root->start_mark.line + 1, (int)root->start_mark.column + 1,
                           "yaml", "a second YAML document (expected one document)");
            yaml_document_delete(&next);
        }
    } else {
        /* problem_mark is where libyaml gave up; context names what was open. */
        cfg_report(d, (int)parser.problem_mark.line + 1, (int)parser.problem_mark.column + 1,
                   "yaml", "%s%s%s", parser.problem ? parser.problem : "syntax error",
                   parser.context ? " " : "", parser.context ? parser.context : "");
    }
    yaml_parser_delete(&parser);
    fclose(f);
    if (!loaded)
        return false;

    yaml_node_t *root = yaml_document_get_root_node(doc);
    if (!root) {
        cfg_report(d, 1, 1, "(top level)", "empty file (expected a map of options)");
        yaml_document_delete(doc);
        return false;
    }
    out->map_line = (int)root->start_mark.line + 1;
    out->map_col = (int)root->start_mark.column + 1;
    if (root->type != YAML_MAPPING_NODE) {
        cfg_report(d, out->map_line, out->map_col, "(top level)",
                   "not a map (expected a map of options)");
        yaml_document_delete(doc);
        return false;
    }
    walk_map(doc, root, "", out, d);
    return true;
}

void cfg_entries_free(struct cfg_entries *e)
{
    for (size_t i = 0; i < e->count; i++)
        free(e->items[i].key);
    free(e->items);
    memset(e, 0, sizeof *e);
}

/*
 * config/value: typed parsing of one option's value, driven by its row in the
 * option table (schema.c): the YAML node is checked against the row's type,
 * range or enum names and written through the row's offsetof into struct
 * mcdc_config. Defaults go through the same parsers, from the row's text.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/xalloc.h"
#include "config/internal.h"

/* A parsed value before it is stored (or dropped, for OPT_NO_FIELD rows). */
struct value {
    int64_t i;
    bool b;
    int e;
    char *s;
    struct mcdc_strlist l;
};

static void value_free(struct value *v)
{
    free(v->s);
    cfg_strlist_free(&v->l);
    memset(v, 0, sizeof *v);
}

void cfg_strlist_free(struct mcdc_strlist *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->count = 0;
}

static void strlist_push(struct mcdc_strlist *l, const char *s, size_t n)
{
    while (n > 0 && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r'))
        s++, n--;
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        n--;
    if (n == 0)
        return; /* "a,,b" and a trailing comma add nothing */
    l->items = xrealloc(l->items, (l->count + 1) * sizeof *l->items);
    l->items[l->count++] = xstrndup(s, n);
}

/* Debezium splits lists on commas and lets `\,` stand for a comma inside an
 * entry (Strings.listOf with the escape, debezium-format.md §7.2). */
void cfg_split_list(const char *text, struct mcdc_strlist *out)
{
    size_t len = strlen(text);
    char *buf = xmalloc(len + 1);
    size_t n = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && text[i] == '\\' && text[i + 1] == ',') {
            buf[n++] = ',';
            i++;
        } else if (i == len || text[i] == ',') {
            strlist_push(out, buf, n);
            n = 0;
        } else {
            buf[n++] = text[i];
        }
    }
    free(buf);
}

/* What a row accepts, for "(expected ...)". */
static void expected(const struct opt *o, char *buf, size_t cap)
{
    switch (o->type) {
    case OPT_INT:
        if (o->max == INT64_MAX)
            snprintf(buf, cap, "an integer >= %" PRId64, o->min);
        else
            snprintf(buf, cap, "an integer between %" PRId64 " and %" PRId64, o->min, o->max);
        return;
    case OPT_BOOL:
        snprintf(buf, cap, "true or false");
        return;
    case OPT_ENUM: {
        size_t n = (size_t)snprintf(buf, cap, "one of:");
        for (size_t i = 0; o->names[i] && n < cap; i++)
            n += (size_t)snprintf(buf + n, cap - n, "%s %s", i ? "," : "", o->names[i]);
        return;
    }
    case OPT_LIST:
        snprintf(buf, cap, "a list of strings or a comma-separated string");
        return;
    case OPT_JSON_ARRAY:
        snprintf(buf, cap, "a JSON array of pipeline stages");
        return;
    case OPT_URI:
        snprintf(buf, cap, "a mongodb:// or mongodb+srv:// connection string");
        return;
    case OPT_MAP:
        snprintf(buf, cap, "a map of librdkafka properties");
        return;
    case OPT_STRING:
        break;
    }
    snprintf(buf, cap, "a string");
}

/* Parses text per o into v. On failure returns false with a problem in msg
 * (which may quote text unless o is secret). */
static bool parse_text(const struct opt *o, const char *text, struct value *v, char *msg,
                       size_t cap)
{
    switch (o->type) {
    case OPT_INT: {
        char *end;
        errno = 0;
        long long x = strtoll(text, &end, 10);
        if (end == text || *end != '\0' || errno == ERANGE) {
            snprintf(msg, cap, "not an integer: \"%s\"", text);
            return false;
        }
        if (x < o->min || x > o->max) {
            snprintf(msg, cap, "out of range: %lld", x);
            return false;
        }
        v->i = x;
        return true;
    }
    case OPT_BOOL:
        if (strcasecmp(text, "true") == 0 || strcasecmp(text, "false") == 0) {
            v->b = strcasecmp(text, "true") == 0;
            return true;
        }
        snprintf(msg, cap, "not a boolean: \"%s\"", text);
        return false;
    case OPT_ENUM:
        /* Debezium's EnumeratedValue.parse ignores case. */
        for (int i = 0; o->names[i]; i++) {
            if (strcasecmp(text, o->names[i]) == 0) {
                v->e = i;
                return true;
            }
        }
        snprintf(msg, cap, "invalid value \"%s\"", text);
        return false;
    case OPT_LIST:
        cfg_split_list(text, &v->l);
        return true;
    case OPT_STRING:
    case OPT_JSON_ARRAY:
    case OPT_URI:
        if (*text == '\0') {
            snprintf(msg, cap, "empty value");
            return false;
        }
        v->s = xstrdup(text);
        return true;
    case OPT_MAP:
        break;
    }
    snprintf(msg, cap, "not a scalar");
    return false;
}

static bool value_equal(const struct opt *o, const struct value *a, const struct value *b)
{
    switch (o->type) {
    case OPT_INT:
        return a->i == b->i;
    case OPT_BOOL:
        return a->b == b->b;
    case OPT_ENUM:
        return a->e == b->e;
    case OPT_LIST:
        if (a->l.count != b->l.count)
            return false;
        for (size_t i = 0; i < a->l.count; i++)
            if (strcmp(a->l.items[i], b->l.items[i]) != 0)
                return false;
        return true;
    default:
        if (!a->s || !b->s)
            return a->s == b->s;
        return strcmp(a->s, b->s) == 0;
    }
}

/* Moves v into cfg at o's field (freeing what was there). */
static void store(struct mcdc_config *cfg, const struct opt *o, struct value *v)
{
    if (o->off == OPT_NO_FIELD) {
        value_free(v);
        return;
    }
    char *field = (char *)cfg + o->off;
    switch (o->type) {
    case OPT_INT:
        memcpy(field, &v->i, sizeof v->i);
        break;
    case OPT_BOOL:
        memcpy(field, &v->b, sizeof v->b);
        break;
    case OPT_ENUM: /* enum fields are int-sized; their values are never negative */
        memcpy(field, &v->e, sizeof v->e);
        break;
    case OPT_LIST:
        cfg_strlist_free((struct mcdc_strlist *)(void *)field);
        memcpy(field, &v->l, sizeof v->l);
        v->l.items = NULL;
        v->l.count = 0;
        break;
    case OPT_STRING:
    case OPT_JSON_ARRAY:
    case OPT_URI: {
        char *old;
        memcpy(&old, field, sizeof old);
        free(old);
        memcpy(field, &v->s, sizeof v->s);
        v->s = NULL;
        break;
    }
    case OPT_MAP:
        break;
    }
    value_free(v);
}

void cfg_set_default(struct mcdc_config *cfg, const struct opt *o, enum mcdc_dialect dialect)
{
    const char *text = cfg_default_text(o, dialect);
    struct value v = {0};
    char msg[64];
    if (o->type == OPT_MAP || o->alias_of || !text)
        return;
    if (parse_text(o, text, &v, msg, sizeof msg))
        store(cfg, o, &v);
    value_free(&v);
}

/* A YAML sequence of scalars into a list. */
static bool parse_sequence(const struct cfg_entry *e, yaml_document_t *doc, struct value *v,
                           struct cfg_diag *d)
{
    bool ok = true;
    for (yaml_node_item_t *it = e->value->data.sequence.items.start;
         it < e->value->data.sequence.items.top; it++) {
        yaml_node_t *n = yaml_document_get_node(doc, *it);
        const char *s = cfg_scalar(n);
        if (!s || cfg_is_null(n)) {
            cfg_report(d, (int)n->start_mark.line + 1, (int)n->start_mark.column + 1, e->key,
                       "list entry is not a string (expected %s)",
                       "a list of strings or a comma-separated string");
            ok = false;
            continue;
        }
        strlist_push(&v->l, s, strlen(s));
    }
    return ok;
}

bool cfg_set_value(struct mcdc_config *cfg, const struct cfg_entry *e, yaml_document_t *doc,
                   struct cfg_diag *d, bool *nondefault)
{
    const struct opt *o = e->opt;
    struct value v = {0}, dv = {0};
    char exp[512], msg[256];
    expected(o, exp, sizeof exp);
    *nondefault = false;

    if (cfg_is_null(e->value)) {
        cfg_report(d, e->vline, e->vcol, e->key, "no value (expected %s)", exp);
        return false;
    }
    if (o->type == OPT_LIST && e->value->type == YAML_SEQUENCE_NODE) {
        if (!parse_sequence(e, doc, &v, d)) {
            value_free(&v);
            return false;
        }
    } else {
        const char *text = cfg_scalar(e->value);
        if (!text) {
            cfg_report(d, e->vline, e->vcol, e->key, "%s (expected %s)",
                       e->value->type == YAML_MAPPING_NODE ? "unexpected map" : "unexpected list",
                       exp);
            return false;
        }
        if (!parse_text(o, text, &v, msg, sizeof msg)) {
            /* Only string failures ("empty value") never quote the text. */
            if ((o->flags & OPT_F_SECRET) && o->type != OPT_STRING && o->type != OPT_URI)
                snprintf(msg, sizeof msg, "invalid value");
            cfg_report(d, e->vline, e->vcol, e->key, "%s (expected %s)", msg, exp);
            value_free(&v);
            return false;
        }
    }
    const char *dtext = cfg_default_text(o, cfg->dialect);
    if (dtext && parse_text(o, dtext, &dv, msg, sizeof msg))
        *nondefault = !value_equal(o, &v, &dv);
    else
        *nondefault = true;
    value_free(&dv);
    store(cfg, o, &v);
    return true;
}

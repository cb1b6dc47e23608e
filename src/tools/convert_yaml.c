/*
 * tools/convert_yaml: the YAML output of `mongocdc config convert`: a key
 * carried when mongocdc's option table (config/schema.c) knows it and
 * accepts its value, else named as not carried or refused, on stderr and
 * in the YAML; Debezium 1.x's deprecated names; YAML string quoting.
 *
 * Thread: main.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/internal.h"
#include "tools/tools_internal.h"

/* Names the input's setting that makes a conversion wrong rather than
 * incomplete (a converter other than JsonConverter: consumers would get
 * different bytes); the YAML is still written, the command exits 1. */
void out_refuse(struct out *o, const char *key, const char *value, const char *why)
{
    fprintf(stderr, "mongocdc config convert: ERROR: %s=%s: %s\n", key, value, why);
    fprintf(o->f, "# ERROR: %s=%s: %s\n", key, value, why);
    o->refused++;
}

/* Debezium 1.x's deprecated filter names (MongoDbConnectorConfig 1.9,
 * Field.withDeprecatedAliases) and the current names Debezium 2.0 kept. */
static const char *const legacy_names[][2] = {
    {"database.whitelist", "database.include.list"},
    {"database.blacklist", "database.exclude.list"},
    {"collection.whitelist", "collection.include.list"},
    {"collection.blacklist", "collection.exclude.list"},
    {"field.blacklist", "field.exclude.list"},
};

/* The current name of a Debezium 1.x deprecated name, or NULL. */
const char *legacy_current(const char *key)
{
    for (size_t i = 0; i < sizeof legacy_names / sizeof legacy_names[0]; i++)
        if (!strcmp(key, legacy_names[i][0]))
            return legacy_names[i][1];
    return NULL;
}

void yaml_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

void out_drop(struct out *o, const char *key, const char *why)
{
    fprintf(stderr, "mongocdc config convert: %s: not carried: %s\n", key, why);
    fprintf(o->f, "# not carried: %s (%s)\n", key, why);
    o->dropped++;
}

static const struct opt *find_opt(const char *key)
{
    for (size_t i = 0; i < mcdc_option_count; i++) {
        const struct opt *op = &mcdc_options[i];
        if (!strcmp(op->key, key))
            return op;
        if ((op->flags & OPT_F_DYNAMIC) && !strncmp(key, op->key, strlen(op->key)) &&
            key[strlen(op->key)] == '.')
            return op;
    }
    return NULL;
}

/* Whether value is one the option accepts (type, enum, range); why set if not. */
static bool value_ok(const struct opt *op, const char *value, char *why, size_t n)
{
    char *end;
    switch (op->type) {
    case OPT_INT: {
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (errno || end == value || *end || v < op->min || v > op->max) {
            snprintf(why, n, "value \"%s\" is not an integer in %lld..%lld", value,
                     (long long)op->min, (long long)op->max);
            return false;
        }
        return true;
    }
    case OPT_BOOL:
        if (strcasecmp(value, "true") && strcasecmp(value, "false")) {
            snprintf(why, n, "value \"%s\" is not true or false", value);
            return false;
        }
        return true;
    case OPT_ENUM:
        for (const char *const *e = op->names; *e; e++)
            if (!strcmp(*e, value))
                return true;
        snprintf(why, n, "value \"%s\" is not one mongocdc accepts (see mongocdc --config-help)",
                 value);
        return false;
    default:
        return true;
    }
}

/* Writes key: value when mongocdc carries it; else names it. */
void out_carry(struct out *o, const char *key, const char *value)
{
    const struct opt *op = find_opt(key);
    char why[256];
    if (!op || op->type == OPT_MAP) {
        out_drop(o, key, "no mongocdc option of that name");
        return;
    }
    if (!value_ok(op, value, why, sizeof why)) {
        out_drop(o, key, why);
        return;
    }
    const char *name = op->alias_of ? op->alias_of : key;
    if (op->flags & OPT_F_UNSUPPORTED) {
        fprintf(stderr,
                "mongocdc config convert: %s: carried, but mongocdc does not deliver "
                "its behaviour yet (it warns at start)\n",
                key);
        o->unsupported++;
    }
    fputs(name, o->f);
    fputs(": ", o->f);
    if (op->type == OPT_BOOL)
        fputs(!strcasecmp(value, "true") ? "true" : "false", o->f);
    else
        yaml_str(o->f, value);
    fputc('\n', o->f);
}

/*
 * config/internal.h: what the config module's files share (not a public API).
 *
 * Flow of config_load (config.c):
 *   yaml_walk.c  YAML document -> flat list of entries (full dotted key, value
 *                node, key and value marks); unknown and duplicate keys are
 *                reported here.
 *   schema.c     the option table; typed value parsers that write through the
 *                table's offsetof into struct mcdc_config; --config-help and
 *                Markdown output.
 *   check.c      cross-field rules (config_check), the connection string and
 *                the kafka: pass-through map.
 * Every problem goes through cfg_report(), compiler style, and loading goes on
 * so that all problems are reported in one run.
 *
 * Thread: main only (config_load runs once at start-up).
 */
#ifndef MCDC_CONFIG_INTERNAL_H
#define MCDC_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <yaml.h>

#include "common/error.h"
#include "config/config.h"

enum opt_type {
    OPT_STRING,     /* char * */
    OPT_INT,        /* int64_t, within [min, max] */
    OPT_BOOL,       /* bool */
    OPT_ENUM,       /* an enum (int-sized), index into names */
    OPT_LIST,       /* struct mcdc_strlist: YAML list or comma-separated string */
    OPT_JSON_ARRAY, /* char *, text of a JSON array */
    OPT_URI,        /* char *, a MongoDB connection string (checked in check.c) */
    OPT_MAP,        /* struct mcdc_kvlist, a flat pass-through map (kafka:) */
};

enum opt_flags {
    OPT_F_REQUIRED = 1u << 0,    /* must be set (or its alias) */
    OPT_F_SECRET = 1u << 1,      /* value never printed */
    OPT_F_UNSUPPORTED = 1u << 2, /* accepted; a value other than the default warns at start */
    OPT_F_DYNAMIC = 1u << 3,     /* key is a prefix: `<key>.<suffix>` entries (filter overrides) */
};

#define OPT_NO_FIELD SIZE_MAX /* the option is validated but stored nowhere */

struct opt {
    const char *key; /* full dotted name, as Debezium spells it */
    enum opt_type type;
    const char *dflt;         /* default text, NULL = unset; for 1.9 when dflt_3x set */
    const char *dflt_3x;      /* default in the 3.x dialect, NULL = same as dflt */
    int64_t min, max;         /* OPT_INT bounds */
    const char *const *names; /* OPT_ENUM names (NULL-terminated), value = index */
    size_t off;               /* offsetof(struct mcdc_config, field) or OPT_NO_FIELD */
    unsigned flags;           /* enum opt_flags */
    const char *alias_of;     /* older Debezium name of alias_of (same field), or NULL */
    const char *group;        /* section heading in --config-help and the docs */
    const char *doc;          /* one line */
};

extern const struct opt mcdc_options[];
extern const size_t mcdc_option_count;

/* A key found in the file, after flattening nested sections into dotted keys. */
struct cfg_entry {
    char *key;             /* full dotted key (owned) */
    yaml_node_t *value;    /* borrowed from the document */
    int line, col;         /* of the key, 1-based */
    int vline, vcol;       /* of the value, 1-based */
    const struct opt *opt; /* table row, NULL for kafka: and dynamic entries */
    bool kafka;            /* an entry of the kafka: map (key without "kafka.") */
    bool bad;              /* its value was rejected: rules involving it stay quiet */
};

struct cfg_entries {
    struct cfg_entry *items;
    size_t count, cap;
    int map_line, map_col; /* where the top-level mapping starts */
};

/* Where problems go: counts them and prints `FILE:LINE:COL: KEY: problem`. */
struct cfg_problem {
    int line, col;
    char *text; /* the whole line, without the newline */
};

struct cfg_diag {
    FILE *out;
    const char *path;
    int count;
    struct cfg_problem *items; /* printed sorted by location by cfg_diag_flush */
    size_t cap;
};

/* Prints the collected problems in file order (stable) and frees them. */
void cfg_diag_flush(struct cfg_diag *d);

void cfg_report(struct cfg_diag *d, int line, int col, const char *key, const char *fmt, ...)
    MCDC_PRINTF(5, 6);

/* yaml_walk.c: loads path into doc and flattens it into entries. Returns false
 * (reported) when the file cannot be read, is not YAML, or is not a map:
 * then there is nothing further to check. */
bool cfg_walk_file(const char *path, yaml_document_t *doc, struct cfg_entries *out,
                   struct cfg_diag *d);
void cfg_entries_free(struct cfg_entries *e);
/* The entry for key (kafka: map entries when kafka), or NULL. */
const struct cfg_entry *cfg_entry_find(const struct cfg_entries *e, const char *key, bool kafka);
/* True if key names a librdkafka property whose value is secret. */
bool cfg_kafka_key_is_secret(const char *key);
/* Scalar text of a node, or NULL if the node is not a scalar. */
const char *cfg_scalar(const yaml_node_t *node);
/* True for an empty plain scalar, `~` or `null`. */
bool cfg_is_null(const yaml_node_t *node);
/* Nearest table key to key by edit distance, or NULL when none is close. */
const char *cfg_suggest(const char *key);

/* schema.c */
const struct opt *cfg_find_option(const char *key);
/* The default text of o for a dialect. */
const char *cfg_default_text(const struct opt *o, enum mcdc_dialect dialect);
/* Parses the entry's value into cfg per its row (reports problems). Sets
 * *nondefault when the value differs from the dialect's default. */
bool cfg_set_value(struct mcdc_config *cfg, const struct cfg_entry *e, yaml_document_t *doc,
                   struct cfg_diag *d, bool *nondefault);
/* Applies o's default text for the dialect to cfg (no-op for OPT_NO_FIELD). */
void cfg_set_default(struct mcdc_config *cfg, const struct opt *o, enum mcdc_dialect dialect);
/* Splits a Debezium comma-separated list (entries trimmed, `\,` keeps a comma). */
void cfg_split_list(const char *text, struct mcdc_strlist *out);
void cfg_strlist_free(struct mcdc_strlist *l);

/* uri.c: builds and checks cfg->connection_string (mongodb.hosts, mongodb.user,
 * ... folded in), reporting at the connection string's location. */
void cfg_check_uri(struct mcdc_config *cfg, const struct cfg_entries *e, struct cfg_diag *d);

/* config.c: records that cfg asks for something not delivered yet; name is a
 * static string (an option key, or "key: value"). */
void cfg_add_unsupported(struct mcdc_config *cfg, const char *name);

/* config.c: records that the option key, set at line:col, has no effect
 * with the rest of cfg, and why (config_ignored_set). */
void cfg_add_ignored(struct mcdc_config *cfg, int line, int col, const char *key, const char *why);

/* check.c: the cross-field rules, the connection string and kafka:. */
void config_check(struct mcdc_config *cfg, const struct cfg_entries *e, struct cfg_diag *d);
/* Masks the secrets of uri (password, secret options) in text with "****"
 * where they stand: the password of every user info ("scheme://user:PASS@",
 * "user:PASS@"), the value of each secret option ("name=VALUE"), and each
 * secret of CFG_SECRET_MIN_ALONE characters or more, as written or
 * percent-decoded, where it stands alone (cfg_mask_secret). Returns a new
 * string the caller frees. */
char *cfg_redact_text(const char *text, const char *uri);

/* Replaces in *text (malloc'd, replaced) each occurrence of secret that
 * stands alone, i.e. is not the middle of a longer run of letters and digits,
 * with "****". A secret shorter than CFG_SECRET_MIN_ALONE characters changes
 * nothing: "p" or "42" standing alone is any word or number, so masking it
 * would garble text and point at the secret; such a secret is hidden only
 * where it stands (a user info, a named option). */
#define CFG_SECRET_MIN_ALONE 4
void cfg_mask_secret(char **text, const char *secret);

#endif

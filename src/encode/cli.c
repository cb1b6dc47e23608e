/*
 * encode/cli: `mongocdc encode`, the extended-JSON writer on the command line
 * (debezium-format.md §2; used by the differential oracle test).
 *
 *   mongocdc encode [--mode strict|relaxed] [--separators compact|default]
 *                   [--input bson|json] [--key]
 *
 * Reads documents from stdin (raw concatenated BSON, or one extended-JSON
 * document per line) and prints one JSON text per line. --key prints the key
 * text of each document's _id instead (RELAXED compact, §1.1; an empty line
 * when the document has no _id). Exit 0 on success (and for --help), 1 on
 * unreadable input, 2 on a usage error.
 */
#include "encode/encode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bson/bson.h>

#include "common/error.h"
#include "encode/ejson.h"

struct cli_opts {
    enum ejson_mode mode;
    enum ejson_separators sep;
    bool json_input;
    bool key;
    bool help;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: mongocdc encode [--mode strict|relaxed] [--separators compact|default]\n"
               "                       [--input bson|json] [--key]\n");
}

static bool parse_args(int argc, char **argv, struct cli_opts *o)
{
    o->mode = EJSON_STRICT;
    o->sep = EJSON_SEP_COMPACT;
    o->json_input = false;
    o->key = false;
    o->help = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--key") == 0) {
            o->key = true;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            o->help = true;
            return true;
        }
        if (!v) {
            fprintf(stderr, "mongocdc encode: unknown or incomplete option '%s'\n", a);
            return false;
        }
        if (strcmp(a, "--mode") == 0 && strcmp(v, "strict") == 0) {
            o->mode = EJSON_STRICT;
        } else if (strcmp(a, "--mode") == 0 && strcmp(v, "relaxed") == 0) {
            o->mode = EJSON_RELAXED;
        } else if (strcmp(a, "--separators") == 0 && strcmp(v, "compact") == 0) {
            o->sep = EJSON_SEP_COMPACT;
        } else if (strcmp(a, "--separators") == 0 && strcmp(v, "default") == 0) {
            o->sep = EJSON_SEP_DEFAULT;
        } else if (strcmp(a, "--input") == 0 && strcmp(v, "bson") == 0) {
            o->json_input = false;
        } else if (strcmp(a, "--input") == 0 && strcmp(v, "json") == 0) {
            o->json_input = true;
        } else {
            fprintf(stderr, "mongocdc encode: bad option '%s %s'\n", a, v);
            return false;
        }
        i++;
    }
    return true;
}

/* Renders one document into buf (reset first) and writes it as a line. */
static bool emit(struct ejson_buf *buf, const bson_t *doc, const struct cli_opts *o)
{
    ejson_buf_reset(buf);
    if (o->key) {
        ejson_write_key(buf, doc);
    } else {
        ejson_write_document(buf, doc, o->mode, o->sep);
    }
    ejson_buf_append(buf, "\n", 1);
    return fwrite(buf->data, 1, buf->len, stdout) == buf->len;
}

static int run_bson(struct ejson_buf *buf, const struct cli_opts *o)
{
    bson_reader_t *reader = bson_reader_new_from_fd(STDIN_FILENO, false);
    const bson_t *doc;
    bool eof = false;
    size_t count = 0;
    int rc = MCDC_EXIT_OK;
    while ((doc = bson_reader_read(reader, &eof)) != NULL) {
        count++;
        if (!emit(buf, doc, o)) {
            fprintf(stderr, "mongocdc encode: write to stdout failed\n");
            rc = MCDC_EXIT_FAILURE;
            break;
        }
    }
    if (rc == MCDC_EXIT_OK && !eof) {
        fprintf(stderr, "mongocdc encode: malformed BSON after document %zu (offset %lld)\n", count,
                (long long)bson_reader_tell(reader));
        rc = MCDC_EXIT_FAILURE;
    }
    bson_reader_destroy(reader);
    return rc;
}

static int run_json(struct ejson_buf *buf, const struct cli_opts *o)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    size_t lineno = 0;
    int rc = MCDC_EXIT_OK;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) {
            n--;
        }
        if (n == 0) {
            continue;
        }
        bson_error_t berr;
        bson_t *doc = bson_new_from_json((const uint8_t *)line, n, &berr);
        if (!doc) {
            fprintf(stderr, "mongocdc encode: stdin:%zu: %s\n", lineno, berr.message);
            rc = MCDC_EXIT_FAILURE;
            break;
        }
        bool ok = emit(buf, doc, o);
        bson_destroy(doc);
        if (!ok) {
            fprintf(stderr, "mongocdc encode: write to stdout failed\n");
            rc = MCDC_EXIT_FAILURE;
            break;
        }
    }
    free(line);
    return rc;
}

int encode_cli_main(int argc, char **argv)
{
    struct cli_opts o;
    if (!parse_args(argc, argv, &o)) {
        usage(stderr);
        return MCDC_EXIT_USAGE;
    }
    if (o.help) {
        usage(stdout);
        return MCDC_EXIT_OK;
    }
    struct ejson_buf buf = {0};
    uint64_t bad_before = ejson_invalid_utf8_count();
    int rc = o.json_input ? run_json(&buf, &o) : run_bson(&buf, &o);
    ejson_buf_free(&buf);
    if (fflush(stdout) != 0 && rc == MCDC_EXIT_OK) {
        fprintf(stderr, "mongocdc encode: write to stdout failed\n");
        rc = MCDC_EXIT_FAILURE;
    }
    uint64_t bad = ejson_invalid_utf8_count() - bad_before;
    if (bad) {
        fprintf(stderr, "mongocdc encode: %llu invalid UTF-8 sequences replaced by U+FFFD\n",
                (unsigned long long)bad);
    }
    return rc;
}

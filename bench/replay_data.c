/*
 * replay_data: the replay server's data (bench/replay_server.c): dataset
 * documents read from Extended JSON files, and the templates of change-event
 * and snapshot-document batches built from them, with the offsets of the
 * fields each reply patches.
 */
#define _GNU_SOURCE /* memmem, getline */
#include "replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

const char REPLAY_TOKEN_TAIL[] = "2B022C0100296E5A10046C6F72656D697073756D646F6C6F7273697461"
                                 "46645F6964002B020004";

void replay_die(const char *m)
{
    fprintf(stderr, "replay_server: %s\n", m);
    exit(2);
}

bson_t **replay_load_docs(char **files, int nfiles, char ***nss, size_t *count)
{
    bson_t **docs = NULL;
    char **ns = NULL;
    size_t n = 0, cap = 0;

    for (int f = 0; f < nfiles; f++) {
        FILE *fp = fopen(files[f], "r");
        char *line = NULL, name[256], dbn[256] = "bench", *p;
        size_t lcap = 0;
        ssize_t len;
        bson_error_t err;

        if (!fp)
            replay_die("cannot open a --data file");
        /* namespace: <parent folder>.<file name without .json> */
        snprintf(name, sizeof name, "%s", files[f]);
        if ((p = strrchr(name, '.')) != NULL && strcmp(p, ".json") == 0)
            *p = '\0';
        p = strrchr(name, '/');
        if (p) {
            *p = '\0';
            char *q = strrchr(name, '/');
            snprintf(dbn, sizeof dbn, "%s", q ? q + 1 : name);
            p++;
        } else {
            p = name;
        }
        char full[520];
        snprintf(full, sizeof full, "%s.%s", dbn, p);
        while ((len = getline(&line, &lcap, fp)) > 0) {
            if (len < 2)
                continue;
            bson_t *d = bson_new_from_json((const uint8_t *)line, len, &err);
            if (!d)
                continue; /* not a document line */
            if (n == cap) {
                cap = cap ? cap * 2 : 1024;
                docs = realloc(docs, cap * sizeof *docs);
                ns = realloc(ns, cap * sizeof *ns);
            }
            docs[n] = d;
            ns[n++] = strdup(full);
        }
        free(line);
        fclose(fp);
    }
    if (n == 0)
        replay_die("no documents in the --data files");
    *nss = ns;
    *count = n;
    return docs;
}

static size_t find_bytes(const uint8_t *hay, size_t n, const void *needle, size_t m)
{
    const uint8_t *p = memmem(hay, n, needle, m);
    if (!p)
        replay_die("template sentinel not found");
    return (size_t)(p - hay);
}

static void tmpl_add(struct tmpl *t, size_t j, const bson_t *doc, size_t *cap_bytes, size_t *used)
{
    char key[16];
    int klen = snprintf(key, sizeof key, "%zu", j);
    size_t need = 1 + (size_t)klen + 1 + doc->len;
    if (*used + need > *cap_bytes) {
        *cap_bytes = (*used + need) * 2;
        t->elems = realloc(t->elems, *cap_bytes);
    }
    uint8_t *w = t->elems + *used;
    *w++ = 0x03;
    memcpy(w, key, (size_t)klen + 1);
    w += klen + 1;
    memcpy(w, bson_get_data(doc), doc->len);
    *used += need;
    t->end[j] = *used;
}

/* the first field of d other than _id whose name has no dot or dollar */
static bool first_field(const bson_t *d, bson_iter_t *out)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, d))
        return false;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "_id") && !strchr(k, '.') && k[0] != '$') {
            *out = it;
            return true;
        }
    }
    return false;
}

void replay_build_stream(struct tmpl *t, size_t batch, uint32_t t0, bson_t **docs, char **nss,
                         size_t ndocs)
{
    size_t cap = 0, used = 0;
    char tok[160], sentinel_tok[64];
    const uint32_t SENT = 0xC0FFEE11u;

    t->n = batch;
    t->end = calloc(t->n, sizeof *t->end);
    t->patch = calloc(t->n, sizeof *t->patch);
    t->patch2 = calloc(t->n, sizeof *t->patch2);
    for (size_t j = 0; j < t->n; j++) {
        const bson_t *d = docs[(j * 7) % ndocs];
        const char *ns = nss[(j * 7) % ndocs];
        const char *dot = strchr(ns, '.');
        bson_t ev = BSON_INITIALIZER, sub, sub2, arr;
        bson_iter_t it;
        int kind = (int)(j % 10);
        const char *op = kind < 6 ? "insert" : kind < 9 ? "update" : "delete";

        snprintf(tok, sizeof tok, "82%08X%08X%s", t0, SENT, REPLAY_TOKEN_TAIL);
        bson_append_document_begin(&ev, "_id", 3, &sub);
        BSON_APPEND_UTF8(&sub, "_data", tok);
        bson_append_document_end(&ev, &sub);
        BSON_APPEND_UTF8(&ev, "operationType", op);
        bson_append_timestamp(&ev, "clusterTime", 11, t0, SENT);
        BSON_APPEND_DATE_TIME(&ev, "wallTime", (int64_t)t0 * 1000);
        if (kind < 6)
            BSON_APPEND_DOCUMENT(&ev, "fullDocument", d);
        bson_append_document_begin(&ev, "ns", 2, &sub);
        bson_append_utf8(&sub, "db", 2, ns, (int)(dot - ns));
        BSON_APPEND_UTF8(&sub, "coll", dot + 1);
        bson_append_document_end(&ev, &sub);
        bson_append_document_begin(&ev, "documentKey", 11, &sub);
        if (bson_iter_init_find(&it, d, "_id"))
            BSON_APPEND_VALUE(&sub, "_id", bson_iter_value(&it));
        else
            BSON_APPEND_INT64(&sub, "_id", (int64_t)j);
        bson_append_document_end(&ev, &sub);
        if (kind >= 6 && kind < 9) {
            bson_append_document_begin(&ev, "updateDescription", 17, &sub);
            bson_append_document_begin(&sub, "updatedFields", 13, &sub2);
            if (first_field(d, &it))
                BSON_APPEND_VALUE(&sub2, bson_iter_key(&it), bson_iter_value(&it));
            bson_append_document_end(&sub, &sub2);
            bson_append_array_begin(&sub, "removedFields", 13, &arr);
            bson_append_array_end(&sub, &arr);
            bson_append_array_begin(&sub, "truncatedArrays", 15, &arr);
            bson_append_array_end(&sub, &arr);
            bson_append_document_end(&ev, &sub);
            BSON_APPEND_DOCUMENT(&ev, "fullDocument", d);
        }
        size_t start = used + 1 + (size_t)snprintf(tok, sizeof tok, "%zu", j) + 1;
        tmpl_add(t, j, &ev, &cap, &used);
        snprintf(sentinel_tok, sizeof sentinel_tok, "82%08X%08X", t0, SENT);
        t->patch[j] = start + find_bytes(t->elems + start, ev.len, sentinel_tok, 18) + 10;
        uint8_t ts_bytes[8];
        uint64_t tsv = ((uint64_t)t0 << 32) | SENT;
        for (int b = 0; b < 8; b++)
            ts_bytes[b] = (uint8_t)(tsv >> (8 * b));
        t->patch2[j] = start + find_bytes(t->elems + start, ev.len, ts_bytes, 8);
        bson_destroy(&ev);
    }
}

void replay_build_snapshot(struct tmpl *t, size_t batch, bson_t **docs, size_t ndocs)
{
    size_t cap = 0, used = 0;
    const int64_t SENT = 0x5EED5EED5EED5EEDll;
    char key[16];

    t->n = batch;
    t->end = calloc(t->n, sizeof *t->end);
    t->patch = calloc(t->n, sizeof *t->patch);
    for (size_t j = 0; j < t->n; j++) {
        const bson_t *d = docs[(j * 13) % ndocs];
        bson_t doc = BSON_INITIALIZER;
        bson_iter_t it;

        BSON_APPEND_INT64(&doc, "_id", SENT);
        bson_iter_init(&it, d);
        while (bson_iter_next(&it))
            if (strcmp(bson_iter_key(&it), "_id"))
                BSON_APPEND_VALUE(&doc, bson_iter_key(&it), bson_iter_value(&it));
        size_t start = used + 1 + (size_t)snprintf(key, sizeof key, "%zu", j) + 1;
        tmpl_add(t, j, &doc, &cap, &used);
        t->patch[j] = start + find_bytes(t->elems + start, doc.len, &SENT, 8);
        bson_destroy(&doc);
    }
}

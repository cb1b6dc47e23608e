/*
 * replay: what the replay server's files share (replay_server.h lists them;
 * replay_data.c builds the data declared here). A benchmark tool.
 */
#ifndef MCDC_BENCH_REPLAY_H
#define MCDC_BENCH_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

/* one pre-encoded BSON array body (elements keyed "0".."n-1") */
struct tmpl {
    uint8_t *elems; /* concatenated elements */
    size_t *end;    /* end[j] = offset just past element j */
    size_t *patch;  /* per element: offset of the first patched field */
    size_t *patch2; /* per element: offset of the second patched field (stream) */
    size_t n;
};

/* The tail of every resume token after "82<seconds><increment>" (hex); only
 * the prefix is read by mongocdc (the cluster time), the rest keeps the
 * token's usual length. */
extern const char REPLAY_TOKEN_TAIL[];

/* Prints "replay_server: m" on stderr and exits with status 2. */
void replay_die(const char *m);

/*
 * Reads every Extended JSON line of the nfiles files (bson_new_from_json;
 * lines that are not documents are skipped). Returns the documents (owned,
 * never freed: they live as long as the process) and sets *nss to each one's
 * namespace "<parent folder>.<file name without .json>" and *count. Exits
 * (replay_die) on an unreadable file or no document at all.
 */
bson_t **replay_load_docs(char **files, int nfiles, char ***nss, size_t *count);

/*
 * Builds in t the batch of `batch` change events (6 in 10 inserts, 3 updates
 * with updateDescription and fullDocument, 1 delete) over docs / nss (ndocs
 * of them), clusterTime seconds t0; t->patch[j] is the offset of event j's
 * 8 hex digits of the token increment, t->patch2[j] that of its clusterTime
 * increment (uint32, little-endian), both from the start of the elements.
 */
void replay_build_stream(struct tmpl *t, size_t batch, uint32_t t0, bson_t **docs, char **nss,
                         size_t ndocs);

/*
 * Builds in t the batch of `batch` snapshot documents: the datasets'
 * documents with an int64 _id first; t->patch[j] is the offset of document
 * j's _id value.
 */
void replay_build_snapshot(struct tmpl *t, size_t batch, bson_t **docs, size_t ndocs);

#endif

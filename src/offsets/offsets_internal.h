/*
 * offsets internals shared by the offsets module's files (not a public
 * contract): a growable text buffer with a compact JSON writer, the
 * BSON form of an offset value and the store back-ends' table.
 *
 * Thread: any (no shared state).
 */
#ifndef MCDC_OFFSETS_OFFSETS_INTERNAL_H
#define MCDC_OFFSETS_OFFSETS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

#include "common/error.h"
#include "offsets/offsets.h"

/* A growable, always NUL-terminated byte buffer. */
struct jbuf {
    char *data;
    size_t len, cap;
};

void jbuf_init(struct jbuf *b);
void jbuf_free(struct jbuf *b);
void jbuf_putn(struct jbuf *b, const char *s, size_t n);
void jbuf_puts(struct jbuf *b, const char *s);
void jbuf_putc(struct jbuf *b, char c);
void jbuf_i64(struct jbuf *b, int64_t v);
/* Writes s (n bytes of UTF-8) as a JSON string with quotes: `"` `\` and
 * control characters escaped (\n, \t, ... or \u00XX in upper-case hex),
 * everything else verbatim, as Jackson (Kafka Connect's JsonConverter) does. */
void jbuf_str(struct jbuf *b, const char *s, size_t n);
/* Writes the value under iter as compact JSON (documents, arrays, strings,
 * numbers, booleans, null; other BSON types as relaxed extended JSON). */
void jbuf_bson_value(struct jbuf *b, const bson_iter_t *iter);
/* Writes the members of doc (without braces), each preceded by "," when
 * *first is false; updates *first. */
void jbuf_bson_members(struct jbuf *b, const bson_t *doc, bool *first);
/* Hands the text over to the caller (malloc'd) and resets b. */
char *jbuf_steal(struct jbuf *b);

/* Parses an offset value already in BSON form (see position_from_json). */
bool position_from_bson(const bson_t *doc, struct mcdc_position *pos, struct mcdc_error *err);


/* A store back-end (file or kafka). scan: every key with its last value
 * (value_json NULL: deleted), see offset_store_scan. save: value_json under
 * key; NULL deletes the key. */
struct offset_store_ops {
    bool (*scan)(struct offset_store *store, struct offset_entry **entries, size_t *n,
                 struct mcdc_error *err);
    bool (*save)(struct offset_store *store, const char *key, const char *value_json,
                 struct mcdc_error *err);
    void (*close)(struct offset_store *store);
};

/* The stored time of one key, as this handle last loaded or saved it. */
struct stored_time {
    char *key;
    uint64_t time; /* position_time; 0 unknown */
    bool present;  /* a value is stored under key */
};

struct offset_store {
    const struct offset_store_ops *ops;
    const struct mcdc_config *cfg;
    void *impl;
    bool read_only;  /* offset_store_open_read_only: loads only, no file lock */
    char **foreign;  /* keys of this source under another name or server_id (last load) */
    size_t foreign_count;
    bool foreign_warned; /* the WARN about them was given (once per handle) */
    struct stored_time *times; /* per key, for the never-backwards check of save */
    size_t times_count;
    offset_store_writer writer; /* exactly-once: saves go through it (kafka store) */
    void *writer_ctx;
};


bool store_file_open(struct offset_store *store, struct mcdc_error *err);
bool store_kafka_open(struct offset_store *store, struct mcdc_error *err);

/*
 * Gives fd (a file just created in a store's folder; fd_path its path, for
 * the message) the owner and group of the file it replaces (replaces, may be
 * NULL or absent; then also its mode) or else of the folder dir, when the
 * process runs as root: an offsets command run with sudo must not leave
 * files the daemon's user cannot open. Does nothing for other users. A
 * failing fchown is a WARN, not an error (the write itself succeeded).
 */
void offsets_file_match_owner(int fd, const char *fd_path, const char *replaces, const char *dir);

/* Reads fd to its end into *out (malloc'd, NUL-terminated, *out_len bytes
 * before the NUL), retrying EINTR; hint: the expected size (st_size), for the
 * first allocation. Returns 0, EFBIG (nothing kept) when more than max bytes
 * come (the file grew while being read), or the errno of a failed read. Used
 * by the offsets file (store_file.c) and the Debezium offsets file
 * (dbzfile_io.c). */
int offsets_read_all(int fd, size_t hint, size_t max, char **out, size_t *out_len);

/* Writes all n bytes of buf to fd, retrying short writes and EINTR. True
 * when every byte is written; false with errno set on a write error. Used by
 * the offsets file (store_file.c) and the Debezium offsets file
 * (dbzfile_io.c), which both write a temp file, fsync and rename. */
bool offsets_write_all(int fd, const void *buf, size_t n);

#endif

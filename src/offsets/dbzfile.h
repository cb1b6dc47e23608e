/*
 * offsets/dbzfile: Kafka Connect's FileOffsetBackingStore file, the offsets
 * file of Debezium Server and of Debezium's embedded engine
 * (offset.storage.file.filename). FileOffsetBackingStore.save() writes one
 * java.io.ObjectOutputStream holding a java.util.HashMap<byte[], byte[]>:
 * key = the partition key bytes ["<name>",{...}] and value = the offset value
 * bytes, both as Kafka Connect's JsonConverter writes them (the same bytes as
 * a record of the connect-offsets topic). save() has written this same map
 * since the class appeared (Kafka 0.9); Kafka Connect 3.2 (Debezium 1.9.8's)
 * and 4.3 (Debezium 3.6.1's) were checked to write identical bytes. Only the
 * reading side changed (3.x reads through a SafeObjectInputStream that
 * refuses other classes). Debezium 1.x's embedded engine (Debezium Server
 * 1.x) writes each key as {"schema":null,"payload":[...]}: the bytes are
 * kept as they are here; tools/offsets_ep.c deals with that form.
 *
 * The reader accepts exactly that object graph (stream magic 0xACED version 5,
 * a java.util.HashMap whose entries are byte[] or null, back-references to
 * earlier arrays), as the Java Object Serialization Specification §6.4
 * grammar lays it out, and refuses anything else with a clear error. The
 * writer produces what ObjectOutputStream.writeObject(HashMap) produces for a
 * map filled by put() (its capacity and threshold included), so a file
 * written here is read by every Kafka Connect version.
 *
 * Thread: any (no shared state).
 */
#ifndef MCDC_OFFSETS_DBZFILE_H
#define MCDC_OFFSETS_DBZFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* One map entry. key/value are malloc'd and owned by the map; NULL with
 * length 0 stands for a Java null (a null value is a deleted partition). */
struct dbz_offset_entry {
    uint8_t *key;
    size_t key_len;
    uint8_t *value;
    size_t value_len;
};

/* The whole map, in file order (Java's HashMap order; meaningless). */
struct dbz_offsets {
    struct dbz_offset_entry *items;
    size_t count;
};

/* Frees every entry and empties the map (it stays usable). NULL is a no-op. */
void dbz_offsets_free(struct dbz_offsets *map);

/*
 * Sets key (klen bytes) to value (vlen bytes; value NULL: a Java null),
 * replacing the value of an entry with the same key bytes or appending one.
 * Both are copied.
 */
void dbz_offsets_put(struct dbz_offsets *map, const void *key, size_t klen, const void *value,
                     size_t vlen);

/* Removes the entry whose key bytes equal key (none: no-op); the order of
 * the others may change. */
void dbz_offsets_remove(struct dbz_offsets *map, const void *key, size_t klen);

/* The entry whose key bytes equal key, or NULL. Borrowed. */
const struct dbz_offset_entry *dbz_offsets_find(const struct dbz_offsets *map, const void *key,
                                                size_t klen);

/*
 * Parses len bytes of a FileOffsetBackingStore file into *map (empty on
 * entry; on failure it is left empty). Returns false with err (domain IO,
 * EINVAL) naming the byte offset and what was expected when the bytes are
 * not that stream: another class, another element type, a truncated or
 * over-long stream.
 */
bool dbzfile_parse(const uint8_t *data, size_t len, struct dbz_offsets *map,
                   struct mcdc_error *err);

/*
 * Serialises map as ObjectOutputStream.writeObject(new HashMap<byte[],
 * byte[]>) with the entries put in map order. *out is malloc'd (caller
 * frees), *out_len its length.
 */
void dbzfile_serialize(const struct dbz_offsets *map, uint8_t **out, size_t *out_len);

/*
 * Reads the file at path into *map (empty on entry). A missing file is an
 * empty map with *exists false (as FileOffsetBackingStore.load treats it).
 * False with err (IO) on a read error, a file over 64 MiB, or bad content
 * (the message names path).
 */
bool dbzfile_read(const char *path, struct dbz_offsets *map, bool *exists, struct mcdc_error *err);

/*
 * Writes map to path atomically: "<path>.tmp", fsync, rename, fsync of the
 * folder (a crash leaves the old or the new file). False with err (IO).
 */
bool dbzfile_write(const char *path, const struct dbz_offsets *map, struct mcdc_error *err);

#endif

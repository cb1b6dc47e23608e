/*
 * event/record: one Kafka record as the encoder makes it and a sink produces
 * it (key, value, topic, headers), and the few records one change yields.
 * A plain value type with no behaviour of its own, so that a sink needs the
 * record and not the encoder (encode/encode.h makes them, sink/sink.h takes
 * them).
 *
 * Thread: any (no shared state).
 */
#ifndef MCDC_EVENT_RECORD_H
#define MCDC_EVENT_RECORD_H

#include <stddef.h>

/* One Kafka record header: name and value are NUL-terminated UTF-8 text,
 * borrowed from the encoder. The value bytes are the text without the NUL,
 * as Kafka Connect's SimpleHeaderConverter writes a string header. */
struct mcdc_header {
    const char *name;
    const char *value;
};

/* Debezium's four context headers (debezium-format.md §1.7). */
#define MCDC_HEADERS_MAX 4

/* One Kafka record. key/value are owned by the record (malloc'd) until handed
 * on (the sink passes them to librdkafka with RD_KAFKA_MSG_F_FREE). value NULL
 * means a tombstone. topic and headers are borrowed from the encoder and
 * valid until encoder_destroy(); header_count 0 means no headers. */
struct mcdc_record {
    const char *topic;
    char *key;
    size_t key_len;
    char *value;
    size_t value_len;
    const struct mcdc_header *headers;
    size_t header_count;
    /* Borrowed for the produce call, may be NULL: the change's namespace
     * (db.coll) and _id (relaxed extended JSON), set by the worker for the
     * dead-letter topic's metadata (errors.deadletterqueue.topic.name). */
    const char *ns;
    const char *id;
};

/* An event yields at most: transaction END, BEGIN, the data record, a
 * tombstone, and (oplog mode) the END of the applyOps it closes. */
#define MCDC_RECORDS_MAX 5

struct mcdc_records {
    struct mcdc_record items[MCDC_RECORDS_MAX];
    size_t count;
};

/* Frees the key/value buffers still owned by out and sets count to 0. */
void records_release(struct mcdc_records *out);

#endif

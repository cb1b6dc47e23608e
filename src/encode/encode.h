/*
 * encode: turns a change record into Kafka records (key, value, topic) in
 * Debezium's exact bytes (debezium-format.md §1-§3), with no I/O.
 *
 * This header is the contract other modules build on; the encoder owns the
 * extended-JSON writer (ejson.h), the envelope table per dialect, schemas,
 * topic names and the field filters.
 */
#ifndef MCDC_ENCODE_ENCODE_H
#define MCDC_ENCODE_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "config/config.h"
#include "event/event.h"

/* One Kafka record. key/value are owned by the record (malloc'd) until handed
 * on (the sink passes them to librdkafka with RD_KAFKA_MSG_F_FREE). value NULL
 * means a tombstone. topic is borrowed from the encoder and valid until
 * encoder_destroy(). */
struct mcdc_record {
    const char *topic;
    char *key;
    size_t key_len;
    char *value;
    size_t value_len;
};

/* An event yields at most: transaction END, BEGIN, the data record, a tombstone. */
#define MCDC_RECORDS_MAX 4

struct mcdc_records {
    struct mcdc_record items[MCDC_RECORDS_MAX];
    size_t count;
};

struct encoder;

/*
 * Builds an encoder for cfg (borrowed; must outlive the encoder). Compiles the
 * filters (PCRE2). Returns NULL and fills err (domain CONFIG) on a bad regex.
 */
struct encoder *encoder_new(const struct mcdc_config *cfg, struct mcdc_error *err);

/* Frees the encoder; NULL is a no-op. */
void encoder_destroy(struct encoder *enc);

/*
 * True if the namespace db.coll is captured (include/exclude lists, never
 * admin/config/local, always the signal collection). debezium-format.md §7.2.
 */
bool encoder_captures(const struct encoder *enc, const char *db, const char *coll);

/*
 * Encodes ev into out (out->count records, caller owns key/value of each and
 * must release them with records_release() unless handed on). ts_ms_now is the
 * connector wall clock in ms (the envelope's top-level ts_ms). Returns false
 * and fills err (domain ENCODE) if the event cannot be encoded (for example a
 * field rename onto an existing field); out is then empty.
 */
bool encoder_encode(struct encoder *enc, const struct mcdc_event *ev, int64_t ts_ms_now,
                    struct mcdc_records *out, struct mcdc_error *err);

/* Frees the key/value buffers still owned by out and sets count to 0. */
void records_release(struct mcdc_records *out);

/*
 * `mongocdc encode ...` subcommand (debezium-format.md §2): reads documents
 * from stdin and prints their extended JSON. argv[0] is "encode". Returns the
 * process exit code.
 */
int encode_cli_main(int argc, char **argv);

#endif

/*
 * config/check internals: the checker state and the report helpers shared by
 * check.c (the kafka: map, capture, filters, signals) and check_sink.c (the
 * sink, the offsets store and exactly-once delivery). Not a public contract.
 */
#ifndef MCDC_CONFIG_CHECK_INTERNAL_H
#define MCDC_CONFIG_CHECK_INTERNAL_H

#include "common/error.h"
#include "config/internal.h"

struct checker {
    struct mcdc_config *cfg;
    const struct cfg_entries *e;
    struct cfg_diag *d;
};

/* Reports fmt at key's entry, or at the top of the file when key is not set;
 * nothing when key's own value was already reported bad. */
void check_problem(struct checker *c, const char *key, const char *fmt, ...) MCDC_PRINTF(3, 4);

/* A problem between key and other: reported at the one the file sets last
 * (msg_key at key, msg_other at other), at the only one set when the other
 * is a default. */
void check_conflict(struct checker *c, const char *key, const char *other, const char *msg_key,
                    const char *msg_other);

/* True when the kafka: map sets key. */
bool check_kafka_has(const struct mcdc_config *cfg, const char *key);

/* The sink and the offsets store (check_sink.c). */
void check_sink_and_offsets(struct checker *c);

/* exactly.once.support and the transaction settings (check_sink.c). */
void check_exactly_once(struct checker *c);

#endif

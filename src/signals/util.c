/*
 * signals/util.c: helpers of the channels, notifications and the signal
 * command (signals_internal.h).
 */
#include "signals/signals_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

const char *sig_kafka_topic(const struct mcdc_config *cfg, char *buf, size_t cap)
{
    if (cfg->signal_kafka_topic && *cfg->signal_kafka_topic)
        return cfg->signal_kafka_topic;
    snprintf(buf, cap, "%s-signal", cfg->topic_prefix ? cfg->topic_prefix : "");
    return buf;
}

char *sig_to_json(const char *id, const char *type, const bson_t *data)
{
    struct ejson_buf b = {0};
    sig_put(&b, "{\"id\":");
    sig_put_json(&b, id);
    sig_put(&b, ",\"type\":");
    sig_put_json(&b, type);
    sig_put(&b, ",\"data\":");
    if (data && !bson_empty(data)) {
        /* relaxed extended JSON from the project's writer: the same bytes
         * with every libbson version */
        ejson_write_document(&b, data, EJSON_RELAXED, EJSON_SEP_COMPACT);
    } else {
        sig_put(&b, "{}");
    }
    sig_put(&b, "}");
    char *out = ejson_buf_steal(&b, NULL);
    ejson_buf_free(&b);
    return out;
}

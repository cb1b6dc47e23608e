/*
 * tools/convert_kafka: the producer settings of `mongocdc config convert`:
 * which Java producer properties librdkafka reads under the same name
 * (librdkafka's CONFIGURATION.md), and the ones it spells otherwise.
 *
 * Thread: main.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "tools/tools_internal.h"

bool librdkafka_key(const char *k)
{
    static const char *const keys[] = {"bootstrap.servers",
                                       "client.id",
                                       "acks",
                                       "compression.type",
                                       "linger.ms",
                                       "batch.size",
                                       "security.protocol",
                                       "sasl.mechanism",
                                       "sasl.username",
                                       "sasl.password",
                                       "ssl.endpoint.identification.algorithm",
                                       "enable.idempotence",
                                       "retries",
                                       "retry.backoff.ms",
                                       "request.timeout.ms",
                                       "delivery.timeout.ms",
                                       "max.in.flight.requests.per.connection",
                                       "message.max.bytes",
                                       "ssl.ca.location",
                                       "ssl.certificate.location",
                                       "ssl.key.location",
                                       "ssl.key.password",
                                       NULL};
    for (const char *const *p = keys; *p; p++)
        if (!strcmp(k, *p))
            return true;
    return false;
}

/* The value of name="..." (or name=...) in a JAAS configuration line, malloc'd,
 * or NULL. */
static char *jaas_option(const char *jaas, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(jaas, name); p; p = strstr(p + 1, name)) {
        if ((p != jaas && !isspace((unsigned char)p[-1])) || p[n] != '=')
            continue;
        const char *v = p + n + 1;
        if (*v == '"') {
            const char *e = strchr(v + 1, '"');
            return e ? xstrndup(v + 1, (size_t)(e - v - 1)) : NULL;
        }
        return xstrndup(v, strcspn(v, " ;\t"));
    }
    return NULL;
}

void java_producer_keys(FILE *f, struct props *p)
{
    const char *mrs = props_get(p, "max.request.size");
    if (mrs && !props_get(p, "message.max.bytes"))
        props_add(p, "message.max.bytes", 17, mrs, strlen(mrs));
    const char *jaas = props_get(p, "sasl.jaas.config");
    if (jaas && (strstr(jaas, "PlainLoginModule") || strstr(jaas, "ScramLoginModule"))) {
        char *u = jaas_option(jaas, "username"), *pw = jaas_option(jaas, "password");
        if (u && pw) {
            props_add(p, "sasl.username", 13, u, strlen(u));
            props_add(p, "sasl.password", 13, pw, strlen(pw));
            fputs("# sasl.jaas.config: its username and password as sasl.username and "
                  "sasl.password\n",
                  f);
        }
        free(u);
        free(pw);
    }
    /* carried under their librdkafka names: no longer named as dropped */
    for (size_t i = 0; i < p->count; i++) {
        bool moved = (!strcmp(p->keys[i], "max.request.size") && mrs) ||
                     (!strcmp(p->keys[i], "sasl.jaas.config") && props_get(p, "sasl.username") &&
                      props_get(p, "sasl.password"));
        if (moved) {
            free(p->keys[i]);
            free(p->values[i]);
            memmove(&p->keys[i], &p->keys[i + 1], (p->count - i - 1) * sizeof *p->keys);
            memmove(&p->values[i], &p->values[i + 1], (p->count - i - 1) * sizeof *p->values);
            p->count--;
            i--;
        }
    }
}

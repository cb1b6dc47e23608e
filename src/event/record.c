/*
 * event/record: releasing the records one change yields (see record.h).
 *
 * Thread: any (no shared state).
 */
#include "event/record.h"

#include <stdlib.h>
#include <string.h>

void records_release(struct mcdc_records *out)
{
    for (size_t i = 0; i < out->count; i++) {
        free(out->items[i].key);
        free(out->items[i].value);
        memset(&out->items[i], 0, sizeof out->items[i]);
    }
    out->count = 0;
}

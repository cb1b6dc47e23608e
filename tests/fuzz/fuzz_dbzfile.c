/*
 * fuzz_dbzfile: a Kafka Connect FileOffsetBackingStore file (Debezium
 * Server's offsets file, offsets/dbzfile.h) as read by `mongocdc offsets`:
 * any bytes must parse or be refused without a crash, and a map that parses
 * must serialise to bytes that parse again to the same entries.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offsets/dbzfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct dbz_offsets m = {0}, again = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    if (dbzfile_parse(data, size, &m, &err)) {
        uint8_t *out;
        size_t len;
        dbzfile_serialize(&m, &out, &len);
        if (!dbzfile_parse(out, len, &again, &err) || again.count != m.count)
            abort(); /* what we write must read back */
        for (size_t i = 0; i < m.count; i++) {
            const struct dbz_offset_entry *e =
                dbz_offsets_find(&again, m.items[i].key, m.items[i].key_len);
            if (!e || (e->value == NULL) != (m.items[i].value == NULL) ||
                e->value_len != m.items[i].value_len ||
                (e->value_len && memcmp(e->value, m.items[i].value, e->value_len)))
                abort();
        }
        free(out);
    }
    dbz_offsets_free(&m);
    dbz_offsets_free(&again);
    return 0;
}

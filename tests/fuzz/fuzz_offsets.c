/*
 * fuzz_offsets: an offset value as read from the offsets file or an
 * offsets-topic record (position_from_json: JSON, Base64 or hex resume
 * token, range and duplicate checks), and the text written back for any value
 * accepted, which must parse again to the same text.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offsets/offsets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text == NULL)
        abort();
    memcpy(text, data, size);
    text[size] = '\0';
    struct mcdc_position pos, again;
    struct mcdc_error err = MCDC_ERROR_INIT;
    position_init(&pos);
    position_init(&again);
    if (position_from_json(text, &pos, &err)) {
        char *out = position_to_json(&pos);
        if (!position_from_json(out, &again, &err))
            abort(); /* what we write must read back */
        char *out2 = position_to_json(&again);
        if (strcmp(out, out2) != 0)
            abort(); /* and round-trip to the same text */
        free(out2);
        free(out);
    }
    position_clear(&again);
    position_clear(&pos);
    free(text);
    return 0;
}

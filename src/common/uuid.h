/*
 * common/uuid: random (version 4) UUIDs, RFC 9562 §5.4, for signal ids,
 * notification ids and incremental snapshot chunk ids (Debezium uses
 * java.util.UUID.randomUUID() for all three).
 */
#ifndef MCDC_COMMON_UUID_H
#define MCDC_COMMON_UUID_H

#define MCDC_UUID_LEN 36 /* "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx" */

/* Writes a new random UUID, lowercase hex with dashes, NUL-terminated, into
 * out (MCDC_UUID_LEN + 1 bytes). Bytes from getrandom(2); should the kernel
 * refuse, from the clock, the process id and a counter (unique, not secret).
 * Never fails. Thread-safe. */
void mcdc_uuid_v4(char out[MCDC_UUID_LEN + 1]);

#endif

/*
 * fuzz_config: the configuration loader (config_load: libyaml document,
 * depth check, flattening, option table, cross-checks) on arbitrary bytes
 * written to a file, as the daemon reads its -c FILE. Problems go to a
 * discarded stream; only crashes, leaks and undefined behaviour count.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "config/config.h"

static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(path, sizeof path, "/tmp/mcdc-fuzz-config-%d.yaml", (int)getpid());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        abort();
    if (size > 0 && fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);
    FILE *sink = fopen("/dev/null", "w");
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_config *cfg = config_load(path, sink, &err);
    config_free(cfg);
    fclose(sink);
    return 0;
}

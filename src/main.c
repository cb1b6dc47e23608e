/*
 * mongocdc: command line, configuration, libev main loop, exit codes.
 * (Skeleton: the full CLI arrives with the config module.)
 */
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "version.h"

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("mongocdc %s\n", MCDC_VERSION);
        return MCDC_EXIT_OK;
    }
    fprintf(stderr, "usage: mongocdc -c FILE | --validate -c FILE | --version\n");
    return MCDC_EXIT_USAGE;
}

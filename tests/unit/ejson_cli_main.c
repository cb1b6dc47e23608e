/*
 * A stand-alone front end for encode_cli_main, so the writer's command line
 * (and the differential oracle test) can run without the daemon's main:
 *   mcdc_encode_cli encode [options] < docs.bson
 */
#include <stdio.h>
#include <string.h>

#include "encode/encode.h"

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "encode") != 0) {
        fprintf(stderr, "usage: %s encode [options]\n", argv[0]);
        return 2;
    }
    return encode_cli_main(argc - 1, argv + 1);
}

/*
 * tools: the operator commands around a switch between Debezium and mongocdc
 * (docs/MIGRATING.md):
 *   mongocdc offsets ...         show, set, reset, export, import and copy
 *                                stored positions (offsets_cli.c)
 *   mongocdc config convert FILE a Debezium connector configuration to
 *                                mongocdc's YAML (convert.c)
 *
 * Thread: main (command-line programs).
 */
#ifndef MCDC_TOOLS_TOOLS_H
#define MCDC_TOOLS_TOOLS_H

/*
 * `mongocdc offsets SUBCOMMAND -c FILE [ARGS]` with argv[0] = "offsets".
 * Returns the exit code: 0 done, 1 failed (I/O, Kafka, a store held by a
 * running daemon, a refused value), 2 usage or configuration. Output goes
 * to stdout, diagnostics to stderr. mongoc_init() must have run (the
 * configuration loader parses the connection string).
 */
int offsets_cli_main(int argc, char **argv);

/*
 * `mongocdc config convert FILE [--worker WORKER.properties]` with argv[0] =
 * "config": reads a Kafka Connect connector JSON ({"name": ..., "config":
 * {...}}, or the bare config object) or a Debezium Server
 * application.properties and prints mongocdc's YAML on stdout; every key it
 * cannot carry is named on stderr (and in a YAML comment). Returns 0 when
 * converted (even with keys left behind), 1 when FILE is unreadable or is
 * neither form, 2 on usage errors.
 */
int config_cli_main(int argc, char **argv);

#endif

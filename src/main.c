/*
 * mongocdc: the command line, the configuration, logging, the libev main loop
 * and the exit codes (design.md "Threads and ownership"; style.md §4.7).
 *
 *   mongocdc -c FILE             run the daemon
 *   mongocdc --validate -c FILE  check FILE: exit 0 valid, 2 invalid
 *   mongocdc encode ...          encoder subcommand (encode_cli_main)
 *   mongocdc signal -c FILE ...  send a Debezium signal (signal_cli_main)
 *   mongocdc config convert FILE Debezium configuration to YAML (config_cli_main)
 *   mongocdc offsets ...         show, set, reset, export, import, copy stored
 *                                positions (offsets_cli_main)
 *
 * Exit codes: 0 clean shutdown, 1 runtime failure, 2 usage or configuration.
 * The main thread runs the libev default loop: SIGINT/SIGTERM ask the
 * topology to stop (it breaks the loop when its last capture task has ended;
 * a second signal exits at once with 1), SIGHUP reopens the log file.
 * libmongoc's log goes through our logger with component "mongoc", with the
 * connection string's secrets masked (config_redact_text).
 */
#include <ev.h>
#include <mongoc/mongoc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"
#include "config/config.h"
#include "version.h"
#include "encode/encode.h"
#include "metrics/metrics.h"
#include "metrics/metrics_http.h"
#include "preflight/preflight.h"
#include "signals/notify.h"
#include "signals/signals.h"
#include "sink/sink.h"
#include "tools/tools.h"
#include "topology/topology.h"
#include "worker/worker.h"

#define URI_SHOWN_MAX 1024
#define UNSUPPORTED_MAX 64

struct cli {
    const char *config;
    bool validate, help, version, config_help, config_markdown;
    bool check; /* mongocdc check -c FILE */
};

static const char *const dialect_names[MCDC_DIALECT_COUNT] = {"1.9", "3.x"};

static void usage(FILE *out)
{
    fputs("usage: mongocdc -c FILE              capture changes as configured in FILE\n"
          "       mongocdc --validate -c FILE   check FILE (exit 0 valid, 2 invalid)\n"
          "       mongocdc check -c FILE        preflight: server, access, oplog, images,\n"
          "                                     stored offsets, Kafka (exit 0 all pass)\n"
          "       mongocdc encode [ARGS]        encode documents from stdin (see encode --help)\n"
          "       mongocdc signal -c FILE TYPE [ARGS]\n"
          "                                     send a signal: execute-snapshot DB.COLL...\n"
          "                                     [--blocking] [--filter DB.COLL=JSON],\n"
          "                                     stop-snapshot [DB.COLL...], pause-snapshot,\n"
          "                                     resume-snapshot, log MESSAGE (see signal --help)\n"
          "       mongocdc offsets show|export|import|copy|set|reset -c FILE [ARGS]\n"
          "                                     stored positions: show, set by timestamp or\n"
          "                                     resume token, reset, export/import as JSON\n"
          "                                     lines, copy between a file store, a Kafka\n"
          "                                     topic and a Debezium offsets file (see\n"
          "                                     offsets --help)\n"
          "       mongocdc config convert FILE [--worker WORKER.properties]\n"
          "                                     a Debezium connector JSON or Debezium Server\n"
          "                                     application.properties as mongocdc YAML\n"
          "       mongocdc --config-help        every option with type, default and meaning\n"
          "       mongocdc --config-markdown    the same, as docs/CONFIGURATION.md\n"
          "       mongocdc --version | --help\n",
          out);
}

/* One configuration file: a second -c is a usage error rather than a
 * silent choice of one of them. */
static bool set_config(struct cli *cli, const char *path)
{
    if (cli->config) {
        fprintf(stderr, "mongocdc: -c given twice (expected one configuration file)\n");
        usage(stderr);
        return false;
    }
    cli->config = path;
    return true;
}

/* Returns -1 to go on, or an exit code. */
static int parse_args(int argc, char **argv, struct cli *cli)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "mongocdc: %s needs a file name\n", a);
                return MCDC_EXIT_USAGE;
            }
            if (!set_config(cli, argv[++i]))
                return MCDC_EXIT_USAGE;
        } else if (strncmp(a, "--config=", 9) == 0) {
            if (!set_config(cli, a + 9))
                return MCDC_EXIT_USAGE;
        } else if (strcmp(a, "--validate") == 0) {
            cli->validate = true;
        } else if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
            cli->version = true;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            cli->help = true;
        } else if (strcmp(a, "--config-help") == 0) {
            cli->config_help = true;
        } else if (strcmp(a, "--config-markdown") == 0) {
            cli->config_markdown = true;
        } else {
            fprintf(stderr, "mongocdc: unknown argument '%s'\n", a);
            usage(stderr);
            return MCDC_EXIT_USAGE;
        }
    }
    return -1;
}

static int run_encode(int argc, char **argv)
{
    return encode_cli_main(argc, argv);
}

static int run_signal(int argc, char **argv)
{
    setenv("MONGOC_DISABLE_SHM", "1", 0); /* as for the daemon, see main() */
    mongoc_init();
    mongoc_log_set_handler(NULL, NULL); /* the command's own messages suffice */
    int rc = signal_cli_main(argc, argv);
    mongoc_cleanup();
    return rc;
}

static int run_offsets(int argc, char **argv)
{
    setenv("MONGOC_DISABLE_SHM", "1", 0); /* as for the daemon, see main() */
    mongoc_init(); /* the configuration loader parses the connection string */
    mongoc_log_set_handler(NULL, NULL);
    int rc = offsets_cli_main(argc, argv);
    mongoc_cleanup();
    return rc;
}

/* mongoc_log_func_t: libmongoc's levels onto ours; TRACE is DEBUG. data is
 * the configuration: a driver message may quote the connection string or
 * parts of it (a host it failed to resolve), so it goes through the redactor
 * with the configured URI's secrets. */
static void mongoc_log_bridge(mongoc_log_level_t level, const char *domain, const char *message,
                              void *data)
{
    const struct mcdc_config *cfg = data;
    enum mcdc_log_level l = MCDC_LOG_DEBUG;
    if (level == MONGOC_LOG_LEVEL_ERROR || level == MONGOC_LOG_LEVEL_CRITICAL)
        l = MCDC_LOG_ERROR;
    else if (level == MONGOC_LOG_LEVEL_WARNING)
        l = MCDC_LOG_WARN;
    else if (level == MONGOC_LOG_LEVEL_MESSAGE || level == MONGOC_LOG_LEVEL_INFO)
        l = MCDC_LOG_INFO;
    if (!MCDC_LOG_ENABLED(l))
        return;
    char line[4096];
    snprintf(line, sizeof line, "%s: %s", domain ? domain : "mongoc", message ? message : "");
    char *shown = config_redact_text(line, cfg ? cfg->connection_string : NULL);
    mcdc_log_write(l, "mongoc", shown);
    free(shown);
}

struct daemon {
    struct topology *topo;
    struct signal_bus *bus;
    int stops;
};

static void on_stop_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
    struct daemon *dm = w->data;
    (void)loop;
    (void)revents;
    if (++dm->stops > 1) {
        LOG_ERROR("signal %d again: exiting now without a clean stop", w->signum);
        _exit(MCDC_EXIT_FAILURE);
    }
    LOG_INFO("signal %d: stopping (send it again to exit at once)", w->signum);
    /* First: no signal reaches a task any more, so what the tasks drain
     * before their last commit is all they were handed (signals.h). */
    signal_bus_close(dm->bus);
    topology_request_stop(dm->topo);
}

static void on_hup_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
    const struct mcdc_config *cfg = w->data;
    struct mcdc_error err = MCDC_ERROR_INIT;
    (void)loop;
    (void)revents;
    if (!cfg->log_file)
        LOG_INFO("SIGHUP: logging to stderr, nothing to reopen");
    else if (mcdc_log_reopen(&err))
        LOG_INFO("SIGHUP: log file reopened");
    else
        LOG_ERROR("SIGHUP: cannot reopen the log file: %s", err.msg);
}

/* The daemon's signal bus, notifier and signal channels: every task
 * subscribes to the bus, the channels publish on it; all three outlive the
 * tasks. */
struct daemon_signals {
    struct signal_bus *bus;
    struct notifier *notifier;
    struct signal_channels *channels;
};

static void daemon_signals_stop(struct daemon_signals *sg)
{
    signal_channels_stop(sg->channels);
    notify_destroy(sg->notifier);
    signal_bus_destroy(sg->bus);
    memset(sg, 0, sizeof *sg);
}

/* false with err when the notifier or a channel cannot start (nothing is
 * left running then). */
static bool daemon_signals_start(const struct mcdc_config *cfg, struct daemon_signals *sg,
                                 struct mcdc_error *err)
{
    memset(sg, 0, sizeof *sg);
    sg->bus = signal_bus_new();
    sg->notifier = notify_new(cfg, err);
    if (sg->notifier == NULL && err->domain != MCDC_ERR_NONE) {
        daemon_signals_stop(sg);
        return false;
    }
    sg->channels = signal_channels_start(cfg, sg->bus, err);
    if (sg->channels == NULL && err->domain != MCDC_ERR_NONE) {
        daemon_signals_stop(sg);
        return false;
    }
    return true;
}

/*
 * A stop signal (SIGINT, SIGTERM) that arrives before the loop's watchers
 * exist, while the configuration loads and the log opens: remembered by
 * on_early_signal and fed to the loop once its watchers run, so a daemon
 * told to stop during its start-up stops cleanly (exit 0, offsets stored)
 * instead of being killed by the signal's default action.
 */
static volatile sig_atomic_t early_signal;

static void on_early_signal(int sig)
{
    early_signal = sig;
}

/*
 * After the loop has ended: joining the tasks and closing their connection
 * pools (libmongoc waits for its monitor threads) can take seconds against a
 * server that accepts connections but never answers. A stop signal then
 * still exits at once, as one does while the loop runs (on_stop_signal).
 * Async-signal-safe: write(2) and _exit(2) only.
 */
static void on_late_signal(int sig)
{
    static const char msg[] = "mongocdc: stop signal during shutdown: exiting now without waiting "
                              "for the connections to close\n";
    (void)sig;
    ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)n;
    _exit(MCDC_EXIT_FAILURE);
}

static void catch_late_signals(void)
{
    struct sigaction sa = {.sa_handler = on_late_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void catch_early_signals(void)
{
    struct sigaction sa = {.sa_handler = on_early_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* Watchers start before topology_start so a signal during discovery is kept
 * pending and handled as soon as the loop runs. */
static int run_capture(const struct mcdc_config *cfg)
{
    struct ev_loop *loop = ev_default_loop(0);
    struct daemon dm = {0};
    ev_signal sigint_w, sigterm_w, sighup_w;
    struct mcdc_error err = MCDC_ERROR_INIT;
    if (!loop) {
        LOG_ERROR("cannot initialise the libev loop");
        return MCDC_EXIT_FAILURE;
    }
    ev_signal_init(&sigint_w, on_stop_signal, SIGINT);
    ev_signal_init(&sigterm_w, on_stop_signal, SIGTERM);
    ev_signal_init(&sighup_w, on_hup_signal, SIGHUP);
    sigint_w.data = sigterm_w.data = &dm;
    sighup_w.data = (void *)cfg; /* read-only in the handler */
    ev_signal_start(loop, &sigint_w);
    ev_signal_start(loop, &sigterm_w);
    ev_signal_start(loop, &sighup_w);
    if (early_signal != 0)
        ev_feed_signal_event(loop, early_signal);

    struct metrics_http *mh = NULL;
    /* Per-collection counters cost a lookup per event: only when served. */
    metrics_set_collection_cap(cfg->metrics_enabled ? (size_t)cfg->metrics_collections_max : 0);
    if (cfg->metrics_enabled) {
        int port = 0;
        mh = metrics_http_start(cfg->metrics_bind_address, (int)cfg->metrics_port,
                                cfg->metrics_ready_window_ms, &port, &err);
        if (mh == NULL) {
            LOG_ERROR("cannot start: %s", err.msg);
            return MCDC_EXIT_FAILURE;
        }
        LOG_INFO("metrics: listening on %s port %d (/metrics, /health, /ready)",
                 cfg->metrics_bind_address, port);
    }
    struct daemon_signals sg;
    if (!daemon_signals_start(cfg, &sg, &err)) {
        LOG_ERROR("cannot start: %s", err.msg);
        metrics_http_stop(mh);
        return MCDC_EXIT_FAILURE;
    }
    dm.bus = sg.bus;
    dm.topo = topology_start(cfg, loop, sg.bus, sg.notifier, &err);
    if (!dm.topo) {
        LOG_ERROR("cannot start: %s", err.msg);
        daemon_signals_stop(&sg);
        metrics_http_stop(mh);
        return MCDC_EXIT_FAILURE;
    }
    ev_run(loop, 0);
    /* The handler goes in before the watchers stop: with signalfd libev
     * unblocks a pending signal on stop (it then reaches the handler); with
     * its own handler libev restores the default on stop (set it again). */
    catch_late_signals();
    ev_signal_stop(loop, &sigint_w);
    ev_signal_stop(loop, &sigterm_w);
    catch_late_signals();
    int rc = topology_join(dm.topo);
    topology_destroy(dm.topo);
    daemon_signals_stop(&sg);
    metrics_http_stop(mh);
    LOG_INFO("stopped (exit code %d)", rc);
    return rc;
}

static void warn_unsupported(const struct mcdc_config *cfg, bool to_log)
{
    const char *names[UNSUPPORTED_MAX];
    size_t n = config_unsupported_set(cfg, names, UNSUPPORTED_MAX);
    for (size_t i = 0; i < n && i < UNSUPPORTED_MAX; i++) {
        if (to_log)
            LOG_WARN("%s: not supported yet", names[i]);
        else
            fprintf(stderr, "%s: warning: %s: not supported yet\n", cfg->path, names[i]);
    }
    const char *ignored[UNSUPPORTED_MAX];
    n = config_ignored_set(cfg, ignored, UNSUPPORTED_MAX);
    for (size_t i = 0; i < n && i < UNSUPPORTED_MAX; i++) {
        if (to_log)
            LOG_WARN("%s", ignored[i]);
        else
            fprintf(stderr, "warning: %s\n", ignored[i]);
    }
}

static int run_daemon(const struct mcdc_config *cfg)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    char uri[URI_SHOWN_MAX];
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, NULL); /* a closed socket is an error return, not a kill */

    if (!mcdc_log_open((enum mcdc_log_level)cfg->log_level, (enum mcdc_log_format)cfg->log_format,
                       cfg->log_file, &err)) {
        fprintf(stderr, "mongocdc: log.file: %s\n", err.msg);
        return MCDC_EXIT_FAILURE;
    }
    mcdc_log_set_component("main");
    mongoc_log_set_handler(mongoc_log_bridge, (void *)cfg); /* read-only */
    config_redact_uri(cfg->connection_string, uri, sizeof uri);
    LOG_INFO("mongocdc %s starting: config %s, topic.prefix %s, Debezium %s layout, %s",
             MCDC_VERSION, cfg->path, cfg->topic_prefix, dialect_names[cfg->dialect], uri);
    warn_unsupported(cfg, true);
    int rc = run_capture(cfg);
    mcdc_log_close();
    return rc;
}

/*
 * --validate, after the loader's checks: what the daemon builds from the
 * configuration alone when it starts, as a backstop (the encoder each task
 * makes, whose rules the loader mirrors), and the Kafka producers (the
 * sink's and the notification sink channel's). librdkafka judges the property set as a
 * whole only in rd_kafka_new (an ssl.ca.location it cannot read, properties
 * that contradict each other), so each is created and destroyed at once;
 * nothing is sent. Prints "FILE:LINE:COL: kafka: ..." for each refusal and
 * returns how many there were.
 */
static int validate_producers(const struct mcdc_config *cfg)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    int line = cfg->kafka.count > 0 ? cfg->kafka.items[0].line : 1;
    int col = cfg->kafka.count > 0 ? cfg->kafka.items[0].col : 1;
    int problems = 0;
    int level = mcdc_log_level_current;

    /* librdkafka's own lines (a broker it tries to reach meanwhile, the
     * detail of a refusal) are not wanted here: the refusal is printed once. */
    mcdc_log_level_current = -1;
    if (cfg->sink_type == MCDC_SINK_KAFKA) {
        struct sink *sink = sink_new(cfg, "validate", NULL, NULL, &err);
        if (sink == NULL) {
            fprintf(stderr, "%s:%d:%d: kafka: %s\n", cfg->path, line, col, err.msg);
            problems++;
        }
        sink_destroy(sink);
    }
    err = (struct mcdc_error)MCDC_ERROR_INIT;
    struct encoder *enc = encoder_new(cfg, &err); /* each task builds one at start */
    if (enc == NULL) {
        fprintf(stderr, "%s: %s\n", cfg->path, err.msg);
        problems++;
    }
    encoder_destroy(enc);
    err = (struct mcdc_error)MCDC_ERROR_INIT;
    struct notifier *n = notify_new(cfg, &err);
    if (n == NULL && err.domain != MCDC_ERR_NONE) {
        fprintf(stderr, "%s:%d:%d: kafka: %s\n", cfg->path, line, col, err.msg);
        problems++;
    }
    notify_destroy(n);
    mcdc_log_level_current = level;
    return problems;
}

static int run_check(const struct mcdc_config *cfg)
{
    /* libmongoc's own warnings stay out of the report. */
    mongoc_log_set_handler(NULL, NULL);
    return preflight_run(cfg, stdout);
}

int main(int argc, char **argv)
{
    struct cli cli = {0};
    if (argc > 1 && strcmp(argv[1], "encode") == 0)
        return run_encode(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "signal") == 0)
        return run_signal(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "config") == 0)
        return config_cli_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "offsets") == 0)
        return run_offsets(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "check") == 0) {
        cli.check = true;
        argc--, argv++; /* "check" takes the program name's place */
    }
    int rc = parse_args(argc, argv, &cli);
    if (rc >= 0)
        return rc;
    if (cli.help) {
        usage(stdout);
        return MCDC_EXIT_OK;
    }
    if (cli.version) {
        printf("mongocdc %s\n", MCDC_VERSION);
        return MCDC_EXIT_OK;
    }
    if (cli.config_help || cli.config_markdown) {
        if (cli.config_help)
            config_print_help(stdout);
        else
            config_print_markdown(stdout);
        return MCDC_EXIT_OK;
    }
    if (!cli.config) {
        if (cli.validate)
            fputs("mongocdc: --validate needs -c FILE\n", stderr);
        usage(stderr);
        return MCDC_EXIT_USAGE;
    }
    if (!cli.validate && !cli.check)
        catch_early_signals(); /* the daemon: a stop during start-up is a clean stop */
    struct mcdc_error err = MCDC_ERROR_INIT;
    /* libmongoc's shared-memory counters (/dev/shm/mongoc-<pid>, read only by
     * its mongoc-stat debugging tool) outlive a SIGKILLed process; a later
     * process given the same pid then fails to create its own and libmongoc
     * prints a warning to stderr before any handler is set. mongocdc exposes
     * no such counters, so it turns them off. */
    setenv("MONGOC_DISABLE_SHM", "1", 0);
    mongoc_init(); /* before any libmongoc call, the loader's URI check included */
    struct mcdc_config *cfg = config_load(cli.config, stderr, &err);
    if (!cfg) {
        fprintf(stderr, "mongocdc: %s\n", err.msg);
        mongoc_cleanup();
        return MCDC_EXIT_USAGE;
    }
    if (cli.validate) {
        int problems = validate_producers(cfg);
        warn_unsupported(cfg, false);
        if (problems > 0) {
            fprintf(stderr, "mongocdc: %s: %d problem%s\n", cli.config, problems,
                    problems == 1 ? "" : "s");
            rc = MCDC_EXIT_USAGE;
        } else {
            printf("%s: valid\n", cli.config);
            rc = MCDC_EXIT_OK;
        }
    } else if (cli.check) {
        rc = run_check(cfg);
    } else {
        rc = run_daemon(cfg);
    }
    config_free(cfg);
    mongoc_cleanup();
    return rc;
}

/*
 * preflight: `mongocdc check -c FILE`, the checks an operator runs before the
 * first start and in deployment pipelines. Each check prints one line,
 * "PASS|FAIL|WARN|SKIP  <check>: <detail>", then a verdict line.
 *
 * Checks (what the configuration needs, from MongoDB's manual where noted):
 *   mongodb        connects (a failure names the hosts and the first
 *                  connection error); server version (buildInfo) and topology (hello):
 *                  change streams need a replica set (or a sharded cluster)
 *                  and MongoDB >= 3.6, pre-/post-images >= 6.0
 *   access         find on every captured collection and opening a change
 *                  stream (privileges `find` and `changeStream`, "Change
 *                  Streams" > "Access Control"), find on local.oplog.rs
 *                  (oplog headroom; capture.mode oplog needs it), insert into
 *                  signal.data.collection when set; collStats on the oplog and
 *                  listDatabases (WARN). A refusal (13 Unauthorized) names the
 *                  missing privilege, its resource, what needs it and a role
 *                  that grants it (access.c)
 *   oplog          the oplog's span (oldest to newest entry) against
 *                  offsets.flush.interval.ms once the oplog is full
 *                  (collStats size / maxSize)
 *   pre-images     capture.mode *_with_pre_image: every captured collection
 *                  has changeStreamPreAndPostImages enabled (listCollections
 *                  options; MongoDB 6.0 collMod)
 *   offsets        the stored position, if any, is still inside the oplog; a
 *                  running daemon (it holds the offsets file's lock) is a WARN
 *                  and its positions are read without the lock
 *   kafka          the brokers answer a metadata request with the kafka:
 *                  settings (sink.type kafka or offsets.storage kafka)
 *   offsets-topic  offsets.storage kafka: offsets.topic has
 *                  cleanup.policy=compact (DescribeConfigs)
 *   kafka-signal   signal.enabled.channels has kafka: the channel's cluster
 *                  (signal.kafka.bootstrap.servers or kafka's, with
 *                  signal.consumer.*) answers; WARN when signal.kafka.topic
 *                  does not exist yet
 */
#ifndef MCDC_PREFLIGHT_PREFLIGHT_H
#define MCDC_PREFLIGHT_PREFLIGHT_H

#include <stdio.h>

#include "config/config.h"

/*
 * Runs every check for cfg (borrowed) and prints to out. Returns
 * MCDC_EXIT_OK when no check failed, MCDC_EXIT_FAILURE otherwise (the last
 * line names the failed checks). mongoc_init() must have been called.
 */
int preflight_run(const struct mcdc_config *cfg, FILE *out);

#endif

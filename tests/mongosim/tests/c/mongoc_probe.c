/*
 * mongoc_probe: drives the MongoDB simulator through libmongoc 1.23 with a
 * mongoc_client_pool_t, the way the capture pipeline does.
 *
 *   mongoc_probe watch  URI N TIMEOUT_MS [RESUME_TOKEN_JSON]
 *       cluster-level change stream (mongoc_client_watch); prints each event as
 *       one canonical Extended JSON line, then "TOKEN <json>" with the cached
 *       resume token (the postBatchResumeToken when the batch is exhausted).
 *       A stream that mongoc could not resume is reopened from the last token
 *       ("REOPEN ..."), as the capture pipeline does.
 *   mongoc_probe wait   URI TIMEOUT_MS
 *       opens a cluster stream, returns after TIMEOUT_MS without events and
 *       prints "TOKEN <json>" (shows the resume token advancing while idle).
 *   mongoc_probe oplog  URI SECS INC N TIMEOUT_MS
 *       tailable awaitData find on local.oplog.rs with {ts: {$gt: Timestamp}}.
 *   mongoc_probe crud   URI
 *       insert, find, update, count through a pooled client; prints results.
 *   mongoc_probe crud-single URI
 *       the same through a single-threaded mongoc_client_t.
 *
 * Exit status: 0 done, 2 usage, 3 driver error (printed as "ERROR domain code msg"),
 * 4 timeout before N results.
 */
#define _POSIX_C_SOURCE 200809L
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t now_ms(void) { return bson_get_monotonic_time() / 1000; }

static void print_doc(const char *prefix, const bson_t *doc) {
  char *s = bson_as_canonical_extended_json(doc, NULL);
  printf("%s%s\n", prefix, s);
  fflush(stdout);
  bson_free(s);
}

static int report(const bson_error_t *err, const bson_t *reply) {
  printf("ERROR %u %u %s\n", err->domain, err->code, err->message);
  if (reply) print_doc("REPLY ", reply);
  fflush(stdout);
  return 3;
}

static mongoc_change_stream_t *open_stream(mongoc_client_t *client, const bson_t *token) {
  bson_t opts = BSON_INITIALIZER;
  bson_t pipeline = BSON_INITIALIZER;
  BSON_APPEND_INT64(&opts, "maxAwaitTimeMS", 300);
  if (token) BSON_APPEND_DOCUMENT(&opts, "resumeAfter", token);
  mongoc_change_stream_t *cs = mongoc_client_watch(client, &pipeline, &opts);
  bson_destroy(&pipeline);
  bson_destroy(&opts);
  return cs;
}

/* Like the capture pipeline: when mongoc's own resume fails (the stream is dead, e.g. its
 * resume aggregate met a connection the network dropped), open a new stream from the last
 * token delivered ("REOPEN"), at most 3 times. */
static int do_watch(mongoc_client_pool_t *pool, int n, int64_t timeout_ms, const char *token_json, int idle) {
  mongoc_client_t *client = mongoc_client_pool_pop(pool);
  bson_error_t err;
  const bson_t *doc = NULL;
  const bson_t *reply = NULL;
  bson_t *last = NULL;
  int got = 0, rc = 0, reopens = 0;
  if (token_json) {
    last = bson_new_from_json((const uint8_t *) token_json, -1, &err);
    if (!last) return report(&err, NULL);
  }
  mongoc_change_stream_t *cs = open_stream(client, last);
  int64_t deadline = now_ms() + timeout_ms;
  while ((idle || got < n) && now_ms() < deadline) {
    if (mongoc_change_stream_next(cs, &doc)) {
      print_doc("EVENT ", doc);
      got++;
      bson_destroy(last);
      last = bson_copy(mongoc_change_stream_get_resume_token(cs));
      continue;
    }
    if (mongoc_change_stream_error_document(cs, &err, &reply)) {
      if (reopens < 3 && (err.domain == MONGOC_ERROR_STREAM || err.domain == MONGOC_ERROR_SERVER_SELECTION)) {
        printf("REOPEN %u %u %s\n", err.domain, err.code, err.message);
        fflush(stdout);
        reopens++;
        mongoc_change_stream_destroy(cs);
        cs = open_stream(client, last);
        continue;
      }
      rc = report(&err, reply);
      break;
    }
  }
  if (rc == 0) {
    const bson_t *tok = mongoc_change_stream_get_resume_token(cs);
    if (tok) print_doc("TOKEN ", tok);
    if (!idle && got < n) rc = 4;
  }
  bson_destroy(last);
  mongoc_change_stream_destroy(cs);
  mongoc_client_pool_push(pool, client);
  return rc;
}

static int do_oplog(mongoc_client_pool_t *pool, uint32_t secs, uint32_t inc, int n, int64_t timeout_ms) {
  mongoc_client_t *client = mongoc_client_pool_pop(pool);
  mongoc_collection_t *coll = mongoc_client_get_collection(client, "local", "oplog.rs");
  bson_t filter = BSON_INITIALIZER, ts, opts = BSON_INITIALIZER;
  bson_error_t err;
  const bson_t *doc;
  int got = 0, rc = 0;
  BSON_APPEND_DOCUMENT_BEGIN(&filter, "ts", &ts);
  BSON_APPEND_TIMESTAMP(&ts, "$gt", secs, inc);
  bson_append_document_end(&filter, &ts);
  BSON_APPEND_BOOL(&opts, "tailable", true);
  BSON_APPEND_BOOL(&opts, "awaitData", true);
  BSON_APPEND_INT64(&opts, "maxAwaitTimeMS", 300);
  mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, &filter, &opts, NULL);
  int64_t deadline = now_ms() + timeout_ms;
  while (got < n && now_ms() < deadline) {
    if (mongoc_cursor_next(cur, &doc)) {
      print_doc("ENTRY ", doc);
      got++;
      continue;
    }
    if (mongoc_cursor_error(cur, &err)) {
      rc = report(&err, NULL);
      break;
    }
    if (!mongoc_cursor_more(cur)) {
      printf("DEAD\n");
      rc = 3;
      break;
    }
  }
  if (rc == 0 && got < n) rc = 4;
  mongoc_cursor_destroy(cur);
  bson_destroy(&opts);
  bson_destroy(&filter);
  mongoc_collection_destroy(coll);
  mongoc_client_pool_push(pool, client);
  return rc;
}

static int do_crud(mongoc_client_t *client) {
  mongoc_collection_t *coll = mongoc_client_get_collection(client, "probe", "items");
  bson_error_t err;
  bson_t reply;
  int rc = 0;
  bson_t *doc = BCON_NEW("_id", BCON_INT32(1), "name", BCON_UTF8("one"), "n", BCON_INT64(5));
  if (!mongoc_collection_insert_one(coll, doc, NULL, &reply, &err)) {
    rc = report(&err, &reply);
    goto done;
  }
  bson_destroy(&reply);
  bson_destroy(doc);
  doc = BCON_NEW("_id", BCON_INT32(1));
  if (mongoc_collection_insert_one(coll, doc, NULL, &reply, &err)) {
    printf("NODUP\n");
    rc = 3;
    bson_destroy(&reply);
    goto done;
  }
  printf("DUP %u\n", err.code);
  bson_destroy(&reply);
  {
    bson_t *sel = BCON_NEW("_id", BCON_INT32(1));
    bson_t *upd = BCON_NEW("$inc", "{", "n", BCON_INT32(2), "}");
    if (!mongoc_collection_update_one(coll, sel, upd, NULL, &reply, &err)) {
      rc = report(&err, &reply);
    } else {
      print_doc("UPDATE ", &reply);
    }
    bson_destroy(&reply);
    bson_destroy(sel);
    bson_destroy(upd);
  }
  {
    bson_t empty = BSON_INITIALIZER;
    int64_t cnt = mongoc_collection_count_documents(coll, &empty, NULL, NULL, &reply, &err);
    printf("COUNT %lld\n", (long long) cnt);
    bson_destroy(&reply);
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, &empty, NULL, NULL);
    const bson_t *d;
    while (mongoc_cursor_next(cur, &d)) print_doc("DOC ", d);
    if (mongoc_cursor_error(cur, &err)) rc = report(&err, NULL);
    mongoc_cursor_destroy(cur);
    bson_destroy(&empty);
  }
done:
  bson_destroy(doc);
  mongoc_collection_destroy(coll);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: mongoc_probe watch|wait|oplog|crud URI ...\n");
    return 2;
  }
  mongoc_init();
  bson_error_t err;
  mongoc_uri_t *uri = mongoc_uri_new_with_error(argv[2], &err);
  if (!uri) return report(&err, NULL);
  mongoc_client_pool_t *pool = mongoc_client_pool_new(uri);
  mongoc_client_pool_set_error_api(pool, MONGOC_ERROR_API_VERSION_2);
  int rc = 2;
  if (strcmp(argv[1], "watch") == 0 && argc >= 5) {
    rc = do_watch(pool, atoi(argv[3]), atoll(argv[4]), argc >= 6 ? argv[5] : NULL, 0);
  } else if (strcmp(argv[1], "wait") == 0 && argc >= 4) {
    rc = do_watch(pool, 0, atoll(argv[3]), NULL, 1);
  } else if (strcmp(argv[1], "oplog") == 0 && argc >= 7) {
    rc = do_oplog(pool, (uint32_t) strtoul(argv[3], NULL, 10), (uint32_t) strtoul(argv[4], NULL, 10),
                  atoi(argv[5]), atoll(argv[6]));
  } else if (strcmp(argv[1], "crud") == 0) {
    mongoc_client_t *client = mongoc_client_pool_pop(pool);
    rc = do_crud(client);
    mongoc_client_pool_push(pool, client);
  } else if (strcmp(argv[1], "crud-single") == 0) {
    /* a single-threaded client: OP_QUERY hello heartbeats on the shared socket */
    mongoc_client_t *client = mongoc_client_new_from_uri(uri);
    mongoc_client_set_error_api(client, MONGOC_ERROR_API_VERSION_2);
    rc = do_crud(client);
    mongoc_client_destroy(client);
  } else {
    fprintf(stderr, "bad arguments\n");
  }
  mongoc_client_pool_destroy(pool);
  mongoc_uri_destroy(uri);
  mongoc_cleanup();
  return rc;
}

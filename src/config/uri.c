/*
 * config/uri: the MongoDB connection string. Debezium's 1.x seed list
 * (mongodb.hosts) and its credential and TLS properties are folded into one
 * URI the way Debezium's DefaultMongoDbClientFactory applies them: settings
 * first, then the connection string on top, so whatever the URI already says
 * wins (debezium-format.md §6.3). The result is checked with libmongoc's own
 * parser (mongoc_uri_new_with_error). Passwords and secret URI options are
 * never printed: config_redact_uri / cfg_redact_text.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <mongoc/mongoc.h>

#include "common/hex.h"
#include "common/xalloc.h"
#include "config/internal.h"

#define MAX_SPANS 8

struct span {
    size_t start, len;
};

/* URI options whose values are secret (libmongoc's names, case-insensitive). */
static const char *const secret_options[] = {"tlscertificatekeyfilepassword",
                                             "sslclientcertificatekeypassword",
                                             "authmechanismproperties", NULL};

/* A character of a host list: names, IPv4/IPv6 literals, ports, commas,
 * percent-encoded socket paths. */
static bool is_host_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr(".:,[]%-_~", c) != NULL);
}

/* The '@' that ends the user info of the authority starting at start (just
 * after "://"), or NULL when there is none. The user info runs to the last
 * '@' that is followed by a host list (host characters up to '/', '?', a
 * blank or the end; or a Unix socket path starting with '/'), whatever the
 * user info itself contains; an '@' in the value of an option (after a '/',
 * a '?' and a '=') is not one. A malformed user info therefore ends as late
 * as it can: the redaction errs towards hiding. In free text (in_text) the
 * search also ends at a blank, where the URI does. */
static const char *userinfo_end(const char *start, bool in_text)
{
    const char *chosen = NULL, *host_end = NULL;
    for (const char *p = start; *p && !(in_text && (*p == ' ' || *p == '\n' || *p == '\t')); p++) {
        if (*p != '@')
            continue;
        const char *h = p + 1;
        while (is_host_char(*h))
            h++;
        bool socket = h == p + 1 && *h == '/'; /* a raw Unix socket path */
        if ((h == p + 1 && !socket) || !(*h == '\0' || *h == '/' || *h == '?' || *h == ' ' ||
                                         *h == '"' || *h == '\'' || *h == ']' || *h == '\n'))
            continue;
        const char *q =
            chosen && *host_end == '/' ? memchr(host_end, '?', (size_t)(p - host_end)) : NULL;
        if (q && memchr(q, '=', (size_t)(p - q)))
            break; /* in an option's value: option names have no '@' */
        chosen = p;
        host_end = h;
    }
    return chosen;
}

/* The byte ranges of uri that are secret: the password of the user info and
 * the values of secret options. */
static size_t secret_spans(const char *uri, struct span *out, size_t max)
{
    size_t n = 0;
    const char *start = strstr(uri, "://");
    if (!start)
        return 0;
    start += 3;
    const char *at = userinfo_end(start, false);
    if (at) {
        const char *colon = memchr(start, ':', (size_t)(at - start));
        if (colon && n < max)
            out[n++] = (struct span){(size_t)(colon + 1 - uri), (size_t)(at - colon - 1)};
    }
    const char *query = strchr(at ? at : start, '?');
    for (const char *p = query; p && *p && n < max;) {
        p++;
        const char *eq = strchr(p, '=');
        const char *amp = strpbrk(p, "&;");
        if (!eq || (amp && amp < eq)) {
            p = amp;
            continue;
        }
        size_t vlen = amp ? (size_t)(amp - eq - 1) : strlen(eq + 1);
        for (int i = 0; secret_options[i] && n < max; i++)
            if ((size_t)(eq - p) == strlen(secret_options[i]) &&
                strncasecmp(p, secret_options[i], (size_t)(eq - p)) == 0 && vlen > 0)
                out[n++] = (struct span){(size_t)(eq + 1 - uri), vlen};
        p = amp;
    }
    return n;
}

void config_redact_uri(const char *uri, char *out, size_t cap)
{
    struct span spans[MAX_SPANS];
    size_t ns = uri ? secret_spans(uri, spans, MAX_SPANS) : 0, o = 0;
    if (cap == 0)
        return;
    for (size_t i = 0; uri && uri[i] && o + 1 < cap;) {
        size_t s;
        for (s = 0; s < ns && spans[s].start != i; s++)
            ;
        if (s < ns && spans[s].len > 0) {
            for (const char *m = "****"; *m && o + 1 < cap; m++)
                out[o++] = *m;
            i += spans[s].len;
        } else {
            out[o++] = uri[i++];
        }
    }
    out[o] = '\0';
}

/* RFC 3986 percent-decoding (a malformed escape is kept as it is). */
static char *pct_decode(const char *s, size_t len)
{
    char *out = xmalloc(len + 1), *o = out;
    for (size_t i = 0; i < len; i++) {
        int hi, lo;
        if (s[i] == '%' && i + 2 < len && (hi = mcdc_hex_digit(s[i + 1])) >= 0 &&
            (lo = mcdc_hex_digit(s[i + 2])) >= 0) {
            *o++ = (char)(hi * 16 + lo);
            i += 2;
        } else {
            *o++ = s[i];
        }
    }
    *o = '\0';
    return out;
}

static bool is_word_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

void cfg_mask_secret(char **text, const char *secret)
{
    size_t n = strlen(secret), from = 0;
    char *hit;
    if (n < CFG_SECRET_MIN_ALONE)
        return; /* "p" or "12" alone is any letter or number: only where it stands */
    while ((hit = strstr(*text + from, secret)) != NULL) {
        size_t at = (size_t)(hit - *text);
        bool starts = at == 0 || !is_word_char(hit[-1]) || !is_word_char(secret[0]);
        bool ends = hit[n] == '\0' || !is_word_char(hit[n]) || !is_word_char(secret[n - 1]);
        if (!starts || !ends) { /* inside a longer word: not the secret standing alone */
            from = at + 1;
            continue;
        }
        char *next = xasprintf("%.*s****%s", (int)at, *text, hit + n);
        free(*text);
        *text = next;
        from = at + 4;
    }
}

/* Replaces the value of every secret option ("name=VALUE", name any case) in
 * *text, up to the next '&', ';', blank, quote or bracket. */
static void mask_secret_options(char **text)
{
    for (int i = 0; secret_options[i]; i++) {
        size_t n = strlen(secret_options[i]);
        for (size_t from = 0;;) {
            char *t = *text, *v = NULL;
            for (char *p = t + from; *p; p++)
                if (strncasecmp(p, secret_options[i], n) == 0 && p[n] == '=') {
                    v = p + n + 1;
                    break;
                }
            if (v == NULL)
                break;
            size_t len = strcspn(v, "&; \t\n\"')]");
            from = (size_t)(v - t) + (len > 0 ? 4 : 0);
            if (len == 0)
                continue;
            char *next = xasprintf("%.*s****%s", (int)(v - t), t, v + len);
            free(*text);
            *text = next;
        }
    }
}

/* Replaces the password of every user info in *text: after each "://" when
 * user is NULL, else after each "user:" (a user info quoted without its
 * scheme, as in a driver's host error). */
static void mask_userinfo(char **text, const char *user)
{
    char *needle = user ? xasprintf("%s:", user) : NULL;
    for (size_t from = 0;;) {
        char *t = *text;
        const char *hit = strstr(t + from, needle ? needle : "://");
        if (!hit)
            break;
        const char *start = needle ? hit : hit + 3;
        const char *at = userinfo_end(start, true);
        const char *colon = at ? memchr(start, ':', (size_t)(at - start)) : NULL;
        if (!colon || colon + 1 == at) {
            from = (size_t)(start - t) + 1;
            continue;
        }
        char *next = xasprintf("%.*s****%s", (int)(colon + 1 - t), t, at);
        from = (size_t)(colon + 1 - t) + 4;
        free(*text);
        *text = next;
    }
    free(needle);
}

char *cfg_redact_text(const char *text, const char *uri)
{
    struct span spans[MAX_SPANS];
    size_t ns = uri ? secret_spans(uri, spans, MAX_SPANS) : 0;
    char *res = xstrdup(text ? text : "");
    char *user = NULL;
    for (size_t s = 0; s < ns; s++) {
        char *secret = xstrndup(uri + spans[s].start, spans[s].len);
        char *decoded = pct_decode(uri + spans[s].start, spans[s].len);
        cfg_mask_secret(&res, secret);
        cfg_mask_secret(&res, decoded);
        free(decoded);
        free(secret);
    }
    const char *start = uri ? strstr(uri, "://") : NULL;
    const char *at = start ? userinfo_end(start + 3, false) : NULL;
    if (at) {
        const char *colon = memchr(start + 3, ':', (size_t)(at - start - 3));
        user = xstrndup(start + 3, (size_t)((colon ? colon : at) - start - 3));
    }
    mask_userinfo(&res, NULL);
    mask_secret_options(&res);
    if (user && *user) {
        mask_userinfo(&res, user);
        char *decoded = pct_decode(user, strlen(user));
        if (strcmp(decoded, user) != 0)
            mask_userinfo(&res, decoded);
        free(decoded);
    }
    free(user);
    return res;
}

char *config_redact_text(const char *text, const char *uri)
{
    return cfg_redact_text(text, uri);
}

/* MongoDB's Connection String spec ("Userinfo"): the user name and password
 * MUST be percent-encoded; a raw '@', '?' or '/' in them makes the split
 * ambiguous and drivers split differently (libmongoc takes the first '@'
 * before the first '/'), so such a string is refused before libmongoc sees
 * it. The message names the character and the part, never the text. */
static bool check_userinfo(const char *text, const struct cfg_entry *where, struct cfg_diag *d)
{
    const char *start = strstr(text, "://");
    if (!start)
        return true;
    start += 3;
    const char *at = userinfo_end(start, false);
    if (!at)
        return true;
    const char *colon = memchr(start, ':', (size_t)(at - start));
    for (const char *p = start; p < at; p++) {
        if (*p != '@' && *p != '?' && *p != '/')
            continue;
        const char *enc = *p == '@' ? "%40" : *p == '?' ? "%3F" : "%2F";
        cfg_report(d, where->vline, where->vcol, where->key,
                   "the %s contains an unescaped '%c' (expected the user name and password "
                   "percent-encoded, '%c' as %s)",
                   colon && p > colon ? "password" : "user name", *p, *p, enc);
        return false;
    }
    return true;
}

/* RFC 3986 percent-encoding of user info (the driver decodes it). */
static char *pct_encode(const char *s)
{
    char *out = xmalloc(strlen(s) * 3 + 1), *o = out;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            strchr("-._~", c))
            *o++ = (char)c;
        else
            o += sprintf(o, "%%%02X", c);
    }
    *o = '\0';
    return out;
}

/* Appends name=value to the URI's options, adding "/?" when it has none. */
static char *append_option(char *uri, const char *name, const char *value)
{
    const char *hosts = strstr(uri, "://");
    char *res;
    if (strchr(uri, '?'))
        res = xasprintf("%s&%s=%s", uri, name, value);
    else if (hosts && strchr(hosts + 3, '/'))
        res = xasprintf("%s?%s=%s", uri, name, value);
    else
        res = xasprintf("%s/?%s=%s", uri, name, value);
    free(uri);
    return res;
}

/* "rs0/h1:27017,h2:27017" or "h1:27017" (Debezium 1.x) into a URI. */
static char *uri_from_hosts(const char *hosts)
{
    const char *slash = strchr(hosts, '/');
    if (!slash)
        return xasprintf("mongodb://%s/", hosts);
    return xasprintf("mongodb://%s/?replicaSet=%.*s", slash + 1, (int)(slash - hosts), hosts);
}

/* libmongoc keeps authSource with the credentials, not the options, so
 * mongoc_uri_has_option() never sees it (and mongoc_uri_get_auth_source()
 * answers a default): look in both. */
static bool uri_sets_auth_source(const mongoc_uri_t *uri)
{
    bson_iter_t it;
    const bson_t *cred = mongoc_uri_get_credentials(uri);
    return mongoc_uri_has_option(uri, MONGOC_URI_AUTHSOURCE) ||
           (cred != NULL && bson_iter_init_find_case(&it, cred, MONGOC_URI_AUTHSOURCE));
}

static char *fold_settings(const struct mcdc_config *cfg, const mongoc_uri_t *uri, char *text)
{
    bool has_user = mongoc_uri_get_username(uri) != NULL;
    if (cfg->mongodb_user && !has_user) {
        char *user = pct_encode(cfg->mongodb_user);
        char *pass = cfg->mongodb_password ? pct_encode(cfg->mongodb_password) : NULL;
        const char *rest = strstr(text, "://") + 3;
        char *next = xasprintf("%.*s%s%s%s@%s", (int)(rest - text), text, user, pass ? ":" : "",
                               pass ? pass : "", rest);
        free(user);
        free(pass);
        free(text);
        text = next;
        if (!uri_sets_auth_source(uri) && cfg->mongodb_authsource)
            text = append_option(text, "authSource", cfg->mongodb_authsource);
    }
    if (cfg->mongodb_ssl_enabled && !mongoc_uri_has_option(uri, MONGOC_URI_TLS) &&
        !mongoc_uri_has_option(uri, MONGOC_URI_SSL))
        text = append_option(text, "tls", "true");
    if (cfg->mongodb_ssl_invalid_hostname_allowed &&
        !mongoc_uri_has_option(uri, MONGOC_URI_TLSALLOWINVALIDHOSTNAMES))
        text = append_option(text, "tlsAllowInvalidHostnames", "true");
    return text;
}

#define URI_WARNINGS_MAX 4

struct uri_warnings {
    char *msg[URI_WARNINGS_MAX];
    size_t count;
};

/* libmongoc accepts a URI with options it does not know and only logs a
 * warning; a silently ignored option is a typo the user never sees, so each
 * warning becomes a problem. On a URI it rejects, the first warning says
 * what its error message does not (which host, which escape). */
static void uri_warning(mongoc_log_level_t level, const char *domain, const char *message,
                        void *data)
{
    struct uri_warnings *w = data;
    (void)domain;
    if (level <= MONGOC_LOG_LEVEL_WARNING && w->count < URI_WARNINGS_MAX)
        w->msg[w->count++] = xstrdup(message);
}

static mongoc_uri_t *parse_uri(const char *text, const struct cfg_entry *where, struct cfg_diag *d)
{
    bson_error_t error;
    struct uri_warnings w = {{NULL}, 0};
    mongoc_log_set_handler(uri_warning, &w);
    mongoc_uri_t *uri = mongoc_uri_new_with_error(text, &error);
    mongoc_log_set_handler(mongoc_log_default_handler, NULL);
    if (!uri) {
        char *full =
            w.count ? xasprintf("%s: %s", error.message, w.msg[0]) : xstrdup(error.message);
        char *msg = cfg_redact_text(full, text);
        cfg_report(d, where->vline, where->vcol, where->key,
                   "invalid connection string: %s (expected a mongodb:// or mongodb+srv:// "
                   "connection string)",
                   msg);
        free(msg);
        free(full);
    }
    for (size_t i = 0; i < w.count; i++) {
        if (uri) {
            char *msg = cfg_redact_text(w.msg[i], text);
            cfg_report(d, where->vline, where->vcol, where->key,
                       "%s (expected options and values libmongoc supports)", msg);
            free(msg);
        }
        free(w.msg[i]);
    }
    return uri;
}

void cfg_check_uri(struct mcdc_config *cfg, const struct cfg_entries *e, struct cfg_diag *d)
{
    const struct cfg_entry *cs = cfg_entry_find(e, "mongodb.connection.string", false);
    const struct cfg_entry *hosts = cfg_entry_find(e, "mongodb.hosts", false);
    if (cs && hosts) {
        /* Reported at the one set last, naming the other. */
        const struct cfg_entry *second = hosts->line > cs->line ? hosts : cs;
        const struct cfg_entry *first = second == hosts ? cs : hosts;
        cfg_report(d, second->line, second->col, second->key,
                   "cannot be used with %s (line %d) (expected only one of them)", first->key,
                   first->line);
        return;
    }
    const struct cfg_entry *where = cs ? cs : hosts;
    if (!where)
        return; /* reported as a missing required key */
    if (!cs && cfg->mongodb_hosts) {
        free(cfg->connection_string);
        cfg->connection_string = uri_from_hosts(cfg->mongodb_hosts);
    }
    if (!cfg->connection_string)
        return; /* no value: already reported */
    if (!check_userinfo(cfg->connection_string, where, d))
        return;
    mongoc_uri_t *uri = parse_uri(cfg->connection_string, where, d);
    if (!uri)
        return;
    char *folded = fold_settings(cfg, uri, xstrdup(cfg->connection_string));
    mongoc_uri_destroy(uri);
    if (strcmp(folded, cfg->connection_string) != 0) {
        uri = parse_uri(folded, where, d);
        mongoc_uri_destroy(uri);
    }
    free(cfg->connection_string);
    cfg->connection_string = folded;
}

/* scrub-pii's options (SPEC T-4, T-5), read from the host's `options_json` (ABI 1.1):
 *   {"safeAttributes": ["build"], "disable": ["phone"], "extraPatterns": {"ticket": "TCK-[0-9]+"},
 *    "sensitiveKeys": ["password", "api key"], "method": "mask" | "remove" | "hash"}
 * and the pseudonym key of `hash`: 32 random bytes made once in the plugin's data folder
 * (`hmac.key`, 0600), never sent and never logged. */
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rh_sha256.h>

/* --- a small JSON reader: just what the options need --------------------------------- */

struct reader {
    const char *at;
    char *error;
    size_t error_size;
};

static void skip_space(struct reader *r) { while (isspace((unsigned char)*r->at)) r->at++; }

static bool fail(struct reader *r, const char *message) {
    snprintf(r->error, r->error_size, "%s", message);
    return false;
}

/* A JSON string, unescaped into a new buffer (\uXXXX below 0x80 only; others refused). */
static char *read_string(struct reader *r) {
    skip_space(r);
    if (*r->at != '"') { fail(r, "expected a string"); return NULL; }
    r->at++;
    size_t capacity = 16, length = 0;
    char *out = malloc(capacity);
    while (out && *r->at && *r->at != '"') {
        char c = *r->at++;
        if (c == '\\') {
            char e = *r->at++;
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case '"': case '\\': case '/': c = e; break;
            case 'u': {
                unsigned value = 0;
                for (int k = 0; k < 4; k++) {
                    char h = *r->at++;
                    if (!isxdigit((unsigned char)h)) { free(out); fail(r, "a bad \\u escape"); return NULL; }
                    value = value * 16 + (unsigned)(isdigit((unsigned char)h) ? h - '0' : tolower((unsigned char)h) - 'a' + 10);
                }
                if (value == 0 || value >= 0x80) { free(out); fail(r, "a \\u escape outside ASCII (write the character itself)"); return NULL; }
                c = (char)value;
                break;
            }
            default: free(out); fail(r, "a bad escape"); return NULL;
            }
        }
        if (length + 2 > capacity) {
            char *grown = realloc(out, capacity *= 2);
            if (!grown) { free(out); return NULL; }
            out = grown;
        }
        out[length++] = c;
    }
    if (!out) return NULL;
    if (*r->at != '"') { free(out); fail(r, "an unterminated string"); return NULL; }
    r->at++;
    out[length] = '\0';
    return out;
}

static bool expect(struct reader *r, char c) {
    skip_space(r);
    if (*r->at != c) return false;
    r->at++;
    return true;
}

/* A list of strings, appended to *items. */
static bool read_string_list(struct reader *r, char ***items, size_t *count) {
    if (!expect(r, '[')) return fail(r, "expected a list of strings");
    if (expect(r, ']')) return true;
    do {
        char *item = read_string(r);
        if (!item) return false;
        char **grown = realloc(*items, (*count + 1) * sizeof **items);
        if (!grown) { free(item); return fail(r, "out of memory"); }
        *items = grown;
        (*items)[(*count)++] = item;
    } while (expect(r, ','));
    return expect(r, ']') || fail(r, "expected ',' or ']' in a list");
}

/* `"name": "pattern"` pairs: each a pattern the engine takes (checked alone, so a refusal names
   it), and a name that can be a mask (no `[`, `]` or `:`). */
static bool read_patterns(struct reader *r, struct scrub_options *options) {
    if (!expect(r, '{')) return fail(r, "\"extraPatterns\": expected an object of name -> pattern");
    if (expect(r, '}')) return true;
    do {
        char *name = read_string(r);
        if (!name) return false;
        if (!expect(r, ':')) { free(name); return fail(r, "expected ':' after a pattern's name"); }
        char *pattern = read_string(r);
        if (!pattern) { free(name); return false; }
        struct rh_scrub_extra *grown = realloc(options->extras, (options->extra_count + 1) * sizeof *grown);
        if (!grown) { free(name); free(pattern); return fail(r, "out of memory"); }
        options->extras = grown;
        options->extras[options->extra_count++] = (struct rh_scrub_extra){name, pattern};
        if (name[0] == '\0' || strpbrk(name, "[]:")) {
            snprintf(r->error, r->error_size, "extraPatterns \"%s\": a name is a word without [, ] or :", name);
            return false;
        }
        if (!rh_scrub_extras_valid(&options->extras[options->extra_count - 1], 1, r->error, r->error_size)) return false;
    } while (expect(r, ','));
    return expect(r, '}') || fail(r, "expected ',' or '}' in extraPatterns");
}

/* `disable`: each a kind of the built-in rules. */
static bool read_disabled(struct reader *r, struct scrub_options *options) {
    if (!read_string_list(r, &options->disabled, &options->disabled_count)) return false;
    for (size_t k = 0; k < options->disabled_count; k++) {
        if (rh_scrub_kind_known(options->disabled[k])) continue;
        snprintf(r->error, r->error_size, "\"disable\": \"%s\" is not a kind (Plugins/scrub-pii/README.md lists them all)", options->disabled[k]);
        return false;
    }
    return true;
}

bool scrub_options_parse(const char *json, struct scrub_options *options, char *error, size_t error_size) {
    memset(options, 0, sizeof *options);
    options->style.method = RH_SCRUB_MASK;
    struct reader r = {json, error, error_size};
    if (!expect(&r, '{')) return fail(&r, "the options are not a JSON object");
    if (expect(&r, '}')) return true;
    do {
        char *key = read_string(&r);
        if (!key) return false;
        bool ok = expect(&r, ':') || fail(&r, "expected ':' after a key");
        if (ok && strcmp(key, "safeAttributes") == 0) {
            ok = read_string_list(&r, &options->safe_attributes, &options->safe_count);
        } else if (ok && strcmp(key, "disable") == 0) {
            ok = read_disabled(&r, options);
        } else if (ok && strcmp(key, "sensitiveKeys") == 0) {
            options->has_sensitive_keys = true;
            ok = read_string_list(&r, &options->sensitive_keys, &options->sensitive_key_count);
        } else if (ok && strcmp(key, "extraPatterns") == 0) {
            ok = read_patterns(&r, options);
        } else if (ok && strcmp(key, "method") == 0) {
            char *method = read_string(&r);
            ok = method != NULL;
            if (ok && strcmp(method, "mask") == 0) options->style.method = RH_SCRUB_MASK;
            else if (ok && strcmp(method, "remove") == 0) options->style.method = RH_SCRUB_REMOVE;
            else if (ok && strcmp(method, "hash") == 0) options->style.method = RH_SCRUB_HASH;
            else if (ok) {
                snprintf(error, error_size, "\"method\": \"%s\" is not mask, remove or hash", method);
                ok = false;
            }
            free(method);
        } else if (ok) {
            snprintf(error, error_size, "unknown option \"%s\" (allowed: safeAttributes, disable, extraPatterns, sensitiveKeys, method)", key);
            ok = false;
        }
        free(key);
        if (!ok) return false;
    } while (expect(&r, ','));
    if (!expect(&r, '}')) return fail(&r, "expected ',' or '}' after an option");
    skip_space(&r);
    return *r.at == '\0' || fail(&r, "text after the options object");
}

bool scrub_options_is_safe_attribute(const struct scrub_options *options, const char *key) {
    for (size_t k = 0; k < options->safe_count; k++) if (strcmp(options->safe_attributes[k], key) == 0) return true;
    return false;
}

/* --- pseudonyms: HMAC-SHA256 with the repository's key ----------------------------------- */

static void hmac_sha256(const uint8_t key[32], const char *value, size_t length, uint8_t digest[32]) {
    uint8_t pad[64], inner[32];
    rh_sha256 context;
    for (int k = 0; k < 64; k++) pad[k] = (uint8_t)((k < 32 ? key[k] : 0) ^ 0x36);
    rh_sha256_init(&context);
    rh_sha256_update(&context, pad, sizeof pad);
    rh_sha256_update(&context, value, length);
    rh_sha256_final(&context, inner);
    for (int k = 0; k < 64; k++) pad[k] = (uint8_t)((k < 32 ? key[k] : 0) ^ 0x5c);
    rh_sha256_init(&context);
    rh_sha256_update(&context, pad, sizeof pad);
    rh_sha256_update(&context, inner, sizeof inner);
    rh_sha256_final(&context, digest);
}

void scrub_options_pseudonym(void *context, const char *value, size_t length, char out[13]) {
    const struct scrub_options *options = context;
    uint8_t digest[32];
    hmac_sha256(options->key, value, length, digest);
    static const char hex[] = "0123456789abcdef";
    for (int k = 0; k < 6; k++) {
        out[2 * k] = hex[digest[k] >> 4];
        out[2 * k + 1] = hex[digest[k] & 15];
    }
    out[12] = '\0';
}

/* Reads `folder`/hmac.key, or makes it (32 bytes from getrandom, 0600, O_EXCL: two hosts
   starting at once agree on one key). Only a regular file of 32 bytes is a key: opened without
   waiting (a FIFO planted there would block the host's main thread) and never through a link;
   anything else (a FIFO, a device that reads as zeros, a short file) is refused, and the
   caller masks instead. */
bool scrub_options_load_key(struct scrub_options *options, const char *folder, char *error, size_t error_size) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/hmac.key", folder) >= (int)sizeof path) {
        snprintf(error, error_size, "the data folder's path is too long");
        return false;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd >= 0) {
            struct stat info;
            if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || info.st_size != (off_t)sizeof options->key) {
                close(fd);
                snprintf(error, error_size, "%s is not a regular file of 32 bytes (remove it to make a new key)", path);
                return false;
            }
            ssize_t got = read(fd, options->key, sizeof options->key);
            close(fd);
            if (got == (ssize_t)sizeof options->key) return options->has_key = true;
            snprintf(error, error_size, "%s holds %zd bytes, not a 32-byte key (remove it to make a new one)", path, got);
            return false;
        }
        uint8_t key[32];
        if (getrandom(key, sizeof key, 0) != (ssize_t)sizeof key) {
            snprintf(error, error_size, "no random bytes for a key (%s)", strerror(errno));
            return false;
        }
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 && errno == EEXIST) continue;  /* another host made it first: read theirs */
        if (fd < 0) {
            snprintf(error, error_size, "cannot create %s (%s)", path, strerror(errno));
            return false;
        }
        bool written = write(fd, key, sizeof key) == (ssize_t)sizeof key && fsync(fd) == 0;
        close(fd);
        if (!written) {
            unlink(path);
            snprintf(error, error_size, "cannot write %s", path);
            return false;
        }
        memcpy(options->key, key, sizeof key);
        return options->has_key = true;
    }
    snprintf(error, error_size, "cannot read or make %s", path);
    return false;
}

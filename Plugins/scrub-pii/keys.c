/* Secret-named keys (SPEC T-5): an attribute whose key names a secret loses its whole value.
 * A key is split into words at `_ - . / :` and spaces and at camel-case humps (`sessionToken`:
 * session token; `XAPIKey`: xapi key, `X-API-Key`: x api key), lower-cased; it names a secret
 * when one of its words is a secret word (`password`, `token`, `cookie`…) or two adjacent
 * words are a secret pair (`api key`, `session id`…). Whole words only: `author`,
 * `secretary`, `tokenizer` and `max_tokens` name none. A key whose last word says it is about
 * the secret, not the secret (`token_count`, `password_policy`, `auth_url`), names none. */
#include "scrub.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const char *const secret_words[] = {
    "password", "passwd", "pwd", "passphrase", "secret", "secrets", "token", "auth", "authorization", "cookie", "cookies",
    "credential", "credentials", "otp", "jwt", "bearer", "csrf", "xsrf", "apikey", "authkey", "privkey", "privatekey",
    "secretkey", "accesskey", "accesstoken", "refreshtoken", "authtoken", "sessionid", "sessiontoken", "sessionkey",
    "clientsecret", "dbpass", "mysqlpwd", "phpsessid", "api key", "private key", "priv key", "access key", "auth key",
    "session id", "session key", "signing key", "encryption key", "account key", "service key", "client key", "db key",
    "database key", "db pass", "database pass", "key pass", "two factor",
};

/* Last words that make a key about a secret rather than one. */
static const char *const about_words[] = {
    "count", "length", "len", "size", "type", "limit", "ttl", "expiry", "expires", "expiration", "url", "uri", "endpoint",
    "path", "file", "name", "enabled", "required", "policy", "format", "version", "min", "max",
};

#define WORDS_MAX 32
#define WORD_BYTES 48

/* The key's words, lower-cased; how many (at most WORDS_MAX, each cut to WORD_BYTES - 1). */
static size_t split(const char *key, char words[WORDS_MAX][WORD_BYTES]) {
    size_t count = 0, length = 0;
    for (const unsigned char *c = (const unsigned char *)key;; c++) {
        bool separator = *c == '\0' || strchr("_-./: \t", *c) != NULL;
        /* A hump: lower then upper (sessionToken), or upper, upper, lower (APIKey: API Key). */
        bool hump = length > 0 && isupper(*c) && (islower(c[-1]) || isdigit(c[-1]) || (isupper(c[-1]) && islower(c[1])));
        if ((separator || hump) && length > 0) {
            words[count][length] = '\0';
            if (++count == WORDS_MAX) return count;
            length = 0;
        }
        if (*c == '\0') return count;
        if (!separator && length < WORD_BYTES - 1) words[count][length++] = (char)tolower(*c);
    }
}

static bool listed(const char *word, const char *const *list, size_t count) {
    for (size_t k = 0; k < count; k++)
        if (strcmp(list[k], word) == 0) return true;
    return false;
}

bool rh_scrub_key_is_secret(const char *key, const char *const *words, size_t word_count) {
    if (!words) {
        words = secret_words;
        word_count = sizeof secret_words / sizeof *secret_words;
    }
    char split_words[WORDS_MAX][WORD_BYTES];
    size_t count = split(key, split_words);
    if (count >= 2 && listed(split_words[count - 1], about_words, sizeof about_words / sizeof *about_words)) return false;
    for (size_t k = 0; k < count; k++) {
        if (listed(split_words[k], words, word_count)) return true;
        if (k + 1 < count) {
            char pair[2 * WORD_BYTES];
            snprintf(pair, sizeof pair, "%.47s %.47s", split_words[k], split_words[k + 1]);
            if (listed(pair, words, word_count)) return true;
        }
    }
    return false;
}

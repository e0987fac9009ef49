"""The tokens and personal data of scripts/scrub-corpus that the leak detectors know (SPEC T-5),
made by the detectors' own published patterns, not by this project's generator:

- gitleaks: each rule of its default configuration (scripts/peers/gitleaks.toml, MIT, commit
  b58d3f10 of 2026-07-22) that names one of the kinds `check` judges; a value is a random string
  the rule's regex matches, as gitleaks' own tests make them, with the keyword context the rule
  asks for; the judged span is the rule's secret group (its first group when it names none);
- detect-secrets: the regexes of its default plugins (`denylist`, from the installed package);
- Relay's PII kinds: Faker's IBANs, MAC addresses, SSNs and user names (in home paths and in
  URLs with a password); IMEIs from a TAC Faker draws, with their Luhn digit.

Each value is put into a line a program prints, after a sentence of Faker's prose.
"""
import os
import re
import sre_constants as C
import sre_parse
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))

# gitleaks rule → the kind `check` judges (scrub-pii's names, SPEC T-5).
GITLEAKS = {
    "private-key": "private_key", "age-secret-key": "age_secret_key",
    "anthropic-api-key": "anthropic_api_key", "anthropic-admin-api-key": "anthropic_api_key",
    "artifactory-api-key": "artifactory_token", "artifactory-reference-token": "artifactory_token",
    "atlassian-api-token": "atlassian_api_token", "azure-ad-client-secret": "azure_client_secret",
    "databricks-api-token": "databricks_token", "digitalocean-pat": "digitalocean_token",
    "digitalocean-access-token": "digitalocean_token", "digitalocean-refresh-token": "digitalocean_token",
    "doppler-api-token": "doppler_token", "dropbox-short-lived-api-token": "dropbox_token",
    "dropbox-long-lived-api-token": "dropbox_token", "gcp-api-key": "google_api_key",
    "github-app-token": "github_token", "github-fine-grained-pat": "github_token", "github-oauth": "github_token",
    "github-pat": "github_token", "github-refresh-token": "github_token",
    "gitlab-pat": "gitlab_token", "gitlab-pat-routable": "gitlab_token", "gitlab-ptt": "gitlab_token",
    "gitlab-rrt": "gitlab_token", "gitlab-runner-authentication-token": "gitlab_token",
    "gitlab-deploy-token": "gitlab_token", "gitlab-feed-token": "gitlab_token",
    "grafana-service-account-token": "grafana_token", "grafana-cloud-api-token": "grafana_token",
    "grafana-api-key": "grafana_token", "hashicorp-tf-api-token": "terraform_cloud_token",
    "heroku-api-key-v2": "heroku_api_key", "heroku-api-key": "heroku_api_key",
    "huggingface-access-token": "huggingface_token", "huggingface-organization-api-token": "huggingface_token",
    "linear-api-key": "linear_api_key", "mailchimp-api-key": "mailchimp_api_key",
    "new-relic-user-api-key": "new_relic_key", "new-relic-insert-key": "new_relic_key",
    "new-relic-browser-api-token": "new_relic_key", "notion-api-token": "notion_token",
    "npm-access-token": "npm_token", "openai-api-key": "openai_api_key", "perplexity-api-key": "perplexity_api_key",
    "postman-api-token": "postman_api_key", "pulumi-api-token": "pulumi_access_token",
    "pypi-upload-token": "pypi_token", "rubygems-api-token": "rubygems_api_key", "sendgrid-api-token": "sendgrid_api_key",
    "sendinblue-api-token": "brevo_api_key", "sentry-user-token": "sentry_auth_token", "sentry-org-token": "sentry_auth_token",
    "shopify-access-token": "shopify_token", "shopify-custom-access-token": "shopify_token",
    "shopify-private-app-access-token": "shopify_token", "shopify-shared-secret": "shopify_token",
    "slack-app-token": "slack_token", "slack-bot-token": "slack_token", "slack-legacy-bot-token": "slack_token",
    "slack-legacy-token": "slack_token", "slack-legacy-workspace-token": "slack_token", "slack-user-token": "slack_token",
    "slack-config-access-token": "slack_token", "slack-webhook-url": "slack_webhook",
    "square-access-token": "square_token", "stripe-access-token": "stripe_key", "telegram-bot-api-token": "telegram_bot_token",
    "twilio-api-key": "twilio_key", "vault-service-token": "vault_token", "vault-batch-token": "vault_token",
}

# detect-secrets plugin → (kind, which group is the secret: 0 for the whole match).
DETECT_SECRETS = {
    "AWSKeyDetector": ("aws_secret_key", 1), "AzureStorageKeyDetector": ("azure_storage_key", 0),
    "BasicAuthDetector": ("url_password", 1), "CloudantDetector": ("cloudant_credentials", 1),
    "DiscordBotTokenDetector": ("discord_token", 0), "GitHubTokenDetector": ("github_token", 0),
    "GitLabTokenDetector": ("gitlab_token", 0), "IbmCloudIamDetector": ("ibm_cloud_key", 1),
    "IbmCosHmacDetector": ("ibm_cloud_key", 1), "MailchimpDetector": ("mailchimp_api_key", 0),
    "NpmDetector": ("npm_token", 1), "OpenAIDetector": ("openai_api_key", 0), "PypiTokenDetector": ("pypi_token", 0),
    "SendGridDetector": ("sendgrid_api_key", 0), "SlackDetector": ("slack_token", 0),
    "SoftlayerDetector": ("softlayer_api_key", 1), "SquareOAuthDetector": ("square_token", 0),
    "StripeDetector": ("stripe_key", 0), "TelegramBotTokenDetector": ("telegram_bot_token", 0),
    "TwilioKeyDetector": ("twilio_key", 0),
}

LINES = ["Authorization failed for token {}", "config: API_KEY: \"{}\"", "retrying with credential {}",
         "export SECRET={}", "loaded settings {{\"auth\": \"{}\"}}", "request rejected: {} (401)", "{}"]

# What a negated set or "any character" draws from: the characters tokens are made of.
TOKEN_CHARACTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-"
CATEGORIES = {C.CATEGORY_DIGIT: "0123456789", C.CATEGORY_SPACE: " \t", C.CATEGORY_NOT_SPACE: TOKEN_CHARACTERS,
              C.CATEGORY_WORD: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_",
              C.CATEGORY_NOT_WORD: " .:/-", C.CATEGORY_NOT_DIGIT: "abcdefXYZ"}


class Xeger:
    """A random string a regex matches, and where its groups fell. Repeats draw a count near
    their least (a lazy one nearer), so keyword contexts stay short; one without an upper bound
    draws 8-24 characters, or 1-3 more of a group; assertions are skipped."""

    def __init__(self, rng):
        self.rng = rng

    def make(self, pattern, flags=0):
        self.text, self.groups = [], {}
        self._walk(sre_parse.parse(pattern, flags))
        return "".join(self.text), self.groups

    def _length(self):
        return sum(len(piece) for piece in self.text)

    def _walk(self, items):
        for op, value in items:
            self._one(op, value)

    def _one(self, op, value):
        rng = self.rng
        if op == C.LITERAL:
            self.text.append(chr(value))
        elif op == C.NOT_LITERAL:
            self.text.append(rng.choice([c for c in TOKEN_CHARACTERS if ord(c) != value]))
        elif op == C.ANY:
            self.text.append(".")  # an unescaped dot alone means one (hooks.slack.com)
        elif op == C.IN:
            self.text.append(rng.choice(self._set(value)))
        elif op == C.BRANCH:
            self._walk(rng.choice(value[1]))
        elif op == C.SUBPATTERN:
            group, start = value[0], self._length()
            self._walk(value[3])
            if group:
                self.groups.setdefault(group, (start, self._length()))
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
            least, most, items = value
            single = len(items) == 1 and items[0][0] != C.SUBPATTERN
            if most == C.MAXREPEAT:  # unbounded: 8-24 characters, or 1-3 more of a group
                least = max(least, 8) if single else least
                most = least + (16 if single else 2)
            count = rng.randint(least, min(most, least + (6 if op == C.MIN_REPEAT else 16)))
            for _ in range(count):
                if list(items) == [(C.ANY, None)]:
                    self.text.append(rng.choice(TOKEN_CHARACTERS))  # `.+`, `.{0,20}`: any text
                else:
                    self._walk(items)
        elif op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            pass
        else:
            raise ValueError(f"unsupported regex part {op}")

    def _set(self, items):
        chosen, negated = set(), False
        for op, value in items:
            if op == C.NEGATE:
                negated = True
            elif op == C.LITERAL:
                chosen.add(chr(value))
            elif op == C.RANGE:
                chosen.update(chr(c) for c in range(value[0], value[1] + 1))
            elif op == C.CATEGORY:
                chosen.update(CATEGORIES[value])
        if negated:
            return [c for c in TOKEN_CHARACTERS if c not in chosen]
        return sorted(chosen)


def go_to_python(regex):
    """gitleaks writes Go's RE2 syntax: a flag group such as `(?i)` may stand mid-pattern, and
    Python takes it only at the start; Go's end of text is `\\z`, Python's `\\Z`. The generator makes what the pattern says literally, so a
    case-insensitive flag is dropped (a value in the case the pattern writes always matches)."""
    return regex.replace("\\z", "\\Z").replace("(?i)", "").replace("(?-i:", "(?:").replace("(?i:", "(?:")


def gitleaks_rules():
    with open(os.path.join(HERE, "peers", "gitleaks.toml"), "rb") as file:
        rules = {rule["id"]: rule for rule in tomllib.load(file)["rules"]}
    missing = sorted(set(GITLEAKS) - set(rules))
    if missing:
        raise SystemExit(f"scrub-corpus: gitleaks.toml has no rule {', '.join(missing)}")
    return [(kind, go_to_python(rules[name]["regex"]), 0, rules[name].get("secretGroup", 1)) for name, kind in GITLEAKS.items()]


def detect_secrets_rules():
    import detect_secrets.plugins
    import importlib
    import pkgutil
    plugins = {}
    for module in pkgutil.iter_modules(detect_secrets.plugins.__path__):
        loaded = importlib.import_module(f"detect_secrets.plugins.{module.name}")
        plugins.update({name: getattr(loaded, name) for name in DETECT_SECRETS if hasattr(loaded, name)})
    rules = []
    for name, (kind, group) in DETECT_SECRETS.items():
        for regex in plugins[name]().denylist:
            if group == 0 or regex.groups >= group:
                rules.append((kind, regex.pattern, regex.flags & re.VERBOSE, group))
    return rules


class Tokens:
    """The values of one document: every rule once, in random order."""

    def __init__(self):
        self.rules = gitleaks_rules() + detect_secrets_rules()

    def pieces(self, fake, rng):
        """(kind, text, start, end) for each rule and each Relay kind: a line and the judged bytes."""
        xeger, pieces = Xeger(rng), []
        for kind, regex, flags, group in self.rules:
            text, groups = xeger.make(regex, flags)
            if text.startswith("://"):  # detect-secrets' Basic auth rule starts at a URL's `://`
                host = fake.hostname() + "/"
                text, groups = "https" + text + host, {k: (a + 5, b + 5) for k, (a, b) in groups.items()}
            start, end = groups.get(group, (0, len(text)))  # a rule without that group: the whole match
            pieces.append((kind, text, start, end))
        for kind, text, value in relay_values(fake, rng):
            at = text.index(value)
            pieces.append((kind, text, at, at + len(value)))
        return pieces

    def paragraph(self, fake, rng):
        """Faker prose with every value in a line a program prints: (text, spans)."""
        pieces = self.pieces(fake, rng)
        rng.shuffle(pieces)
        text, spans = "", []
        for kind, value, start, end in pieces:
            line = rng.choice(LINES)
            prefix, suffix = line.split("{}")
            text += fake.sentence() + "\n" + prefix.replace("{{", "{")
            base = len(text.encode())
            spans.append({"start": base + len(value[:start].encode()), "end": base + len(value[:end].encode()), "kind": kind})
            text += value + suffix.replace("}}", "}") + "\n"
        return text.rstrip("\n"), spans


def luhn_digit(digits):
    total = 0
    for index, digit in enumerate(reversed(digits)):
        value = int(digit) * (2 if index % 2 == 0 else 1)
        total += value - 9 if value > 9 else value
    return str((10 - total % 10) % 10)


def relay_values(fake, rng):
    """(kind, line, judged value) for Relay's PII kinds, made by Faker."""
    iban, mac, ssn = fake.iban(), fake.mac_address(), fake.ssn()
    yield "iban", f"refund to {iban} queued", iban
    yield "mac_address", f"link up on {rng.choice(['eth0', 'wlan0'])} ({mac})", mac
    yield "us_ssn", f"applicant ssn {ssn} verified", ssn
    tac = fake.numerify("35######")
    body = tac + fake.numerify("######")
    imei = body + luhn_digit(body)
    yield "imei", f"device imei {imei} registered", imei
    user = fake.user_name()
    yield "user_path", f"open /home/{user}/.config/{fake.file_name()} failed", user
    user = fake.user_name()
    yield "user_path", f"loaded C:\\Users\\{user}\\AppData\\Local\\{fake.file_name()}", user
    password = fake.password(length=rng.randint(10, 18), special_chars=False)
    yield "url_password", f"connecting to https://{fake.user_name()}:{password}@{fake.hostname()}/", password

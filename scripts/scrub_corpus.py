"""Writes a labelled scrubbing corpus from text made outside this project, for
`reporthost check --scrub --corpus FILE` (SPEC T-4): one JSON object a line,
{"text": "…", "spans": [{"start": 0, "end": 5, "kind": "email"}, …]}, offsets in UTF-8 bytes.

Each document is scrubadub's fake document (its templates, Faker's prose and personal data:
e-mail addresses, phone numbers, names, street addresses), two of presidio-evaluator's sentence
templates filled by Faker (cards, phones, e-mail and IP addresses, IBANs, names, cities…; read
from its wheel, which scripts/venv downloads without its dependencies), and a paragraph of
Faker prose carrying what neither makes (IPv6 addresses, more cards, and the secrets a report
carries: a bearer token, a `key=value` secret, an AWS key id, a JWT) with decoys Faker makes
that are not personal data (kind `none`, with a label): UUIDs, digests, file names,
timestamps, host names, barcodes, booleans, versions, order numbers. Then a paragraph with the
kinds the leak detectors know (SPEC T-5), each made by gitleaks', detect-secrets' or Faker's own
pattern, in the lines programs print (scripts/scrub_corpus_tokens.py).
Deterministic from --seed. Kinds check does not judge (name, address, …) keep scrubadub's names.

    scripts/scrub-corpus [--seed N] [--documents N] [--out FILE]
"""
import argparse
import base64
import datetime
import glob
import json
import os
import random
import re
import sys
import zipfile

import faker
import scrubadub.comparison

from scrub_corpus_tokens import Tokens

SCRUBADUB_KINDS = {"email": "email", "phone": "phone", "credit_card": "card"}
# Dates from a fixed span, never "now": the same seed writes the same file on any day.
START, END = datetime.datetime(2020, 1, 1), datetime.datetime(2026, 1, 1)


def spans_for(text, found, start_at=0):
    """Byte spans of scrubadub's matches, found in order in `text`."""
    spans, position = [], start_at
    for item in found:
        at = text.find(item["match"], position)
        if at < 0:
            at = text.find(item["match"])
        if at < 0:
            continue
        position = at + len(item["match"])
        start = len(text[:at].encode())
        spans.append({"start": start, "end": start + len(item["match"].encode()),
                      "kind": SCRUBADUB_KINDS.get(item["filth_type"], item["filth_type"])})
    return spans


# presidio-evaluator's placeholders: the Faker method that fills each, and the kind it is.
PRESIDIO_FAKER = {"person": "name", "organization": "company", "ip_address": "ipv4_public", "name_female": "name_female",
                  "name_male": "name_male", "prefix_female": "prefix_female", "prefix_male": "prefix_male"}
PRESIDIO_KINDS = {"credit_card_number": "card", "phone_number": "phone", "email": "email", "ip_address": "ipv4"}


def presidio_templates():
    """The sentence templates in presidio-evaluator's wheel (see scripts/venv)."""
    wheels = glob.glob(os.path.join(os.path.dirname(sys.executable), "..", "wheels", "presidio_evaluator-*.whl"))
    if not wheels:
        raise SystemExit("scrub-corpus: presidio-evaluator's wheel is missing: run scripts/venv")
    with zipfile.ZipFile(sorted(wheels)[-1]) as wheel:
        text = wheel.read("presidio_evaluator/data_generator/raw_data/templates.txt").decode("utf-8", "replace")
    # A template writes a line break as the two characters \n.
    return [line.strip().replace("\\n", "\n") for line in text.splitlines() if "{{" in line]


def fill(template, fake, rng):
    """A template with each placeholder filled by Faker: (text, spans), or None when Faker has
    no method for one of them."""
    text, spans, position = "", [], 0
    for match in re.finditer(r"{{(\w+)}}", template):
        name = match.group(1)
        if name == "age":
            value = str(rng.randint(18, 90))
        elif name == "date_time":
            value = fake.date_time_between(start_date=START, end_date=END).isoformat()
        else:
            method = getattr(fake, PRESIDIO_FAKER.get(name, name), None)
            if not callable(method):
                return None
            value = str(method())
        text += template[position:match.start()]
        start = len(text.encode())
        text += value
        spans.append({"start": start, "end": len(text.encode()), "kind": PRESIDIO_KINDS.get(name, name)})
        position = match.end()
    return text + template[position:], spans


def token(rng, alphabet, length):
    return "".join(rng.choice(alphabet) for _ in range(length))


def jwt(fake, rng):
    def part(value):
        return base64.urlsafe_b64encode(json.dumps(value, separators=(",", ":")).encode()).decode().rstrip("=")
    claims = {"sub": fake.uuid4(), "name": fake.first_name(), "iat": int(fake.unix_time(start_datetime=START, end_datetime=END))}
    signature = base64.urlsafe_b64encode(bytes(rng.getrandbits(8) for _ in range(32))).decode().rstrip("=")
    return part({"alg": "HS256", "typ": "JWT"}) + "." + part(claims) + "." + signature


def extra_paragraph(fake, rng):
    """Faker prose with the judged kinds scrubadub lacks, and decoys: (text, spans) pieces."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    planted = [
        ("ipv4", fake.ipv4_public(), "Connection from {}."),
        ("ipv6", fake.ipv6(), "Upstream peer {} closed the stream."),
        ("card", fake.credit_card_number(), "Charged card {}."),
        ("bearer", token(rng, letters, 32), "Authorization: Bearer {}"),
        ("secret", token(rng, letters, 24), rng.choice(["api_key", "client_secret", "password", "access_token"]) + "={}"),
        ("aws_key", "AKIA" + token(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16), "Key id {} was rotated."),
        ("jwt", jwt(fake, rng), "Session {} expired."),
    ]
    decoys = [
        ("UUID", fake.uuid4(), "Request {} retried."),
        ("sha256 digest", fake.sha256(), "Artifact digest {}."),
        ("md5 digest", fake.md5(), "Cache key {}."),
        ("image file name", fake.file_name(extension=rng.choice(["png", "jpg", "webp"])), "Missing asset {}."),
        ("timestamp", fake.date_time_between(start_date=START, end_date=END).isoformat(), "Last sync at {}."),
        ("host name", fake.hostname(), "Resolved {}."),
        ("EAN-13 barcode", fake.ean13(), "Scanned item {}."),
        ("boolean", rng.choice(["retry", "cached", "enabled"]) + "=" + str(fake.pybool()), "Flags: {}."),
        ("version", fake.numerify("%.#.##"), "Client version {}."),
        ("order number", fake.numerify("ord-##########"), "Order {} shipped."),
    ]
    pieces = planted + decoys
    rng.shuffle(pieces)
    text, spans = "", []
    for index, (kind, value, template) in enumerate(pieces):
        if index % 3 == 0:
            text += fake.sentence() + " "
        prefix, suffix = template.split("{}")
        text += prefix
        start = len(text.encode())
        text += value
        span = {"start": start, "end": len(text.encode()), "kind": kind if (kind, value, template) in planted else "none"}
        if span["kind"] == "none":
            span["label"] = kind
        spans.append(span)
        text += suffix + " "
    return text.rstrip(), spans


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--out", help="the corpus file (default: standard output)")
    options = parser.parse_args()
    out = open(options.out, "w", encoding="utf-8") if options.out else sys.stdout
    fake = faker.Faker("en_US")
    templates = [t for t in presidio_templates() if "{{" in t]
    tokens = Tokens()
    for index in range(options.documents):
        seed = options.seed * 1_000_003 + index
        fake.seed_instance(seed)
        random.seed(seed)  # scrubadub also draws from the module's generator
        rng = random.Random(seed)
        document, found = scrubadub.comparison.make_fake_document(
            paragraphs=2, seed=seed, faker=fake, filth_types=["email", "phone", "name", "address"])
        text, spans = document, spans_for(document, found)
        filled = [piece for piece in (fill(rng.choice(templates), fake, rng) for _ in range(3)) if piece][:2]
        for piece, piece_spans in filled + [extra_paragraph(fake, rng), tokens.paragraph(fake, rng)]:
            offset = len((text + "\n").encode())
            text += "\n" + piece
            spans += [dict(span, start=span["start"] + offset, end=span["end"] + offset) for span in piece_spans]
        out.write(json.dumps({"text": text, "spans": spans}, ensure_ascii=False) + "\n")
    if options.out:
        out.close()


if __name__ == "__main__":
    main()

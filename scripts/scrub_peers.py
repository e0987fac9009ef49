"""scripts/scrub-peers: scrub-pii, Sentry Relay and detect-secrets on one corpus (SPEC T-5).

The corpus is `reporthost check --write-corpus` (what `check --scrub` plants: 66 kinds, each made
by its issuer's format, and decoys). For the two scrubbers a planted value counts as removed
when its text is no longer in the output, a decoy as changed when its text is gone; for
detect-secrets, which reports and does not replace, a value counts as found when a plugin other
than the two entropy ones reports a secret that overlaps it. MB/s is the corpus's bytes over the time spent
inside each tool (scrub-pii: its C entry, compiled -O2 here; Relay: `pii_strip_event`;
detect-secrets: `scan_line`), on this machine, in this run: for scrub-pii and Relay, the mean of
PASSES passes over the corpus after one that is not timed (a single pass moved by 1.5x between
runs here).
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUGIN = os.path.join(ROOT, "Plugins", "scrub-pii")
RELAY_RULES = ["@pemkey:replace", "@urlauth:replace", "@userpath:replace", "@email:replace", "@creditcard:replace",
               "@iban:replace", "@usssn:replace", "@imei:replace", "@mac:replace", "@ip:replace", "@bearer:replace"]


def reporthost():
    """The reporthost built last (debug by scripts/build, or release)."""
    built = [p for p in (os.path.join(ROOT, ".build", b, "reporthost") for b in ("debug", "release")) if os.path.exists(p)]
    if not built:
        raise SystemExit("scrub-peers: build reporthost first (scripts/build)")
    return max(built, key=os.path.getmtime)


def corpus(seed, documents, folder):
    path = os.path.join(folder, "corpus.jsonl")
    subprocess.run([reporthost(), "check", "--write-corpus", path, "--seed", str(seed), "--documents", str(documents)], check=True)
    with open(path, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def build_driver(folder):
    """scripts/scrub_peers_driver.c with scrub-pii's engine, -O2, in `folder`."""
    driver = os.path.join(folder, "scrub-pii-driver")
    sources = [os.path.join(ROOT, "scripts", "scrub_peers_driver.c")] + [
        os.path.join(PLUGIN, name) for name in ("engine.c", "scan.c", "breaks.c", "rules.c", "checks.c", "keys.c", "cache.c",
                                                           "reverse.c", "rule_databases.c", "tail.c", "sort.c")]
    subprocess.run(["cc", "-std=gnu11", "-O2", "-pthread", "-I", PLUGIN, "-I", os.path.join(ROOT, "Sources", "Digest", "include")]
                   + sources + [os.path.join(ROOT, "Sources", "Digest", "sha256.c"), "-lhs", "-o", driver], check=True)
    return driver


def drive(driver, texts, *arguments):
    """The driver over `texts`: their scrubbed copies, and the seconds one pass took."""
    run = subprocess.run([driver, *arguments], input=b"\0".join(t.encode() for t in texts) + b"\0", capture_output=True, check=True)
    return [o.decode() for o in run.stdout.split(b"\0")[:-1]], int(run.stderr.decode().strip()) / 1e9


def scrub_pii(texts, folder, passes=1):
    return drive(build_driver(folder), texts, "--repeat", str(passes))


def relay(texts, passes=1):
    """Relay's output for each text, and the mean seconds of `passes` timed passes after one
    that is not timed."""
    from sentry_relay.processing import pii_strip_event
    config = {"applications": {"$string": RELAY_RULES}}
    out, spent = [], 0.0
    for timed in range(passes + 1):
        out = []
        for text in texts:
            start = time.perf_counter()
            event = pii_strip_event(config, {"extra": {"text": text}})
            if timed:
                spent += time.perf_counter() - start
            out.append(event["extra"]["text"])
    return out, spent / passes


def relay_seconds(path):
    """Seconds Relay's 11 rules take over the file's text as one string value."""
    with open(path, encoding="utf-8") as file:
        text = file.read()
    return relay([text])[1]


def detect_secrets(texts):
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings
    entropy = {"Base64 High Entropy String", "Hex High Entropy String"}
    flagged, spent = [], 0.0
    with default_settings():
        for text in texts:
            values = set()
            start = time.perf_counter()
            for line in text.split("\n"):
                values.update(s.secret_value for s in scan_line(line) if s.type not in entropy and s.secret_value)
            spent += time.perf_counter() - start
            flagged.append(values)
    return flagged, spent


def score(documents, outputs=None, flagged=None):
    """Per kind (removed or found, planted) and decoys (changed, total)."""
    kinds, decoys = collections.defaultdict(lambda: [0, 0]), [0, 0]
    for index, document in enumerate(documents):
        raw = document["text"].encode()
        for span in document["spans"]:
            value = raw[span["start"]:span["end"]].decode()
            if span["kind"] == "none":
                if outputs is not None:
                    decoys[1] += 1
                    decoys[0] += value not in outputs[index]
                continue
            kinds[span["kind"]][1] += 1
            if outputs is not None:
                kinds[span["kind"]][0] += value not in outputs[index]
            else:
                kinds[span["kind"]][0] += any(found in value or value in found for found in flagged[index])
    return kinds, decoys


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--documents", type=int, default=100)
    parser.add_argument("--passes", type=int, default=3, help="timed passes of scrub-pii and Relay (their mean)")
    parser.add_argument("--relay-file", help="only time Relay over this file's text: prints `relay_seconds S`")
    options = parser.parse_args()
    if options.passes < 1:
        parser.error(f"--passes must be 1 or more, not {options.passes}")
    if options.relay_file:
        print(f"relay_seconds {relay_seconds(options.relay_file)}")
        return 0
    with tempfile.TemporaryDirectory() as folder:
        documents = corpus(options.seed, options.documents, folder)
        texts = [d["text"] for d in documents]
        megabytes = sum(len(t.encode()) for t in texts) / 1e6
        ours, ours_s = scrub_pii(texts, folder, options.passes)
    theirs, relay_s = relay(texts, options.passes)
    found, detect_s = detect_secrets(texts)
    columns = [("scrub-pii", score(documents, outputs=ours), ours_s), ("Relay (11 rules)", score(documents, outputs=theirs), relay_s),
               ("detect-secrets (found)", score(documents, flagged=found), detect_s)]
    print(f"scrub-peers: {len(documents)} documents, {megabytes:.2f} MB, seed {options.seed}")
    print("| kind | " + " | ".join(name for name, _, _ in columns) + " |")
    print("|---|" + "---|" * len(columns))
    kinds = list(columns[0][1][0].keys())
    for kind in kinds:
        cells = [f"{c[1][0][kind][0] / c[1][0][kind][1]:.2f}" for c in columns]
        print(f"| `{kind}` | " + " | ".join(cells) + " |")
    cells = []
    for _, (k, _), _ in columns:
        removed, planted = sum(v[0] for v in k.values()), sum(v[1] for v in k.values())
        cells.append(f"{removed / planted:.3f} ({removed}/{planted})")
    print("| **recall, every kind** | " + " | ".join(cells) + " |")
    cells = [f"{d[0]}/{d[1]}" if d[1] else "n/a" for _, (_, d), _ in columns]
    print("| decoys changed | " + " | ".join(cells) + " |")
    print("| MB/s | " + " | ".join(f"{megabytes / spent:.1f}" for _, _, spent in columns) + " |")
    ratio = (megabytes / ours_s) / (megabytes / relay_s)
    print(f"scrub-pii's speed against Relay's: {ratio:.2f}x")


if __name__ == "__main__":
    sys.exit(main())

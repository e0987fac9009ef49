#!/usr/bin/env python3
"""Soak test for ReportHost: no report is lost, however the host is killed.

`scripts/soak [--kills N] [--seed S] [--binary PATH] [--time-limit SECONDS] [--keep]`

What it proves. Against a local receiver that misbehaves on some requests (200, 503 with
`Retry-After` 0 or 1, a TCP reset, a stall longer than `submission.timeoutMs`), it runs the
host over and over on one repository: `report error|bug|exception` with attachments,
`crash --signal SEGV|ABRT` (a real crash, recovered by the next launching command) and
`launch`. Each run is left to finish, killed with SIGKILL after a random delay, or run with
`REPORTHOST_CRASH_AT` set to the next of the six crash points (SPEC I-6), until N runs died
of SIGKILL. Then the receiver behaves, `launch` drains the repository, and the soak checks:

* every report it raised (a `report` run that completed and printed its id, and every real
  crash) was received by the receiver or is still stored: none is lost (SPEC D-1, D-2, D-9,
  H-13). Crashes are matched through the session their crash file names (a recovered crash
  gets a new id each time its chain is re-run after a kill, so ids cannot be used);
* beyond those: every report id the host logged as stored (also on runs killed later) and
  every record in the repository was received or is still stored; a record the host
  finalised as accepted must have reached the receiver, and none may be terminal without
  having been accepted;
* a duplicate receipt only ever repeats the same id (SPEC D-4): the same report (same
  `soak.step` attribute, same abnormal-exit session, same crash payload) never arrives
  under two ids; duplicates are counted, not failed;
* the attachments of those reports arrived with their names and sizes;
* the repository holds no orphan attachment copies (folders or files no attachment row
  names), no copies missing for a row, no crash payload kept for a record that is gone or
  sent, no `*.tmp`, `*.partial`, `outgoing-*` or unrecovered crash files;
* no run hung (each has a hard timeout) and no run failed unexpectedly.

The last line is exactly `soak: kills K, reports R, received X, stored S, lost L,
duplicates D`. R counts the raised reports above (completed `report` runs plus real
crashes), X distinct ids the receiver accepted, S records not terminal after the drain (a
terminal record the server did not accept counts as lost), L lost reports, D extra
receipts of an id already received. Exit 0 when nothing was
lost and every check passed, 1 otherwise (the work folder is then kept), 2 on bad usage.

Random choices come from `random.Random(seed)`, so `--seed` replays the same plan; where a
random kill lands and what the receiver answers which request still depend on timing.
Standard library only.
"""

import argparse
import hashlib
import http.server
import json
import os
import random
import re
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

CRASH_POINTS = ["after-journal", "during-handlers", "after-save", "after-purge", "during-submit", "after-accept"]
REPORT_KINDS = ["error", "bug", "exception"]
RUNNING_APP_TRIGGERS = {"upload", "log_error", "log_exception", "dialog"}
SUBMISSION_TIMEOUT_MS = 1500
STALL_SECONDS = SUBMISSION_TIMEOUT_MS / 1000 + 1.5
CHILD_TIMEOUT_SECONDS = 30
MAX_KILL_DELAY_SECONDS = 0.3
DRAIN_LAUNCHES = 20
ATTACHMENT_POOL = 12
PROGRESS_EVERY = 50
# What the misbehaving receiver answers, with weights.
CHAOS = [("200", 50), ("503-retry-after-0", 10), ("503-retry-after-1", 10), ("reset", 18), ("stall", 12)]
# How a run ends, with weights: left to finish, SIGKILLed at a random moment, crash point.
MODES = [("finish", 3), ("kill", 4), ("point", 3)]
COMMANDS = [("report", 5), ("crash", 2), ("launch", 3)]
# Commands that can reach each crash point (after-save and after-purge need a crash file:
# the soak crashes first when none is pending).
POINT_COMMANDS = {"after-journal": ["report"], "during-handlers": ["report", "launch"],
                  "after-save": ["report", "launch"], "after-purge": ["report", "launch"],
                  "during-submit": ["report", "launch"], "after-accept": ["report", "launch"]}


def clock():
    """Wall-clock time with milliseconds, to line steps up with file times in the repository."""
    now = time.time()
    return time.strftime("%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


def say(text=""):
    print(text, flush=True)


# ---------------------------------------------------------------------------------------
# The receiver


@dataclass
class Receipt:
    """One request the receiver accepted with 200."""
    uuid: str
    trigger: str
    fingerprint: str
    attachments: dict  # name -> size


class Receiver:
    """A Backtrace-style submission endpoint on 127.0.0.1 that misbehaves on purpose.

    In `chaos` mode each request gets an answer drawn from CHAOS; in `good` mode every
    well-formed request gets 200. Only 200 counts as received.
    """

    def __init__(self, seed):
        self.rng = random.Random(f"{seed}/receiver")
        self.lock = threading.Lock()
        self.mode = "chaos"
        self.receipts = []
        self.answers = {}
        self.malformed = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # so `Expect: 100-continue` is answered

            def log_message(self, *args):
                pass

            def do_POST(self):
                receiver.handle(self)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/post?format=json&token=t"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def set_mode(self, mode):
        with self.lock:
            self.mode = mode

    def decide(self):
        with self.lock:
            if self.mode == "good":
                answer = "200"
            else:
                answer = self.rng.choices([a for a, _ in CHAOS], weights=[w for _, w in CHAOS])[0]
            self.answers[answer] = self.answers.get(answer, 0) + 1
            return answer

    def handle(self, request):
        request.close_connection = True
        body = read_body(request)
        if body is None:  # the host went away mid-upload (killed): nothing to answer
            return
        answer = self.decide()
        if answer == "reset":
            reset(request)
            return
        if answer == "stall":
            time.sleep(STALL_SECONDS)
            return
        if answer.startswith("503"):
            respond(request, 503, {"Retry-After": answer[-1]})
            return
        try:
            receipt = parse_submission(request.headers.get("Content-Type", ""), body)
        except ValueError as error:
            with self.lock:
                self.malformed.append(str(error))
            respond(request, 400)
            return
        with self.lock:
            self.receipts.append(receipt)
        respond(request, 200, body=b'{"response":"ok"}')

    def snapshot(self):
        with self.lock:
            return list(self.receipts), dict(self.answers), list(self.malformed)


def read_body(request):
    """The request body (Content-Length or chunked); None when the connection ended early."""
    try:
        if "chunked" in request.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                line = request.rfile.readline()
                if not line:
                    return None
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while request.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunk = request.rfile.read(size)
                if len(chunk) < size:
                    return None
                chunks.append(chunk)
                request.rfile.readline()
        length = int(request.headers.get("Content-Length", "0"))
        body = request.rfile.read(length)
        return body if len(body) == length else None
    except (OSError, ValueError):
        return None


def respond(request, status, headers=None, body=b""):
    try:
        request.send_response(status)
        for name, value in (headers or {}).items():
            request.send_header(name, value)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(body)))
        request.send_header("Connection", "close")
        request.end_headers()
        request.wfile.write(body)
    except OSError:
        pass


def reset(request):
    """Closes the connection with a TCP reset (SO_LINGER 0)."""
    try:
        request.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        request.rfile.close()  # the socket closes only once no file object holds it
        request.connection.close()
    except OSError:
        pass


def parse_submission(content_type, body):
    """Reads a Backtrace multipart submission: the JSON report and its attachment parts."""
    match = re.search(r'boundary="?([^";]+)"?', content_type)
    if not content_type.lower().startswith("multipart/form-data") or not match:
        raise ValueError(f"not multipart/form-data with a boundary: {content_type!r}")
    delimiter = b"--" + match.group(1).encode()
    report = None
    attachments = {}
    sections = body.split(b"\r\n" + delimiter)
    if not sections[0].startswith(delimiter):
        raise ValueError("the body does not start with the boundary")
    sections[0] = sections[0][len(delimiter):]
    if not sections[-1].startswith(b"--"):
        raise ValueError("the body does not end with the closing boundary")
    for section in sections[:-1]:
        head, separator, data = section.partition(b"\r\n\r\n")
        if not separator:
            raise ValueError("a part without a blank line after its headers")
        disposition = re.search(rb'(?im)^content-disposition:.*?\bname="([^"]*)"', head)
        name = disposition.group(1).decode() if disposition else None
        if name == "upload_file":
            try:
                report = json.loads(data)
            except ValueError as error:
                raise ValueError(f"upload_file is not JSON: {error}")
        elif name == "attachment_bt-breadcrumbs-0":
            pass  # the breadcrumbs (SPEC B-1): part of the wire, not a file the run attached
        elif name and name.startswith("attachment_"):
            attachments[name[len("attachment_"):]] = len(data)
    if not isinstance(report, dict) or not isinstance(report.get("uuid"), str):
        raise ValueError("no upload_file part with a uuid")
    attributes = report.get("attributes") or {}
    trigger = str(attributes.get("reporthost.trigger", "?"))
    return Receipt(report["uuid"], trigger, fingerprint(trigger, report), attachments)


def fingerprint(trigger, report):
    """What identifies the same report under any id: a crash's payload, an abnormal exit's
    session (in its message), a running-app report's `soak.step` attribute."""
    attributes = report.get("attributes") or {}
    if trigger == "crash":
        crash = (report.get("annotations") or {}).get("Crash")
        return "crash:" + hashlib.sha256(json.dumps(crash, sort_keys=True).encode()).hexdigest()
    if trigger == "abnormal_exit":
        return "abnormal_exit:" + str(attributes.get("error.message"))
    return "step:" + str(attributes.get("soak.step"))


# ---------------------------------------------------------------------------------------
# Running the host


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str
    seconds: float
    killed: bool = False  # we sent the SIGKILL after the chosen delay
    hung: bool = False  # it outlived CHILD_TIMEOUT_SECONDS


class Host:
    """Runs a private copy of the `reporthost` executable on the soak's repository."""

    def __init__(self, binary, config, work):
        self.binary = binary
        self.config = config
        self.work = work
        self.env = dict(os.environ)
        self.env.pop("REPORTHOST_CRASH_AT", None)

    def run(self, arguments, crash_point=None, kill_after=None):
        env = dict(self.env)
        if crash_point:
            env["REPORTHOST_CRASH_AT"] = crash_point
        started = time.monotonic()
        child = subprocess.Popen(
            [self.binary, *arguments, "--config", self.config], cwd=self.work, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        killed = hung = False
        try:
            if kill_after is not None:
                try:
                    out, err = child.communicate(timeout=kill_after)
                except subprocess.TimeoutExpired:
                    child.send_signal(signal.SIGKILL)
                    killed = True
                    out, err = child.communicate(timeout=CHILD_TIMEOUT_SECONDS)
            else:
                out, err = child.communicate(timeout=CHILD_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            hung = True
            out, err = child.communicate()
        return Run(child.returncode, out.decode(errors="replace"), err.decode(errors="replace"),
                   time.monotonic() - started, killed, hung)

    def status(self):
        run = self.run(["status", "--json"])
        if run.rc != 0:
            raise RuntimeError(f"reporthost status --json exited {run.rc}: {run.stderr.strip()}")
        return json.loads(run.stdout)


# ---------------------------------------------------------------------------------------
# The soak


@dataclass
class Ledger:
    """What the soak raised and saw."""
    kills: int = 0
    steps: int = 0
    completed_reports: dict = field(default_factory=dict)  # id -> (step, {name: size})
    logged_ids: dict = field(default_factory=dict)  # id -> step (a "stored" log line)
    crashes: dict = field(default_factory=dict)  # session -> (step, {name: size})
    point_kills: dict = field(default_factory=dict)  # crash point -> SIGKILL deaths
    random_kills: int = 0
    hangs: list = field(default_factory=list)
    failures: list = field(default_factory=list)  # unexpected exits


def make_attachments(rng, folder):
    """Attachment files of random small sizes, written once."""
    os.makedirs(folder)
    files = {}
    for index in range(ATTACHMENT_POOL):
        size = rng.randint(1, 64 * 1024 - 1)
        path = os.path.join(folder, f"attachment-{index:02d}.bin")
        with open(path, "wb") as out:
            out.write(rng.randbytes(size))
        files[path] = size
    return files


def plan_step(rng, step, attachments, point_cycle):
    """One step: the command line, how the run ends (crash point or kill delay) and the
    attachments it names. A crash point gets a command that can reach it."""
    mode = rng.choices([m for m, _ in MODES], weights=[w for _, w in MODES])[0]
    crash_point = next(point_cycle) if mode == "point" else None
    commands = POINT_COMMANDS[crash_point] if crash_point else [c for c, _ in COMMANDS]
    weights = [w for c, w in COMMANDS if c in commands]
    command = rng.choices(commands, weights=weights)[0]
    chosen = rng.sample(sorted(attachments), rng.randint(0, 3))
    if command == "report":
        kind = rng.choice(REPORT_KINDS)
        arguments = ["report", kind, "--summary", f"soak step {step}", "--attribute", f"soak.step={step}", "--print"]
    elif command == "crash":
        arguments = ["crash", "--signal", rng.choice(["SEGV", "ABRT"])]
    else:
        arguments, chosen = ["launch"], []
    for path in chosen:
        arguments += ["--attach", path]
    kill_after = None
    if mode == "kill":
        # Mostly inside the window where a run does its work (it starts in ~15 ms and
        # usually ends within 100 ms), sometimes anywhere up to 300 ms.
        kill_after = rng.uniform(0.015, 0.1) if rng.random() < 0.7 else rng.uniform(0, MAX_KILL_DELAY_SECONDS)
    expected = {os.path.basename(p): attachments[p] for p in chosen}
    return arguments, crash_point, kill_after, expected


def cycle(items):
    while True:
        yield from items


def record_run(ledger, step, arguments, crash_point, run, expected, log, kill_after=None):
    """Books one run: kills, raised reports, real crashes, hangs and unexpected exits."""
    command = arguments[0]
    died_of_kill = run.rc == -signal.SIGKILL and not run.hung
    if died_of_kill:
        ledger.kills += 1
        if run.killed:
            ledger.random_kills += 1
        elif crash_point:
            ledger.point_kills[crash_point] = ledger.point_kills.get(crash_point, 0) + 1
    for match in re.finditer(r"report ([0-9a-f-]{36}) \(\w+, (\w+)\) stored", run.stderr):
        if match.group(2) in RUNNING_APP_TRIGGERS:
            ledger.logged_ids.setdefault(match.group(1), step)
    outcome = "ok"
    if run.hung:
        ledger.hangs.append((step, arguments, crash_point))
        outcome = "HUNG"
    elif command == "report" and run.rc == 0:
        try:
            document = json.loads(run.stdout)
            ledger.completed_reports[document["report_id"]] = (step, expected)
        except (ValueError, KeyError, TypeError):
            ledger.failures.append((step, arguments, crash_point, run.rc, "no report document on stdout"))
            outcome = "FAILED"
    elif command == "crash" and run.rc in (-signal.SIGSEGV, -signal.SIGABRT):
        match = re.search(r"crashing on purpose with SIG\w+ \(session ([0-9a-f-]{36})\)", run.stderr)
        if match:
            ledger.crashes[match.group(1)] = (step, expected)
        else:
            ledger.failures.append((step, arguments, crash_point, run.rc, "crash run named no session"))
            outcome = "FAILED"
    elif not died_of_kill and not (command == "launch" and run.rc == 0):
        ledger.failures.append((step, arguments, crash_point, run.rc, run.stderr.strip()[-2000:]))
        outcome = "FAILED"
    if crash_point:
        how = f"CRASH_AT={crash_point}"
    elif kill_after is not None:
        how = f"kill after {kill_after * 1000:.0f} ms" + ("" if run.killed else ", ended first")
    else:
        how = "finish"
    log.write(f"{clock()} step {step}: {' '.join(arguments)} [{how}] rc {run.rc} {run.seconds * 1000:.0f} ms {outcome}\n")
    if run.rc != 0 and run.stderr.strip():
        log.write("  " + run.stderr.strip().replace("\n", "\n  ") + "\n")
    log.flush()


def soak(host, ledger, rng, attachments, repository, kills, deadline, log):
    """Runs steps until `kills` runs died of SIGKILL (or the time limit); False if stopped early."""
    point_cycle = cycle(CRASH_POINTS)
    next_progress = PROGRESS_EVERY
    while ledger.kills < kills:
        if time.monotonic() > deadline:
            return False
        ledger.steps += 1
        arguments, crash_point, kill_after, expected = plan_step(rng, ledger.steps, attachments, point_cycle)
        if crash_point in ("after-save", "after-purge") and not crash_files(repository):
            crash = ["crash", "--signal", rng.choice(["SEGV", "ABRT"])]
            record_run(ledger, f"{ledger.steps} (a crash to recover first)", crash, None, host.run(crash), {}, log)
        run = host.run(arguments, crash_point=crash_point, kill_after=kill_after)
        record_run(ledger, ledger.steps, arguments, crash_point, run, expected, log, kill_after)
        if ledger.kills >= next_progress:
            say(f"soak: ... {ledger.kills} kills after {ledger.steps} steps")
            next_progress += PROGRESS_EVERY
    return True


def drain(host, receiver, ledger, repository, log):
    """Lets the receiver behave and launches until every record is terminal."""
    receiver.set_mode("good")
    for attempt in range(1, DRAIN_LAUNCHES + 1):
        run = host.run(["launch"])
        log.write(f"{clock()} drain {attempt}: launch rc {run.rc} {run.seconds * 1000:.0f} ms\n  {run.stderr.strip()}\n")
        if run.hung:
            ledger.hangs.append(("drain", ["launch"], None))
        elif run.rc != 0:
            ledger.failures.append(("drain", ["launch"], None, run.rc, run.stderr.strip()[-2000:]))
        try:
            records = host.status()["records"]
        except (RuntimeError, ValueError, KeyError) as error:
            ledger.failures.append(("drain", ["status", "--json"], None, 1, str(error)))
            return None
        waiting = [r for r in records if r["state"] != "terminal"]
        if not waiting and not crash_files(repository):
            return attempt
        time.sleep(1.1)  # a Retry-After of 1 s may hold a record back
    return None


def crash_files(repository):
    folder = os.path.join(repository, "crashes")
    return [n for n in os.listdir(folder) if ".crash" in n] if os.path.isdir(folder) else []


def read_repository(repository):
    """The records (with their sessions) and attachment rows, read-only."""
    database = sqlite3.connect(f"file:{os.path.join(repository, 'reporthost.sqlite')}?mode=ro", uri=True)
    try:
        records = [dict(zip(("rowid", "report_id", "trigger", "state", "outcome", "session"), row)) for row in
                   database.execute("SELECT rowid, report_id, trigger, state, outcome, session FROM reports")]
        rows = database.execute("SELECT record, name, size, file FROM attachments").fetchall()
        # A crash identical to a waiting one is counted on that record (SPEC B-3): its session
        # names the record it went to.
        by_rowid = {r["rowid"]: r for r in records}
        for record_id, session in database.execute("SELECT record, session FROM merged_crashes"):
            if record_id in by_rowid:
                records.append(dict(by_rowid[record_id], session=session, merged=True))
    finally:
        database.close()
    return records, rows


def delivered(record):
    return record["state"] == "terminal" and (record["outcome"] or "").startswith("accepted")


def account(ledger, receipts, records):
    """Received, stored, lost, duplicates, and what else is wrong."""
    received = {}
    for receipt in receipts:
        received.setdefault(receipt.uuid, receipt)
    duplicates = len(receipts) - len(received)
    stored = {r["report_id"] for r in records if r["state"] != "terminal"}
    lost = {}  # what -> why
    problems = []

    for report_id, (step, expected) in ledger.completed_reports.items():
        if report_id not in received and report_id not in stored:
            lost[report_id] = f"report of step {step} (completed, id printed) neither received nor stored"
        elif report_id in received and received[report_id].attachments != expected:
            problems.append(f"report {report_id} (step {step}) arrived with attachments "
                            f"{received[report_id].attachments}, expected {expected}")
    for report_id, step in ledger.logged_ids.items():
        if report_id not in received and report_id not in stored:
            lost.setdefault(report_id, f"report of step {step} (logged as stored) neither received nor stored")

    crash_records = {}
    for record in records:
        if record["trigger"] == "crash" and record["session"]:
            crash_records.setdefault(record["session"], []).append(record)
    for session, (step, expected) in ledger.crashes.items():
        candidates = crash_records.get(session, [])
        if not candidates:
            lost[f"crash {session}"] = f"crash of step {step} (session {session}) has no record"
            continue
        ids = [r["report_id"] for r in candidates]
        if not any(i in received or i in stored for i in ids):
            lost[ids[0]] = f"crash of step {step} (session {session}, ids {ids}) neither received nor stored"
        for report_id in ids:
            if report_id in received and received[report_id].attachments != expected:
                problems.append(f"crash {report_id} (step {step}) arrived with attachments "
                                f"{received[report_id].attachments}, expected {expected}")

    for record in records:
        if record.get("merged"):
            continue
        report_id = record["report_id"]
        if record["state"] == "terminal" and not delivered(record):
            lost.setdefault(report_id, f"record {record['rowid']} ({record['trigger']}) terminal without delivery: {record['outcome']}")
        elif delivered(record) and report_id not in received:
            lost.setdefault(report_id, f"record {record['rowid']} ({record['trigger']}) finalised as accepted, never received")

    by_fingerprint = {}
    for receipt in received.values():
        by_fingerprint.setdefault(receipt.fingerprint, []).append(receipt.uuid)
    for key, ids in by_fingerprint.items():
        if len(ids) > 1:
            problems.append(f"the same report arrived under {len(ids)} ids ({key}): {', '.join(ids)}")
    return len(received), len(stored), lost, duplicates, problems


def find_orphans(repository, rows):
    """Attachment copies no row names, rows whose copy is gone, and leftover temporary files."""
    orphans = []
    named = {(str(record), file) for record, _, _, file in rows}
    folders = {str(record) for record, _, _, _ in rows}
    attachments = os.path.join(repository, "attachments")
    for entry in sorted(os.listdir(attachments)) if os.path.isdir(attachments) else []:
        path = os.path.join(attachments, entry)
        if not os.path.isdir(path) or entry not in folders:
            contents = os.listdir(path) if os.path.isdir(path) else []
            orphans.append(f"attachments/{entry} (no attachment row names it; holds {len(contents)} file(s))")
            continue
        for name in sorted(os.listdir(path)):
            if (entry, name) not in named:
                orphans.append(f"attachments/{entry}/{name} (no attachment row names it)")
    for record, name, _, file in rows:
        if not os.path.isfile(os.path.join(attachments, str(record), str(file))):
            orphans.append(f"attachments/{record}/{file}: the copy of {name} is missing")
    database = sqlite3.connect(f"file:{os.path.join(repository, 'reporthost.sqlite')}?mode=ro", uri=True)
    for (record,) in database.execute(
            "SELECT record FROM crash_payloads WHERE record NOT IN (SELECT rowid FROM reports WHERE state != 'terminal')"):
        orphans.append(f"crash_payloads row {record} (its record is gone or sent)")
    database.close()
    for folder, _, names in os.walk(repository):
        for name in names:
            relative = os.path.relpath(os.path.join(folder, name), repository)
            if (name.endswith((".tmp", ".partial", ".unreadable")) or name.startswith("outgoing-")
                    or (relative.startswith("crashes" + os.sep) and name.endswith(".crash"))):
                orphans.append(f"{relative} (left over)")
    return orphans


def prepare(binary, work, receiver):
    """Copies the executable into the work folder and writes the configuration."""
    copy = os.path.join(work, "reporthost")
    shutil.copy2(binary, copy)
    repository = os.path.join(work, "repository")
    config = os.path.join(work, "config.json")
    with open(config, "w") as out:
        json.dump({"repository": repository,
                   "submission": {"url": receiver.url, "timeoutMs": SUBMISSION_TIMEOUT_MS},
                   "retry": {"behaviour": "interval", "intervalSeconds": 0, "limit": 1000},
                   "reportsPerMin": 0}, out)
    return copy, config, repository


def parse_arguments():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    default_binary = os.environ.get("REPORTHOST_BIN") or os.path.join(root, ".build", "debug", "reporthost")
    parser = argparse.ArgumentParser(prog="scripts/soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=30, help="SIGKILL deaths to reach (default 30)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: time-based, printed)")
    parser.add_argument("--binary", default=default_binary, help="reporthost executable (default: $REPORTHOST_BIN "
                        "or .build/debug/reporthost; it is copied first)")
    parser.add_argument("--time-limit", type=float, default=600, help="seconds before the soak stops early (default 600)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    arguments = parser.parse_args()
    if arguments.kills < 1 or arguments.time_limit <= 0:
        parser.error("--kills and --time-limit must be positive")
    if not os.access(arguments.binary, os.X_OK):
        parser.error(f"no reporthost executable at {arguments.binary} (build it, or pass --binary / $REPORTHOST_BIN)")
    if arguments.seed is None:
        arguments.seed = int(time.time() * 1000) % 1_000_000_007
    return arguments


def main():
    arguments = parse_arguments()
    started = time.monotonic()
    deadline = started + arguments.time_limit
    work = tempfile.mkdtemp(prefix="reporthost-soak-")
    say(f"soak: seed {arguments.seed}, {arguments.kills} kills, work folder {work}")
    rng = random.Random(arguments.seed)
    receiver = Receiver(arguments.seed)
    ledger = Ledger()
    with open(os.path.join(work, "steps.log"), "w") as log:
        binary, config, repository = prepare(arguments.binary, work, receiver)
        host = Host(binary, config, work)
        attachments = make_attachments(rng, os.path.join(work, "attachments"))
        finished = soak(host, ledger, rng, attachments, repository, arguments.kills, deadline, log)
        if not finished:
            say(f"soak: time limit of {arguments.time_limit:.0f} s reached after {ledger.kills} of "
                f"{arguments.kills} kills ({ledger.steps} steps); stopping early, accounting follows")
        drained = drain(host, receiver, ledger, repository, log)
    receiver.stop()
    receipts, answers, malformed = receiver.snapshot()
    records, rows = read_repository(repository)
    received, stored, lost, duplicates, problems = account(ledger, receipts, records)
    orphans = find_orphans(repository, rows)
    reports = len(ledger.completed_reports) + len(ledger.crashes)

    say(f"soak: {ledger.steps} steps in {time.monotonic() - started:.0f} s; kills: {ledger.random_kills} random, "
        + ", ".join(f"{p} {ledger.point_kills.get(p, 0)}" for p in CRASH_POINTS))
    say(f"soak: receiver answers: " + ", ".join(f"{a} {answers.get(a, 0)}" for a, _ in CHAOS)
        + f"; {len(records)} records in the repository; "
        + (f"drained after {drained} launch(es)" if drained else f"NOT drained after {DRAIN_LAUNCHES} launches"))
    failed = bool(lost or orphans or problems or malformed or ledger.hangs or ledger.failures or not finished)
    for why in lost.values():
        say(f"soak: LOST: {why}")
    for orphan in orphans:
        say(f"soak: ORPHAN: {orphan}")
    for problem in problems:
        say(f"soak: PROBLEM: {problem}")
    for text in malformed:
        say(f"soak: MALFORMED SUBMISSION: {text}")
    for step, command, point, *_ in ledger.hangs:
        say(f"soak: HANG: step {step}: {' '.join(command)}" + (f" with REPORTHOST_CRASH_AT={point}" if point else ""))
    for step, command, point, rc, text in ledger.failures:
        say(f"soak: UNEXPECTED EXIT {rc}: step {step}: {' '.join(command)}"
            + (f" with REPORTHOST_CRASH_AT={point}" if point else "") + f": {text.splitlines()[-1] if text else ''}")
    if not finished:
        say(f"soak: FAILED: the time limit stopped the soak at {ledger.kills} of {arguments.kills} kills")
    if failed or arguments.keep:
        say(f"soak: work folder kept: {work} (steps.log, repository/, config.json; seed {arguments.seed})")
    else:
        shutil.rmtree(work, ignore_errors=True)
    say(f"soak: kills {ledger.kills}, reports {reports}, received {received}, stored {stored}, "
        f"lost {len(lost)}, duplicates {duplicates}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

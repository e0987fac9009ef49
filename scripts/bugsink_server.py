"""A throwaway Bugsink (a real, self-hosted Sentry-compatible server: PyPI `bugsink`, Django with
SQLite) on loopback, for the Sentry-protocol tests and `scripts/bench` (SPEC S).

    scripts/bugsink start FOLDER      sets Bugsink up in FOLDER (its settings, both SQLite files,
                                      a team and a project) and starts it on a free loopback port
                                      in the background; prints `dsn …`, `port …`, `pid …`
    scripts/bugsink events FOLDER     every event it stored, oldest first, as one JSON array (each
                                      with `_bugsink`: its issue, calculated type and tags)
    scripts/bugsink stop FOLDER       stops it

Every file stays in FOLDER. Events are digested inside the request that brings them
(`SNAPPEA["TASK_ALWAYS_EAGER"]`, the local template's setting), so one is readable as soon as
its 200 has arrived. gunicorn serves it (Django's runserver refuses chunked bodies).
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

MARK = "@@bugsink@@"

# Appended to what `create_conf --template=local` writes: every file in this folder, no network.
OVERRIDES = '''
import os as _os
_D = _os.path.dirname(_os.path.abspath(__file__))
DATABASES["default"]["NAME"] = _os.path.join(_D, "db.sqlite3")
DATABASES["snappea"]["NAME"] = _os.path.join(_D, "snappea.sqlite3")
SNAPPEA["TASK_ALWAYS_EAGER"] = True
SNAPPEA["WAKEUP_CALLS_DIR"] = _os.path.join(_D, "snappea.wakeup")
BUGSINK["INGEST_STORE_BASE_DIR"] = _os.path.join(_D, "ingestion")
BUGSINK["PHONEHOME"] = False
# Its quotas (1,000 events per 5 minutes) answer 429 to scripts/bench's 7 rounds of 400 events:
# the host honours the limit and delivers nothing, so the bench measures the server, not a quota.
for _quota in ("MAX_EVENTS_PER_PROJECT_PER_5_MINUTES", "MAX_EVENTS_PER_5_MINUTES", "MAX_EVENTS_PER_PROJECT_PER_HOUR", "MAX_EVENTS_PER_HOUR"):
    BUGSINK[_quota] = 1_000_000
EMAIL_BACKEND = "django.core.mail.backends.dummy.EmailBackend"
'''

SETUP = r'''
from django.core.management import call_command
call_command("migrate", verbosity=0, interactive=False)
call_command("migrate", "snappea", database="snappea", verbosity=0, interactive=False)
from django.contrib.auth import get_user_model
from teams.models import Team, TeamMembership, TeamRole
from projects.models import Project, ProjectMembership, ProjectRole
# A user for the pages (scripts/bugsink-screenshot): admin, password admin; loopback only.
user, _ = get_user_model().objects.get_or_create(username="admin", defaults=dict(is_superuser=True, is_staff=True))
user.set_password("admin")
user.save()
team, _ = Team.objects.get_or_create(name="reporthost")
TeamMembership.objects.get_or_create(team=team, user=user, defaults=dict(role=TeamRole.ADMIN, accepted=True))
project, _ = Project.objects.get_or_create(name="reporthost", defaults=dict(team=team))
ProjectMembership.objects.get_or_create(project=project, user=user, defaults=dict(role=ProjectRole.ADMIN, accepted=True))
out(dict(dsn=project.dsn, project=project.id, key=project.sentry_key.hex))
'''

EVENTS = r'''
from events.models import Event
from tags.models import EventTag
found = []
for event in Event.objects.order_by("digest_order"):
    data = event.get_parsed_data()
    data["_bugsink"] = dict(issue=str(event.issue_id), type=event.calculated_type, value=event.calculated_value,
                            tags={t.value.key.key: t.value.value for t in EventTag.objects.filter(event=event).select_related("value__key")})
    found.append(data)
out(found)
'''


def environment(folder):
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DATABASE_PATH", "SNAPPEA_DATABASE_PATH", "PORT")}
    env.update(DJANGO_SETTINGS_MODULE="bugsink_conf", PYTHONPATH=folder, PYTHONUNBUFFERED="1")
    return env


def django(folder, code):
    """`code` run after django.setup() in a fresh interpreter: what it gave `out`."""
    prelude = f"import json, django\ndjango.setup()\ndef out(o): print({MARK!r} + json.dumps(o, default=str))\n"
    run = subprocess.run([sys.executable, "-c", prelude + code], cwd=folder, env=environment(folder), capture_output=True, text=True)
    for line in run.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    raise SystemExit(f"bugsink: a Django step failed (exit {run.returncode}):\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(folder):
    os.makedirs(folder, exist_ok=True)
    port = free_port()
    conf = os.path.join(folder, "bugsink_conf.py")
    if os.path.exists(conf):
        os.unlink(conf)
    subprocess.run([sys.executable, "-m", "bugsink.scripts.create_conf", "--template=local", "--host", "127.0.0.1", "--port", str(port),
                    "--output-file", conf], cwd=folder, env=environment(folder), check=True, capture_output=True)
    with open(conf, "a") as f:
        f.write(OVERRIDES)
    made = django(folder, SETUP)
    with open(os.path.join(folder, "server.log"), "ab") as log:
        server = subprocess.Popen([sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", "1", "--timeout", "60",
                                   "--no-control-socket", "bugsink.wsgi"], cwd=folder, env=environment(folder), stdout=log,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    with open(os.path.join(folder, "server.pid"), "w") as f:
        f.write(str(server.pid))
    deadline = time.monotonic() + 60
    while True:
        if server.poll() is not None:
            raise SystemExit(f"bugsink: the server exited ({server.returncode}); see {folder}/server.log")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/ready", timeout=2) as answer:
                if answer.status == 200:
                    break
        except (urllib.error.URLError, ConnectionError, socket.timeout):
            pass
        if time.monotonic() > deadline:
            stop(folder)
            raise SystemExit(f"bugsink: not ready after 60 s; see {folder}/server.log")
        time.sleep(0.05)
    print(f"dsn {made['dsn']}\nport {port}\npid {server.pid}")


def stop(folder):
    """SIGTERM to the server's process group; SIGKILL after 10 s if any of it is left."""
    try:
        with open(os.path.join(folder, "server.pid")) as f:
            group = int(f.read())
        os.killpg(group, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            os.killpg(group, 0)
            time.sleep(0.05)
        os.killpg(group, signal.SIGKILL)
    except (FileNotFoundError, ValueError, ProcessLookupError):
        pass


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("start", "events", "stop"):
        raise SystemExit(__doc__)
    folder = os.path.abspath(sys.argv[2])
    # A blocked signal stays blocked across exec: a caller that blocks SIGTERM on the thread
    # that spawned this (a test process does) would leave a server `stop` cannot end.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    if sys.argv[1] == "start":
        start(folder)
    elif sys.argv[1] == "events":
        print(json.dumps(django(folder, EVENTS)))
    else:
        stop(folder)


if __name__ == "__main__":
    main()

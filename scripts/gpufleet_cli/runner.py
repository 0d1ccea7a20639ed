"""Run playbooks through ansible-runner and turn its events into progress and a summary.

``EventTracker`` is pure: it consumes ansible-runner event dicts (as the
``event_handler`` callback receives them) and keeps per-phase and per-host
state. ``Progress`` renders that state, one line per event of interest when
the output is not a TTY (or ``--no-progress``), a single updating status line
otherwise. ``run_playbook`` wires both to ``ansible_runner.run``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import shlex
import shutil
import signal
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field

from . import pywarnings
from .common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, FACT_CACHE, ROOT, CliError
from .table import columns

HOST_STATES = ("ok", "changed", "failed", "unreachable", "skipped")
# The environment variable that marks every process of one playbook run (ansible-playbook, its
# workers, their connection processes), whatever process group or session they moved to.
RUN_MARK = "GPUFLEET_RUN"
# The per-host events of a result that changed nothing, which the run's `job_events/` directory does
# not keep: ansible-runner writes one JSON file per event it is told to keep, and a run has one or
# two such events per task and host, hundreds of thousands of files on a large site. Their count is
# in the summary (the play recap), their lines in the run's stdout log. A result that changed
# something, failed, or was unreachable is kept, and so is every play, task and handler start (what
# `scripts/bench_lab` times the tasks by), the recap and every warning.
_UNKEPT_EVENTS = frozenset(
    {
        "runner_on_start",
        "runner_on_skipped",
        "runner_item_on_skipped",
    }
)
_UNKEPT_UNLESS_CHANGED = frozenset({"runner_on_ok", "runner_item_on_ok"})


def keep_event(event: dict) -> bool:
    """Whether ansible-runner should write ``event`` under the run's ``job_events/``."""
    kind = event.get("event", "")
    if kind in _UNKEPT_EVENTS:
        return False
    if kind in _UNKEPT_UNLESS_CHANGED:
        res = (event.get("event_data") or {}).get("res") or {}
        return bool(res.get("changed")) if isinstance(res, dict) else True
    return True


@dataclass
class Phase:
    name: str
    started: float
    ended: float | None = None
    tasks: int = 0

    @property
    def seconds(self) -> float:
        return (self.ended if self.ended is not None else self.started) - self.started


@dataclass
class Failure:
    host: str
    phase: str
    task: str
    message: str
    unreachable: bool = False


@dataclass
class EventTracker:
    """State built from ansible-runner events; no I/O."""

    phases: list[Phase] = field(default_factory=list)
    hosts: dict[str, dict[str, int]] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    current_task: str = ""
    stats: dict | None = None
    clock: object = time.monotonic

    def _host(self, name: str) -> dict[str, int]:
        return self.hosts.setdefault(name, dict.fromkeys(HOST_STATES, 0))

    @property
    def phase(self) -> str:
        return self.phases[-1].name if self.phases else ""

    def handle(self, event: dict) -> str | None:
        """Update state; return a short line worth showing for this event, or None."""
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        now = self.clock()
        if kind == "playbook_on_play_start":
            if self.phases and self.phases[-1].ended is None:
                self.phases[-1].ended = now
            name = data.get("play") or data.get("name") or "play"
            self.phases.append(Phase(name=name, started=now))
            return f"== {name}"
        if kind == "playbook_on_task_start":
            self.current_task = data.get("task") or data.get("name") or ""
            if self.phases:
                self.phases[-1].tasks += 1
            return None
        host = data.get("host")
        if kind == "runner_on_ok" and host:
            res = data.get("res") or {}
            self._host(host)["changed" if res.get("changed") else "ok"] += 1
            return None
        if kind == "runner_on_skipped" and host:
            self._host(host)["skipped"] += 1
            return None
        if kind in ("runner_on_failed", "runner_on_unreachable") and host:
            if kind == "runner_on_failed" and data.get("ignore_errors"):
                return None
            unreachable = kind == "runner_on_unreachable"
            self._host(host)["unreachable" if unreachable else "failed"] += 1
            res = data.get("res") or {}
            msg = str(res.get("msg") or res.get("stderr") or res.get("reason") or "failed").strip()
            task = data.get("task") or self.current_task
            self.failures.append(Failure(host, self.phase, task, msg, unreachable))
            first = msg.splitlines()[0] if msg else ""
            return f"   {'UNREACHABLE' if unreachable else 'FAILED'} {host}: {task}: {first[:160]}"
        if kind == "playbook_on_stats":
            # Summed over every playbook of the session (`gpufleet provision` may run two).
            self.stats = _merge_stats(self.stats, data)
            if self.phases and self.phases[-1].ended is None:
                self.phases[-1].ended = now
        return None

    def host_totals(self) -> dict[str, dict[str, int]]:
        """Per-host counts; playbook_on_stats is authoritative when present."""
        if not self.stats:
            return self.hosts
        totals: dict[str, dict[str, int]] = {}
        keymap = {"ok": "ok", "changed": "changed", "failures": "failed", "dark": "unreachable", "skipped": "skipped"}
        for stat_key, state in keymap.items():
            for host, n in (self.stats.get(stat_key) or {}).items():
                totals.setdefault(host, dict.fromkeys(HOST_STATES, 0))[state] = n
        return totals or self.hosts

    def exit_code(self, rc: int = 0) -> int:
        totals = self.host_totals()
        bad = any(t["failed"] or t["unreachable"] for t in totals.values())
        return EXIT_FAILED if (bad or rc != 0) else EXIT_OK

    def summary(self, log_path: str | list[str] | None = None, report_dir: str | None = None) -> str:
        totals = self.host_totals()
        lines = ["", "Summary"]
        if totals:
            rows = [(host, *(totals[host][s] for s in HOST_STATES)) for host in sorted(totals)]
            head = ("host", "ok", "changed", "failed", "unreach", "skipped")
            gaps = ("  ", " ", " ", " ", " ")
            lines += columns(rows, head, right=range(1, 6), min_widths=(0, 4), indent="  ", gap=gaps)
        ran = [p for p in self.phases if p.tasks]
        if ran:
            lines.append("  phases:")
            rows = [(f"{p.seconds:.1f}s", f"{p.name} ({p.tasks} tasks)") for p in ran]
            lines += columns(rows, right=(0,), min_widths=(8,), indent="    ")
        # Plays that matched no host or had every task skipped by tags (the Kubernetes
        # stages of a Slurm brief): one line. A play that ran in another playbook of the
        # session (the acceptance, skipped by provision's first step) is listed where it ran.
        ran_names = {p.name for p in ran}
        idle = list(dict.fromkeys(p.name for p in self.phases if not p.tasks and p.name not in ran_names))
        if idle:
            lines.extend(
                textwrap.wrap(
                    f"nothing to run in {len(idle)} more play(s): {'; '.join(idle)}",
                    width=110,
                    initial_indent="  ",
                    subsequent_indent="    ",
                    break_on_hyphens=False,
                )
            )
        n_hosts = len(totals)
        failed = sorted(h for h, t in totals.items() if t["failed"])
        unreachable = sorted(h for h, t in totals.items() if t["unreachable"])
        changed = sorted(h for h, t in totals.items() if t["changed"])
        lines.append(
            f"  hosts: {n_hosts} total, {n_hosts - len(set(failed) | set(unreachable))} ok, "
            f"{len(changed)} changed, {len(failed)} failed, {len(unreachable)} unreachable"
        )
        if self.failures:
            lines.append("  failures:")
            for f in self.failures:
                lines.append(f"    {f.host} [{f.phase} / {f.task}]")
                lines.extend(f"      {line}" for line in f.message.splitlines()[:40])
        if report_dir:
            lines.append(f"  reports: {report_dir}")
        for path in [log_path] if isinstance(log_path, str) else log_path or []:
            lines.append(f"  full log: {path}")
        return "\n".join(lines)


def _merge_stats(into: dict | None, data: dict) -> dict:
    """Per-host counts of two playbook_on_stats summed (a host in one only keeps its counts)."""
    merged = {k: dict(v) for k, v in (into or {}).items() if isinstance(v, dict)}
    for key, per_host in data.items():
        if not isinstance(per_host, dict):
            continue
        slot = merged.setdefault(key, {})
        for host, n in per_host.items():
            if isinstance(n, int) and not isinstance(n, bool):
                slot[host] = slot.get(host, 0) + n
    return merged


class Progress:
    """Prints what the tracker says, as lines or as one updating status line."""

    def __init__(self, tracker: EventTracker, stream=None, live: bool | None = None):
        self.tracker = tracker
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self._status_shown = False

    def _clear(self) -> None:
        if self._status_shown:
            self.stream.write("\r\033[K")
            self._status_shown = False

    def __call__(self, event: dict) -> bool:
        line = self.tracker.handle(event)
        if line:
            self._clear()
            self.stream.write(line + "\n")
        if self.live and self.tracker.current_task:
            counts = self.tracker.hosts
            done = sum(sum(v.values()) for v in counts.values())
            status = f"   [{self.tracker.phase}] {self.tracker.current_task} ({len(counts)} hosts, {done} results)"
            self.stream.write("\r\033[K" + status[:150])
            self._status_shown = True
        self.stream.flush()
        return keep_event(event)

    def close(self) -> None:
        self._clear()
        self.stream.flush()


@dataclass
class RunOptions:
    inventory: str
    limit: str | None = None
    check: bool = False
    diff: bool = False
    tags: str | None = None
    skip_tags: str | None = None
    extra_vars: list[str] = field(default_factory=list)
    brief: str | None = None
    progress: bool = True
    verbosity: int = 0
    flush_cache: bool = False


def build_cmdline(opts: RunOptions) -> str:
    parts: list[str] = []
    if opts.check:
        parts.append("--check")
    if opts.diff:
        parts.append("--diff")
    if opts.tags:
        parts += ["--tags", opts.tags]
    if opts.skip_tags:
        parts += ["--skip-tags", opts.skip_tags]
    if opts.flush_cache:
        parts.append("--flush-cache")
    for ev in opts.extra_vars:
        parts += ["-e", ev]
    return " ".join(shlex.quote(p) for p in parts)


def runner_kwargs(path: str, inventory: str, opts: RunOptions, private: str, ident: str) -> dict:
    """The arguments of ``ansible_runner.run`` for one playbook run (all but the event handler)."""
    env = {
        "ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": os.path.join(ROOT, "roles"),
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, "collections"),
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": FACT_CACHE,
        "PATH": os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ.get("PATH", ""),
        RUN_MARK: f"{os.getpid()}-{ident}",
    }
    if opts.brief:
        env["GPUFLEET_BRIEF"] = os.path.abspath(opts.brief)
    pywarnings.child_env(env)
    return {
        "private_data_dir": private,
        "project_dir": ROOT,
        "playbook": path,
        "inventory": inventory,
        "limit": opts.limit,
        "cmdline": build_cmdline(opts) or None,
        "envvars": env,
        "ident": ident,
        "quiet": True,
        "rotate_artifacts": 20,
        "verbosity": opts.verbosity or None,
        "suppress_env_files": True,
        # ansible-runner's default ('jsonfile') points the fact cache at this run's artifact directory,
        # which no later run reads: every run gathered facts again. Any other value leaves ansible.cfg's
        # cache (FACT_CACHE, above) in place.
        "fact_cache_type": "ansible.cfg",
    }


class RunSession:
    """One CLI command's playbook runs: a tracker and progress shared by every run, one summary at the end."""

    def __init__(self, opts: RunOptions, stream=None):
        self.opts = opts
        self.stream = stream or sys.stdout
        self.tracker = EventTracker()
        self.progress = Progress(self.tracker, stream=stream, live=None if opts.progress else False)
        self.logs: list[str] = []
        self.rcs: list[int] = []

    def run(self, playbook: str, opts: RunOptions | None = None) -> int:
        """Run ``playbooks/<playbook>`` (with ``opts``, default the session's); return ansible-playbook's rc."""
        try:
            # Imported when a playbook runs: about 80 ms that preflight, report and --help do without.
            import ansible_runner
        except ImportError as exc:  # pragma: no cover - the venv has it
            raise CliError("ansible-runner is not installed: run `make venv`") from exc
        opts = opts or self.opts
        path = os.path.join(ROOT, "playbooks", playbook)
        if not os.path.isfile(path):
            raise CliError(f"playbook {path} does not exist")
        inventory = os.path.abspath(opts.inventory)
        if not os.path.exists(inventory):
            raise CliError(f"inventory {opts.inventory} does not exist")
        stamp = _dt.datetime.now().strftime("%Y%m%dT%H%M%S")
        private = os.path.join(ROOT, ".cache", "runner")
        try:
            os.makedirs(private, exist_ok=True)
        except OSError as exc:
            why = exc.strerror or exc
            raise CliError(f"cannot keep this run's log under {private}: {why}", code=EXIT_FAILED) from exc
        check_free_space(private, earlier_runs=len(self.rcs))
        ident = f"{stamp}-{os.path.splitext(playbook)[0]}"
        kwargs = runner_kwargs(path, inventory, opts, private, ident)
        # Ctrl-C (SIGINT) or a SIGTERM stops the whole run: ansible-runner kills ansible-playbook's
        # process group (its workers and connections with it) at its next poll, so nothing goes on
        # changing hosts behind an operator who believes the run is over. Without this, the
        # interrupt ended this process and left ansible-playbook running on its own.
        stop = StopRequest()
        with stop.catching():
            result = ansible_runner.run(**kwargs, event_handler=self.progress, cancel_callback=stop.requested)
        # A run that did not end by itself (interrupted here, or ansible-playbook killed from outside:
        # the OOM killer, kill -9) may leave workers running tasks on the hosts with nobody reading
        # their results; they are found by the mark this run's environment gave them and stopped,
        # so nothing changes hosts after this returns. A run that ended by itself is left alone: its
        # SSH connection masters (ControlPersist) serve the next run.
        leftovers = 0
        if stop.signal is not None or result.rc is None:
            leftovers = stop_leftovers(kwargs["envvars"][RUN_MARK])
        self.progress.close()
        self.logs.append(os.path.join(private, "artifacts", ident, "stdout"))
        rc = result.rc if result.rc is not None else EXIT_FAILED
        self.rcs.append(rc)
        where = f" during '{self.tracker.phase} / {self.tracker.current_task}'" if self.tracker.phase else ""
        left = ""
        if leftovers:
            left = f"; {leftovers} of its processes left behind {'was' if leftovers == 1 else 'were'} stopped"
        if stop.signal is not None:
            self.stream.write(self.tracker.summary(log_path=self.logs) + "\n")
            raise RunStopped(
                f"interrupted ({stop.signal}){where}: ansible-playbook was stopped{left}; every file gpufleet "
                "writes is replaced whole, so run the same command again to converge",
                code=EXIT_INTERRUPTED,
            )
        if result.rc is None:
            # pexpect gives no exit status to a process that a signal ended.
            self.stream.write(self.tracker.summary(log_path=self.logs) + "\n")
            raise RunStopped(
                f"ansible-playbook was killed{where} (it ended on a signal, with no exit status: the OOM "
                f"killer or a kill from outside){left}; what it was doing on the hosts is unfinished, and "
                "every file gpufleet writes is replaced whole, so run the same command again to converge",
                code=EXIT_FAILED,
            )
        return rc

    def finish(self) -> int:
        """Print the summary of every run; return the exit code."""
        self.stream.write(self.tracker.summary(log_path=self.logs) + "\n")
        return self.tracker.exit_code(next((rc for rc in self.rcs if rc), 0))


# What one run keeps on this machine before it touches a host: its log and events (ansible-runner's
# artifacts, tens of MiB for a whole site at -vvv) and the hosts' facts.
MIN_FREE_BYTES = 64 << 20


def check_free_space(path: str, need: int = MIN_FREE_BYTES, earlier_runs: int = 0) -> None:
    """Refuse to start a run that could not keep its own log: ansible-runner fails with a traceback
    part way through a playbook when its artifact directory fills, leaving the hosts half done.
    ``earlier_runs``: playbooks this command already ran (their changes stand)."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return  # the run's own writes will say what is wrong
    if usage.free < need:
        touched = (
            "No host was touched."
            if not earlier_runs
            else "This command's earlier playbook runs stand; the next one did not start."
        )
        # After an earlier run of the same command, the command stops part way: what it changed is
        # not measured (gpufleet provision forgets its last passing acceptance on RunStopped).
        error = RunStopped if earlier_runs else CliError
        raise error(
            f"only {usage.free >> 20} MiB free under {path}, where this run keeps its log, events and the hosts' "
            f"facts; at least {need >> 20} MiB are needed: free space there (old runs are in "
            f"{os.path.join(path, 'artifacts')}) and run again. {touched}",
            code=EXIT_FAILED,
        )


class RunStopped(CliError):
    """The run ended before ansible-playbook did: interrupted here, or ansible-playbook killed."""


def stop_leftovers(mark: str, proc: str = "/proc") -> int:
    """SIGKILL every process (but this one) whose environment holds ``GPUFLEET_RUN=<mark>``; return how many."""
    needle = f"{RUN_MARK}={mark}".encode()
    stopped = 0
    try:
        pids = [int(d) for d in os.listdir(proc) if d.isdigit()]
    except OSError:
        return 0
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            with open(os.path.join(proc, str(pid), "environ"), "rb") as fh:
                env = fh.read().split(b"\0")
        except OSError:
            continue  # gone meanwhile, or another user's
        if needle in env:
            try:
                os.kill(pid, signal.SIGKILL)
                stopped += 1
            except OSError:
                pass
    return stopped


class StopRequest:
    """Remembers a SIGINT or SIGTERM while a playbook runs; ansible-runner polls ``requested``."""

    def __init__(self) -> None:
        self.signal: str | None = None

    def requested(self) -> bool:
        return self.signal is not None

    def _note(self, signum, _frame) -> None:
        self.signal = signal.Signals(signum).name

    @contextlib.contextmanager
    def catching(self):
        if threading.current_thread() is not threading.main_thread():
            yield  # signal handlers can only be set in the main thread
            return
        old = {sig: signal.signal(sig, self._note) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)


def run_playbook(playbook: str, opts: RunOptions, stream=None) -> int:
    """Run ``playbooks/<playbook>`` with ansible-runner; print progress and the summary; return the exit code."""
    session = RunSession(opts, stream=stream)
    session.run(playbook)
    return session.finish()


def add_run_arguments(p) -> None:
    """The options every playbook-running subcommand takes."""
    p.add_argument("-i", "--inventory", required=True, help="inventory directory (hosts.yml + brief.yml) or file")
    p.add_argument("--brief", help="the brief, when it is not brief.yml beside the inventory")
    p.add_argument("-l", "--limit", help="limit to these hosts/groups (passed to Ansible)")
    p.add_argument("-C", "--check", action="store_true", help="dry run: report what would change")
    p.add_argument("-D", "--diff", action="store_true", help="show file differences")
    p.add_argument("-t", "--tags", help="only tasks with these tags")
    p.add_argument("--skip-tags", help="skip tasks with these tags")
    p.add_argument(
        "-e",
        "--extra-vars",
        action="append",
        default=[],
        metavar="VARS",
        help="extra variables, as for ansible-playbook (repeatable)",
    )
    p.add_argument("--no-progress", action="store_true", help="plain line output, no live status line")
    p.add_argument(
        "--flush-cache",
        action="store_true",
        help="gather every host's facts anew instead of reading them from .cache/facts (after re-imaging a host)",
    )
    p.add_argument("-v", "--verbose", action="count", default=0, help="more Ansible output in the log")


def options_from_args(args) -> RunOptions:
    return RunOptions(
        inventory=args.inventory,
        limit=args.limit,
        check=args.check,
        diff=args.diff,
        tags=args.tags,
        skip_tags=args.skip_tags,
        extra_vars=list(args.extra_vars),
        brief=args.brief,
        progress=not args.no_progress,
        verbosity=args.verbose,
        flush_cache=getattr(args, "flush_cache", False),
    )

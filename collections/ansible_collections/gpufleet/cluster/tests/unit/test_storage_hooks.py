"""The storage role's Slurm job hooks, rendered from the role's templates and run for real with bash."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import jinja2
import pytest

ROLE = Path(__file__).resolve().parents[6] / "roles" / "storage"


def render(kind: str, jobs_dir: Path, tmp: Path) -> Path:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["comment"] = lambda text: "# " + str(text)
    env.filters["quote"] = lambda text: shlex.quote(str(text))
    src = ROLE / "templates" / "etc" / "slurm" / f"{kind}.d" / "gpufleet-storage-scratch.j2"
    text = env.from_string(src.read_text()).render(ansible_managed="managed", storage_scratch_jobs_dir=str(jobs_dir))
    out = tmp / f"45-{kind}"
    out.write_text(text)
    out.chmod(0o755)
    return out


def run(hook: Path, **env) -> subprocess.CompletedProcess:
    base = {"PATH": os.environ["PATH"]}
    return subprocess.run([str(hook)], env={**base, **env}, capture_output=True, text=True, timeout=30, check=False)


@pytest.fixture
def hooks(tmp_path):
    jobs = tmp_path / "scratch" / "jobs"
    jobs.mkdir(parents=True)
    return jobs, render("prolog", jobs, tmp_path), render("epilog", jobs, tmp_path)


def test_prolog_creates_the_job_directory_for_the_user_and_epilog_removes_it(hooks):
    jobs, prolog, epilog = hooks
    uid, gid = os.getuid(), os.getgid()
    assert run(prolog, SLURM_JOB_ID="4242", SLURM_JOB_UID=str(uid), SLURM_JOB_GID=str(gid)).returncode == 0
    d = jobs / "4242"
    assert d.is_dir() and (d.stat().st_mode & 0o777) == 0o700 and d.stat().st_uid == uid
    (d / "sub").mkdir()
    (d / "sub" / "data.bin").write_bytes(b"x" * 1024)
    assert run(epilog, SLURM_JOB_ID="4242", SLURM_JOB_USER="alice").returncode == 0
    assert not d.exists() and jobs.is_dir()


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")
def test_prolog_hands_the_directory_to_the_job_user(hooks):
    jobs, prolog, _ = hooks
    assert run(prolog, SLURM_JOB_ID="7", SLURM_JOB_UID="12345", SLURM_JOB_GID="2345").returncode == 0
    st = (jobs / "7").stat()
    assert (st.st_uid, st.st_gid) == (12345, 2345)


def test_epilog_never_follows_a_link_out_of_the_jobs_directory(hooks, tmp_path):
    jobs, _, epilog = hooks
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("keep")
    (jobs / "99").symlink_to(precious)
    assert run(epilog, SLURM_JOB_ID="99").returncode == 0
    assert (precious / "keep.txt").read_text() == "keep"
    assert not (jobs / "99").is_symlink()


@pytest.mark.parametrize("job", ["", "../..", "12; rm -rf /", "1/2"])
def test_epilog_ignores_anything_but_a_numeric_job_id(hooks, job):
    jobs, _, epilog = hooks
    (jobs / "keep").mkdir()
    env = {"SLURM_JOB_ID": job} if job else {}
    assert run(epilog, **env).returncode == 0
    assert (jobs / "keep").is_dir() and jobs.is_dir()


def test_hooks_exit_0_on_their_own_errors(hooks, tmp_path):
    jobs, prolog, epilog = hooks
    jobs.rmdir()  # the scratch is not there (not mounted, refused)
    assert run(prolog, SLURM_JOB_ID="5", SLURM_JOB_UID="0").returncode == 0
    assert not (jobs / "5").exists()
    assert run(epilog, SLURM_JOB_ID="5").returncode == 0
    assert run(prolog).returncode == 0  # no job environment at all


def test_prolog_keeps_a_requeued_jobs_directory(hooks):
    jobs, prolog, _ = hooks
    uid = str(os.getuid())
    assert run(prolog, SLURM_JOB_ID="8", SLURM_JOB_UID=uid).returncode == 0
    (jobs / "8" / "ckpt").write_text("step 100")
    assert run(prolog, SLURM_JOB_ID="8", SLURM_JOB_UID=uid).returncode == 0
    assert (jobs / "8" / "ckpt").read_text() == "step 100"


def test_hooks_are_valid_bash(hooks):
    _, prolog, epilog = hooks
    for hook in (prolog, epilog):
        assert subprocess.run(["bash", "-n", str(hook)], check=False).returncode == 0

"""A podman of the container tests' own: its images, containers and volumes in a fresh
storage root (nothing cached between runs, nothing of the machine's touched), the base image
made with mmdebstrap from Debian's packages (no registry image can be pulled here), and
formsync's image built from the repository's Containerfile on it.

Where the machine's OCI runtime cannot start a container as podman asks by default (a
sandbox without CAP_SYS_RESOURCE refuses podman's default RLIMIT_NOFILE and RLIMIT_NPROC;
crun refuses a cgroup v1 host whose cgroup v2 hierarchy holds a controller), podman is told
to use runc and lower limits; ``Podman.refused`` keeps what podman said the first time, and
``Podman.run_error`` what it said when no container can run at all. The build's pip reaches
the package index over the host's network, trusting the CA bundle pip trusts here."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BASE = "localhost/formsync-base:bookworm"
# Debian bookworm's python3 is 3.11, as python:3.11-slim's, with what that image holds beside
# it: CA certificates, netbase and tzdata (pyarrow reads /usr/share/zoneinfo), libstdc++6
# (numpy and pyarrow; apt brings it there), useradd (passwd).
PACKAGES = "python3,python3-venv,ca-certificates,netbase,tzdata,libstdc++6,passwd"
MIRROR = os.environ.get("FORMSYNC_DEBIAN_MIRROR", "http://deb.debian.org/debian")
FALLBACK = ('[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n'
            '[engine]\nruntime = "runc"\n')
BUILD_SECONDS = 600


def available() -> str | None:
    """Why the container tests cannot run on this machine, or None when they can."""
    missing = [tool for tool in ("podman", "mmdebstrap") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (scripts/test installs them as root)"
    if os.geteuid() != 0:
        return "mmdebstrap and podman run here as root only (the test makes its own storage root)"
    return None


def scratch() -> Path:
    """A fresh directory for the storage root: on tmpfs when there is room (builds go
    about twice as fast there), else the temporary directory."""
    shm = Path("/dev/shm")
    room = shutil.disk_usage(shm).free if shm.is_dir() else 0
    return Path(tempfile.mkdtemp(prefix="formsync-podman-", dir=shm if room > 4 << 30 else None))


@dataclass
class Podman:
    """``podman`` on the storage root under ``work``; ``timings`` holds each step's seconds."""

    work: Path
    env: dict[str, str]
    refused: str | None = None
    run_error: str | None = None
    timings: dict[str, float] = field(default_factory=dict)

    def __call__(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["podman", *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)} ended with {done.returncode}: {last_lines(done.stderr)}")
        return done

    def timed(self, step: str, started: float) -> None:
        self.timings[step] = round(time.monotonic() - started, 1)


def last_lines(text: str, n: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def start(work: Path) -> Podman:
    """A podman on a storage root of its own under ``work``, using the machine's runtime
    settings until they are seen to fail."""
    (work / "containers.conf").write_text("")
    (work / "storage.conf").write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{work}/storage"\n'
                                       f'runroot = "{work}/run"\n')
    env = {**os.environ, "CONTAINERS_CONF": str(work / "containers.conf"),
           "CONTAINERS_STORAGE_CONF": str(work / "storage.conf"), "TMPDIR": str(work)}
    return Podman(work, env)


def make_base(podman: Podman) -> None:
    """mmdebstrap's bookworm with Python 3.11 (Debian's packages only), imported as ``BASE``."""
    script = (f"mmdebstrap --quiet --variant=essential --include={PACKAGES} --dpkgopt=force-unsafe-io "
              f"--aptopt='Acquire::Languages \"none\"' bookworm - {MIRROR} | podman import - {BASE} > /dev/null")
    done = subprocess.run(["bash", "-o", "pipefail", "-c", script], env=podman.env, capture_output=True, text=True,
                          timeout=BUILD_SECONDS)
    if done.returncode != 0:
        raise AssertionError(f"mmdebstrap into {BASE} ended with {done.returncode}: {last_lines(done.stderr)}")


def pip_options() -> list[str]:
    """The ``podman build`` options that let the build's pip reach the package index as pip
    does here: through the CA bundle it trusts (a proxy's own, on some machines)."""
    bundle = os.environ.get("PIP_CERT") or ssl.get_default_verify_paths().cafile
    if not bundle or not Path(bundle).is_file():
        return []
    return ["--volume", f"{bundle}:/etc/ssl/host-ca.pem:ro", "--build-arg", "PIP_CERT=/etc/ssl/host-ca.pem"]


def probe(podman: Podman) -> None:
    """Whether a container runs here: as podman runs one by default, else with runc and
    lower limits (``FALLBACK``); ``run_error`` says why when neither can."""
    ran = podman("run", "--rm", "--network=host", BASE, "true", check=False)
    if ran.returncode == 0:
        return
    podman.refused = last_lines(ran.stderr, 3)
    (podman.work / "containers.conf").write_text(FALLBACK)
    again = podman("run", "--rm", "--network=host", BASE, "true", check=False)
    if again.returncode != 0:
        podman.run_error = f"{podman.refused}; with runc and lower limits: {last_lines(again.stderr, 3)}"


def build(podman: Podman, image: str, pip_options: list[str]) -> None:
    """formsync's image from the repository's Containerfile on ``BASE``, tagged ``image``.
    No layer is kept (a fresh storage root has none to reuse); host networking reaches the
    package index; RUN steps are chrooted where no container can run."""
    isolation = ["--isolation=chroot"] if podman.run_error else []
    podman("build", "--layers=false", "--network=host", *isolation, *pip_options, "--build-arg", f"BASE={BASE}",
           "--tag", image, str(ROOT), timeout=BUILD_SECONDS)


def image_with_base(image: str) -> Podman:
    """A podman with formsync's image built as ``image``: the base made, the run probed,
    then the build; each step's seconds in ``timings``."""
    podman, began = start(scratch()), time.monotonic()
    try:
        started = time.monotonic()
        make_base(podman)
        podman.timed("base", started)
        started = time.monotonic()
        probe(podman)
        podman.timed("probe", started)
        started = time.monotonic()
        build(podman, image, pip_options())
        podman.timed("build", started)
    except BaseException:
        remove(podman)
        raise
    podman.timed("ready", began)
    return podman


def remove(podman: Podman) -> None:
    """Everything the tests made in their storage root, then the root itself."""
    podman("rm", "--all", "--force", "--time", "0", check=False)
    podman("volume", "rm", "--all", "--force", check=False)
    podman("rmi", "--all", "--force", check=False)
    shutil.rmtree(podman.work, ignore_errors=True)

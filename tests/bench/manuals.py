"""Real manuals nobody on the project wrote, as one folder of files: the corpus of the lookup bench
(:mod:`tests.bench.lookup`) and of the answer bench's fresh questions (:mod:`tests.bench.factoids`).

``python -m tests.bench.manuals [--root DIR]`` builds (or finds) it and prints where. Six Debian 12
(bookworm) documentation packages, pinned by version and sha256, fetched with ``apt-get download`` into a
cache folder (``$FOLDERMIND_BENCH_CACHE`` or ``~/.cache/foldermind-bench``) and unpacked with ``dpkg-deb``;
only the files below are kept, under ``manuals/<package>/`` with their file names:

- PDF manuals with pages: gnuplot 5.4 (311 pages), Asymptote 2.85 (196), 4ti2 1.6.9 (59), and two
  short Asymptote papers (``CAD.pdf``, 7; ``asy-latex.pdf``, 11);
- HTML: GNU Aspell 0.60.8's manual split one node a file (67 files), apcupsd's user manual (one large
  file), and SQLite 3.40's SQL language pages (``lang_*.html``, 36 files).

The questions in ``lookup_data/queries.jsonl`` were written against exactly these files: a different
package version is refused (the hash), not silently measured.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.bench.kernels import BenchFailure, say

CACHE_ENV = "FOLDERMIND_BENCH_CACHE"
MARKER = ".manuals.json"
APT_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class Package:
    name: str
    version: str
    sha256: str
    keep: tuple[str, ...]  # globs under usr/share/doc/ of the files kept

    @property
    def deb(self) -> str:
        return f"{self.name}_{self.version.replace(':', '%3a')}_all.deb"


PACKAGES = (
    Package(
        "gnuplot-doc",
        "5.4.4+dfsg1-2",
        "73fe1816a296594cf6a1d38528f8d740fd650f57a2cb62e029f7920fcd5b31f0",
        ("gnuplot/gnuplot.pdf",),
    ),
    Package(
        "asymptote-doc",
        "2.85+ds-1",
        "b2ae6e97c64ede66c1e41cc913f790b01188d198557203a2b3c500ba3495e6ca",
        ("asymptote/asymptote.pdf", "asymptote/CAD.pdf", "asymptote/asy-latex.pdf"),
    ),
    Package(
        "4ti2-doc",
        "1.6.9+ds-8",
        "dd153e8a2473270099526d42fcd089cfff2bb729e776182c93dde330a295f4c5",
        ("4ti2/4ti2_manual.pdf",),
    ),
    Package(
        "aspell-doc",
        "0.60.8-4",
        "6c768a7131085af8b9e59e9c1810816a947510edf3a92e589cf6b8a47f33bf71",
        ("aspell-doc/aspell.html/*.html",),
    ),
    Package(
        "apcupsd-doc",
        "3.14.14-3.1",
        "04aa73e6d2e3b732109fe58de3fd4beb3dd735330036028622f958edcc365988",
        ("apcupsd/manual/manual.html",),
    ),
    Package(
        "sqlite3-doc",
        "3.40.1-2+deb12u2",
        "466e30d7066e2641fa13e56bc662a2ad521b8cc9c17dde9c9dac3d4f105e32f2",
        ("sqlite3/lang_*.html",),
    ),
)
FILES = 109  # what the globs above keep: 5 PDFs, 67 + 1 + 36 HTML files


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "foldermind-bench")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(pkg: Package) -> Path:
    """The pinned ``.deb``: from the cache folder, or fetched there with ``apt-get download``."""
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / pkg.deb
    if path.is_file() and _sha256(path) == pkg.sha256:
        return path
    say(f"apt-get download {pkg.name}={pkg.version} into {cache} (once)")
    try:
        out = subprocess.run(
            ["apt-get", "download", f"{pkg.name}={pkg.version}"],
            cwd=cache,
            capture_output=True,
            text=True,
            timeout=APT_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BenchFailure(f"apt-get download {pkg.name} failed: {exc}") from exc
    if out.returncode != 0:
        raise BenchFailure(
            f"apt-get download {pkg.name}={pkg.version} exited {out.returncode} (run apt-get update first, or put"
            f" {pkg.deb} with sha256 {pkg.sha256} into {cache}):\n{out.stderr[-1500:]}"
        )
    if not path.is_file() or _sha256(path) != pkg.sha256:
        raise BenchFailure(f"{path} is not the pinned {pkg.name} {pkg.version} (sha256 {pkg.sha256})")
    return path


def _unpack(pkg: Package, deb: Path, dest: Path) -> int:
    with tempfile.TemporaryDirectory(prefix="fm-deb-") as tmp:
        subprocess.run(["dpkg-deb", "-x", str(deb), tmp], check=True, timeout=120, stdin=subprocess.DEVNULL)
        doc = Path(tmp) / "usr" / "share" / "doc"
        n = 0
        for path in sorted(doc.rglob("*")):
            rel = path.relative_to(doc).as_posix()
            if path.is_file() and any(fnmatch.fnmatch(rel, glob) for glob in pkg.keep):
                target = dest / pkg.name / path.name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
                n += 1
        return n


def build(root: Path) -> Path:
    """``root/manuals/``: built once (a hidden marker names the packages), then reused as it is."""
    folder = root / "manuals"
    marker = folder / MARKER
    want = {p.name: p.sha256 for p in PACKAGES}
    if marker.is_file() and json.loads(marker.read_text("utf-8")) == want:
        return folder
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    n = sum(_unpack(pkg, fetch(pkg), folder) for pkg in PACKAGES)
    if n != FILES:
        raise BenchFailure(f"the pinned packages gave {n} files, not the {FILES} the queries were written on")
    marker.write_text(json.dumps(want), encoding="utf-8")
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.manuals", description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=str(cache_dir()), help="build the corpus under this folder")
    args = parser.parse_args(argv)
    try:
        print(build(Path(args.root)))
    except BenchFailure as exc:
        say(f"failed: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Installing a hub package with pip, without ever overwriting another package's files."""

from __future__ import annotations

import io
import json
import os
import subprocess
import zipfile

from verihub.errors import VerihubError
from verihub.ids import RepoId, dist_name

__all__ = ["pip_install"]

# Runs in the target interpreter: which distributions installed where pip will write own these top-level
# names? (A distribution elsewhere on sys.path, e.g. a parent environment's, is shadowed, not overwritten.)
_OWNERS = """
import json, sys, sysconfig
from importlib.metadata import distributions
from pathlib import Path
from packaging.utils import canonicalize_name
project, names = sys.argv[1], set(sys.argv[2:])
targets = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}
owners = {}
for dist in distributions():
    if canonicalize_name(dist.metadata["Name"] or "") == project:
        continue
    if Path(dist.locate_file("")).resolve() not in targets:
        continue
    for file in dist.files or []:
        if file.parts and file.parts[0] in names:
            owners[file.parts[0]] = dist.metadata["Name"]
print(json.dumps(owners))
"""


def pip_install(index_url: str, repo: RepoId, version: str, *, python: str, wheel: bytes | None) -> None:
    """``pip install owner-name==version`` from ``index_url`` (pip checks the index's sha256 of every
    file); refused first if ``wheel`` would write into files another installed distribution owns. The
    index URL goes to pip in its environment, not its command line: it may carry a token."""
    project = dist_name(repo)
    if wheel is not None:
        with zipfile.ZipFile(io.BytesIO(wheel)) as archive:
            names = sorted(
                {
                    name.split("/")[0]
                    for name in archive.namelist()
                    if ".dist-info/" not in name and ".data/" not in name
                }
            )
        found = subprocess.run([python, "-c", _OWNERS, project, *names], capture_output=True, text=True)
        if found.returncode != 0:
            raise VerihubError(f"cannot check which packages {python} has installed:\n{found.stderr.strip()[-800:]}")
        owners = json.loads(found.stdout)
        for name, owner in sorted(owners.items()):
            raise VerihubError(
                f"installing {project} would overwrite {name!r}, which {owner} installed; uninstall that first"
            )
    command = [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", f"{project}=={version}"]
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PIP_INDEX_URL": index_url})
    if result.returncode != 0:
        raise VerihubError(f"pip could not install {repo}@{version}:\n{result.stderr.strip()[-1500:]}")

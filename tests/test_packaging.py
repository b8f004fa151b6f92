"""A plain (non-editable) install carries the embedded corpora, the paper's tables and the LICENSE.

Builds the real wheel, unpacks it into a temporary directory and runs the installed
package from there, away from the checkout: the default corpora load and the paper's
reference tables are found.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

from helpers import ROOT

CHECK = """
import sys
import convatt
from convatt.data.formats import FORMATS
from convatt.data import EMBEDDED_DATA_DIR, load_corpus
from convatt.results.paper import paper_table
assert sys.argv[1] in convatt.__file__, convatt.__file__
assert EMBEDDED_DATA_DIR.is_relative_to(sys.argv[1]), EMBEDDED_DATA_DIR
ptb = load_corpus("ptb", FORMATS["ptb"].default_data)
ud = load_corpus("ud", FORMATS["ud"].default_data)
print(len(ptb.train) + len(ptb.dev) + len(ptb.test), len(ud.train), len(paper_table("table2d_ud_per_treebank")))
"""


def test_the_wheel_carries_the_embedded_data(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(ROOT),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = (tmp_path / "dist").glob("convatt-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for needed in (
        "convatt/embedded/paper/paper_table2b_ptb.csv",
        "convatt/embedded/ptb-sample.tar.gz",
        "convatt/embedded/ud-2.2/UD_English-LinES/LICENSE.txt",
        "convatt/embedded/ud-2.2/UD_Vietnamese-VTB/vi_vtb-ud-train.conllu.gz",
    ):
        assert needed in names, needed
    assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE") for n in names)
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("CONVATT_REFERENCE", None)
    r = subprocess.run(
        [sys.executable, "-c", CHECK, str(site)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    # the whole PTB sample (3,914 sentences), LinES train (2,738), the paper's 47 treebanks
    assert r.stdout.split() == ["3914", "2738", "47"]

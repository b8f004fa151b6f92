"""What a release carries beside the code: LICENSE as setup.cfg says, CITATION.cff (the software
at this version, and the paper as the preferred citation) and a CHANGELOG whose newest entry is
this version."""

from __future__ import annotations

import configparser
import re

import yaml
from helpers import ROOT

from convatt import __version__


def setup_metadata() -> configparser.SectionProxy:
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    return setup["metadata"]


def test_license_is_setup_cfgs():
    license_name = setup_metadata()["license"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert license_name == "MIT" and text.startswith("MIT License\n")
    assert "Copyright (c) 2026 the convatt authors" in text
    assert setup_metadata()["license_files"] == "LICENSE"


def test_citation_cites_this_version_and_the_paper():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["cff-version"] == "1.2.0" and citation["type"] == "software"
    assert citation["version"] == __version__
    assert citation["license"] == setup_metadata()["license"]
    paper = citation["preferred-citation"]
    assert paper["type"] == "conference-paper" and paper["year"] == 2020
    assert [a["family-names"] for a in paper["authors"]] == ["Dufter", "Schmitt", "Schütze"]
    assert paper["title"].startswith("Increasing Learning Efficiency of Self-Attention Networks")
    assert (paper["start"], paper["end"]) == (3630, 3636)


def test_changelogs_newest_entry_is_this_version():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    versions = re.findall(r"^## \[([^\]]+)\]", text, flags=re.MULTILINE)
    released = [version for version in versions if version != "Unreleased"]  # Keep a Changelog's section
    assert versions[: len(versions) - len(released)] in ([], ["Unreleased"]), versions
    assert released and released[0] == __version__, versions
    assert "(MIT)" in text and "CITATION.cff" in text

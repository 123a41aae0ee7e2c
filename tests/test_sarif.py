"""`brrrtui report --sarif`: findings as SARIF 2.1.0, validated against the OASIS schema committed in
tests/schemas/sarif-schema-2.1.0.json (sarif-spec's sarif-2.1/schema, the 2.1.0 errata01 OS schema), on real
H200 recordings."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import jsonschema
import pytest

from analyzers.analyze import analyze
from brrrtui.present.sarif import message, to_sarif
from brrrtui.recording.load import load_trace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
with open(os.path.join(ROOT, "tests", "schemas", "sarif-schema-2.1.0.json"), encoding="utf-8") as f:
    SCHEMA = json.load(f)
VALIDATOR = jsonschema.Draft4Validator(SCHEMA)


def sarif_of(name: str) -> dict:
    r = subprocess.run(
        [sys.executable, "-m", "brrrtui", "report", "--sarif", os.path.join(FIXTURES, name)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize(
    "name", ["h200_hf_gpt2_steady.brrr.gz", "h200_known_regimes.brrr.gz", "h200_bert.brrr.gz"]
)
def test_valid_against_the_sarif_2_1_0_schema_one_result_per_finding(name):
    doc = sarif_of(name)
    VALIDATOR.validate(doc)
    a = analyze(load_trace(os.path.join(FIXTURES, name)))
    results = doc["runs"][0]["results"]
    assert len(results) == len(a.findings) > 0
    rules = doc["runs"][0]["tool"]["driver"]["rules"]
    for f, r in zip(a.findings, results, strict=True):
        assert r["ruleId"] == f.kind.value == rules[r["ruleIndex"]]["id"]
        assert r["message"]["text"] == message(f)
        if f.lines:
            region = r["locations"][0]["physicalLocation"]["region"]
            assert region["startLine"] == f.lines[0].line
            assert len(r.get("relatedLocations", [])) == len(f.lines) - 1


def test_the_hf_gpt2_vocabulary_finding_sits_on_its_line_with_saving_and_fix():
    doc = sarif_of("h200_hf_gpt2_steady.brrr.gz")
    run = doc["runs"][0]
    (slow,) = [r for r in run["results"] if r["ruleId"] == "slow_gemm"]
    loc = slow["locations"][0]["physicalLocation"]
    # the run's cwd was the repository root: the path is relative to it, as code scanning wants
    assert loc["artifactLocation"] == {"uri": "validation/workloads/hf_gpt2.py", "uriBaseId": "SRCROOT"}
    assert loc["region"] == {"startLine": 32}
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"] == "file:///work/main/.snap/"
    text = slow["message"]["text"]
    assert "Saving: ~12.8 ms per step." in text and "Fix: pad 50257 to 50304" in text
    assert slow["level"] == "warning" and 12e6 < slow["properties"]["saving_ns"] < 13e6


def test_a_finding_with_several_lines_and_one_with_none(tmp_path):
    a = analyze(load_trace(os.path.join(FIXTURES, "h200_known_regimes.brrr.gz")))
    fusion = next(f for f in a.findings if len(f.lines) > 1)
    doc = to_sarif(a, "0")
    r = doc["runs"][0]["results"][a.findings.index(fusion)]
    related = [x["physicalLocation"]["region"]["startLine"] for x in r["relatedLocations"]]
    assert related == [ln.line for ln in fusion.lines[1:]]
    # a finding that names no line (a fused optimizer) is shown on the script itself
    a.findings.append(type(fusion)(fusion.kind, (), None, fusion.facts))
    a.trace.meta["argv"] = ["examples/known_regimes.py"]
    a.trace.meta["cwd"] = "/repo"
    doc = to_sarif(a, "0")
    VALIDATOR.validate(doc)
    last = doc["runs"][0]["results"][-1]
    assert last["level"] == "note" and "Saving: unknown." in last["message"]["text"]
    assert last["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "examples/known_regimes.py"


def test_the_validator_rejects_what_sarif_forbids():
    doc = sarif_of("h200_known_regimes.brrr.gz")
    for damage in (
        lambda d: d.pop("version"),
        lambda d: d["runs"][0]["results"][0].update(level="severe"),
        lambda d: d["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"].update(
            startLine=0
        ),
    ):
        bad = copy.deepcopy(doc)
        damage(bad)
        with pytest.raises(jsonschema.ValidationError):
            VALIDATOR.validate(bad)

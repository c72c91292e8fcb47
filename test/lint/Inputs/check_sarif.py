#!/usr/bin/env python3
"""Asserts the SARIF 2.1.0 structure fabricize lint promises (what GitHub code
scanning reads), and that the results are the expected rule ids at the
expected lines: check_sarif.py report.sarif fabric-backward:12 ..."""
import json
import sys


def fail(message):
    print("check_sarif: " + message, file=sys.stderr)
    sys.exit(1)


def require(obj, key, kind, where):
    if not isinstance(obj, dict) or key not in obj:
        fail(f"{where}: missing '{key}'")
    if not isinstance(obj[key], kind):
        fail(f"{where}.{key}: expected {kind.__name__}, got {type(obj[key]).__name__}")
    return obj[key]


def positive_int(obj, key, where):
    value = require(obj, key, int, where)
    if value < 1:
        fail(f"{where}.{key}: {value} is not 1-based")
    return value


def main():
    with open(sys.argv[1]) as f:
        sarif = json.load(f)
    expected = sorted(sys.argv[2:])
    if require(sarif, "version", str, "log") != "2.1.0":
        fail("version is not 2.1.0")
    if "sarif" not in require(sarif, "$schema", str, "log"):
        fail("$schema does not name the SARIF schema")
    runs = require(sarif, "runs", list, "log")
    if len(runs) != 1:
        fail(f"expected one run, got {len(runs)}")
    run = runs[0]
    driver = require(require(run, "tool", dict, "run"), "driver", dict, "tool")
    if require(driver, "name", str, "driver") != "fabricize":
        fail("driver.name is not fabricize")
    require(driver, "version", str, "driver")
    rule_ids = set()
    for i, rule in enumerate(require(driver, "rules", list, "driver")):
        rule_ids.add(require(rule, "id", str, f"rules[{i}]"))
        require(require(rule, "shortDescription", dict, f"rules[{i}]"), "text", str, f"rules[{i}].shortDescription")
    if "fabric-backward" not in rule_ids:
        fail("driver.rules does not list the catalogue")
    seen = []
    fixes_seen = 0
    for i, result in enumerate(require(run, "results", list, "run")):
        where = f"results[{i}]"
        rule_id = require(result, "ruleId", str, where)
        if rule_id not in rule_ids:
            fail(f"{where}.ruleId {rule_id} is not in driver.rules")
        if require(result, "level", str, where) not in ("warning", "error", "note", "none"):
            fail(f"{where}.level is not a SARIF level")
        if not require(require(result, "message", dict, where), "text", str, where + ".message"):
            fail(f"{where}.message.text is empty")
        locations = require(result, "locations", list, where)
        if not locations:
            fail(f"{where}.locations is empty")
        physical = require(locations[0], "physicalLocation", dict, where + ".locations[0]")
        uri = require(require(physical, "artifactLocation", dict, where), "uri", str, where + ".artifactLocation")
        region = require(physical, "region", dict, where + ".physicalLocation")
        line = positive_int(region, "startLine", where + ".region")
        positive_int(region, "startColumn", where + ".region")
        seen.append(f"{rule_id}:{line}")
        for j, fix in enumerate(result.get("fixes", [])):
            fixes_seen += 1
            changes = require(fix, "artifactChanges", list, f"{where}.fixes[{j}]")
            for change in changes:
                if require(require(change, "artifactLocation", dict, "artifactChange"), "uri", str,
                           "artifactLocation") != uri:
                    fail(f"{where}: fix edits another file than the result's")
                replacements = require(change, "replacements", list, "artifactChange")
                if not replacements:
                    fail(f"{where}: a fix without replacements")
                for r in replacements:
                    deleted = require(r, "deletedRegion", dict, "replacement")
                    start = (positive_int(deleted, "startLine", "deletedRegion"),
                             positive_int(deleted, "startColumn", "deletedRegion"))
                    end = (positive_int(deleted, "endLine", "deletedRegion"),
                           positive_int(deleted, "endColumn", "deletedRegion"))
                    if end < start:
                        fail(f"{where}: deletedRegion ends before it starts")
                    require(require(r, "insertedContent", dict, "replacement"), "text", str, "insertedContent")
    if sorted(seen) != expected:
        fail(f"results {sorted(seen)} != expected {expected}")
    if expected and fixes_seen == 0:
        fail("no result carries a fix")
    print(f"check_sarif: OK, {len(seen)} results, {fixes_seen} fixes")


if __name__ == "__main__":
    main()

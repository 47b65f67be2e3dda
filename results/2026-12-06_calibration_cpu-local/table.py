#!/usr/bin/env python3
"""Markdown tables of a calibration check from `moebench calibrate --format json` outputs (the fit's and the held-out
--no-fit run's). Usage: table.py FIT.json HELDOUT.json > tables.md"""
import json
import os
import sys

fit = json.load(open(sys.argv[1]))
held = json.load(open(sys.argv[2]))


def pct(e):
    return "-" if e is None else f"{100 * e:+.0f}%"


def mark(e, digits=0):
    s = "-" if e is None else f"{100 * e:+.{digits}f}%"
    return f"**{s}**" if e is not None and abs(e) > 0.25 else s


def name(path):
    return os.path.splitext(os.path.basename(path))[0]


def spread(s):
    return (f"{s['within_25pct']} of {s['count']} within 25%; |error| median {100 * s['median_abs_error']:.0f}%, "
            f"90th percentile {100 * s['p90_abs_error']:.0f}%, max {100 * s['max_abs_error']:.0f}% "
            f"({s['worst'].split('/')[-1]}: {pct(s['worst_error'])})")


out = []
out.append("### Parameters (fitted on the fit set)\n")
out.append("| parameter | before | after | |\n| --- | --- | --- | --- |")
for p in fit["params"]:
    out.append(f"| `{p['key']}` | {p['before']:.4g} | {p['after']:.4g} | {p['status']} |")
o = fit["objective"]
out.append(f"\nSum of ln(modeled / measured)^2 over {o['phase_rows']} phase rows of the fit set: "
           f"{o['sum_sq_log_error_before']:.3g} before, {o['sum_sq_log_error_after']:.3g} after "
           f"({o['parameter_sets_priced']} parameter sets priced).\n")

for title, doc, key in (("Fit set (in sample: what the parameters were fitted to)", fit, "after"),
                        ("Held-out set (not fitted to: the error that counts)", held, "before")):
    s = doc["summary"]
    out.append(f"### {title}\n")
    out.append(f"- phases: {spread(s['phases_' + key])}")
    out.append(f"- steps: {spread(s['steps_' + key])}\n")
    reports = []
    for r in doc["rows"]:
        if r["report"] not in reports:
            reports.append(r["report"])
    phases = []
    for r in doc["rows"]:
        if r["phase"] not in phases and r["phase"] != "step":
            phases.append(r["phase"])
    cell = {(r["report"], r["phase"]): r for r in doc["rows"]}
    err = "error_after" if key == "after" else "error_before"
    mod = "modeled_after_us" if key == "after" else "modeled_before_us"
    out.append("| report | measured step (ms) | modeled step (ms) | step error |\n| --- | --- | --- | --- |")
    for rep in reports:
        r = cell[(rep, "step")]
        out.append(f"| {name(rep)} | {r['measured_us'] / 1e3:.1f} | {r[mod] / 1e3:.1f} | {mark(r[err], 1)} |")
    out.append("")
    out.append("| phase | " + " | ".join(name(r) for r in reports) + " |")
    out.append("| --- |" + " --- |" * len(reports))
    for ph in phases:
        cells = []
        for rep in reports:
            r = cell.get((rep, ph))
            cells.append("" if r is None else mark(r[err]))
        out.append(f"| {ph} | " + " | ".join(cells) + " |")
    out.append("")
print("\n".join(out))

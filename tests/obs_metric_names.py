#!/usr/bin/env python3
"""Checks that every metric the observability pack names is one gpupool exports (issue 19).

    obs_metric_names.py --exposition FILE [--exposition FILE ...] --dashboard JSON --rules YAML
                        [--promql-out FILE]

Reads the metric families of the expositions (the `# TYPE name type` lines of a real server's /metrics and a real
agent's --metrics-listen: a family shows its HELP and TYPE even before it has samples), every PromQL query of the
Grafana dashboard (panel targets' `expr`, template variables' `label_values(...)`) and every `expr:` of the alert
rules, extracts the metric names each query uses, and fails, naming the query, when one is not exported.
A series name is exported when it is a family's name, or a histogram's or summary's family name plus _bucket
(histograms only), _sum or _count. `up` is Prometheus's own. Each query must name at least one metric (so that a
query the extraction cannot read fails rather than passes).

--promql-out writes the queries, with Grafana's variables replaced, as a Prometheus rule file of recording rules,
so that `promtool check rules` can check their syntax.
"""
import argparse
import json
import re
import sys

KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
            "group_right", "inf", "nan", "atan2", "start", "end"}
PROMETHEUS_OWN = {"up"}  # synthetic series Prometheus adds to every scrape


def families(paths):
    out = {}
    for p in paths:
        for line in open(p, encoding="utf-8"):
            m = re.match(r"# TYPE (\S+) (\S+)", line)
            if m:
                out[m.group(1)] = m.group(2)
    return out


def exported(name, fams):
    if name in fams or name in PROMETHEUS_OWN:
        return True
    for suffix, kinds in (("_bucket", {"histogram"}), ("_sum", {"histogram", "summary"}),
                          ("_count", {"histogram", "summary"})):
        if name.endswith(suffix) and fams.get(name[: -len(suffix)]) in kinds:
            return True
    return False


def grafana_to_promql(q):
    """Grafana's variables as values Prometheus accepts (they appear in label matchers and ranges)."""
    q = re.sub(r"\$__(rate_)?interval|\$__range", "5m", q)
    return re.sub(r"\$\{?(\w+)\}?", ".*", q)


def metric_names(q):
    """The metric names a PromQL expression selects."""
    q = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', q)  # string literals
    q = re.sub(r"\{[^}]*\}", " ", q)  # label matchers
    q = re.sub(r"\[[^\]]*\]", " ", q)  # ranges and subqueries
    q = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", q)  # label lists
    names = []
    for m in re.finditer(r"(?<![\w.:])([A-Za-z_:][A-Za-z0-9_:]*)", q):
        word = m.group(1)
        rest = q[m.end():].lstrip()
        if rest.startswith("("):  # a function or an aggregation
            continue
        if word.lower() in KEYWORDS:
            continue
        names.append(word)
    return names


def dashboard_queries(dash):
    out = []

    def walk(panels, where):
        for p in panels:
            title = p.get("title", "?")
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((f"{where}panel '{title}' {t.get('refId', '')}", t["expr"]))
            walk(p.get("panels", []), f"{where}row '{title}' / " if p.get("type") == "row" else where)

    walk(dash.get("panels", []), "")
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = re.match(r"\s*label_values\((.*),\s*\w+\s*\)\s*$", q or "")
        if not m:
            out.append((f"variable '{v['name']}'", "<unreadable: " + str(q) + ">"))
        else:
            out.append((f"variable '{v['name']}'", m.group(1)))
    return out


def rule_queries(path):
    """Each `expr:` of the rule file: a plain scalar on its line, or a block (| or >) of deeper lines."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, alert = [], "?"
    i = 0
    while i < len(lines):
        a = re.match(r"\s*- (alert|record):\s*(\S+)", lines[i])
        if a:
            alert = a.group(2)
        m = re.match(r"(\s*)expr:\s*(.*)$", lines[i])
        if m:
            indent, value = len(m.group(1)), m.group(2).strip()
            if value in ("|", ">", "|-", ">-"):
                body = []
                i += 1
                while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                    body.append(lines[i].strip())
                    i += 1
                out.append((f"rule '{alert}'", " ".join(body)))
                continue
            out.append((f"rule '{alert}'", value.strip("'\"")))
        i += 1
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exposition", action="append", required=True)
    ap.add_argument("--dashboard", required=True)
    ap.add_argument("--rules", required=True)
    ap.add_argument("--promql-out")
    args = ap.parse_args()
    fams = families(args.exposition)
    if not fams:
        sys.exit("obs_metric_names: no metric family in " + ", ".join(args.exposition))
    queries = dashboard_queries(json.load(open(args.dashboard, encoding="utf-8"))) + rule_queries(args.rules)
    problems, used = [], set()
    for where, q in queries:
        promql = grafana_to_promql(q)
        names = metric_names(promql)
        if not names:
            problems.append(f"{where}: names no metric (or cannot be read): {q}")
        for n in names:
            used.add(n)
            if not exported(n, fams):
                problems.append(f"{where}: {n} is exported by neither the server nor the agent: {q}")
    if args.promql_out:
        with open(args.promql_out, "w", encoding="utf-8") as f:
            f.write("groups:\n  - name: queries\n    rules:\n")
            for k, (where, q) in enumerate(queries):
                f.write(f"      - record: query_{k}\n        expr: {json.dumps(grafana_to_promql(q))}\n")
    for p in problems:
        print("obs_metric_names: " + p, file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"obs_metric_names: {len(queries)} queries name {len(used)} metrics, all exported "
          f"({len(fams)} families scraped)")


if __name__ == "__main__":
    main()

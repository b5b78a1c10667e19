#!/usr/bin/env python3
"""Lints and renders the Helm chart with the official Helm SDK (helm-python-sdk, offline).

Usage: render.py CHART_DIR VALUES_JSON NAMESPACE
Prints JSON: {"lint": <lint report>, "manifests": {template path: rendered text}}.
"""
import json
import sys

import helm_python as helm


def main():
    chart_dir, values_json, namespace = sys.argv[1], sys.argv[2], sys.argv[3]
    values = json.loads(values_json)
    report = helm.lint(chart_dir, values, strict=True, namespace=namespace, kube_version="v1.33.0")
    chart = helm.Chart.load(chart_dir)
    chart.validate_schema(values)
    manifests = chart.render(values, name="kustomize-controller", namespace=namespace, is_install=True)
    json.dump({"lint": report, "manifests": manifests}, sys.stdout)


if __name__ == "__main__":
    main()

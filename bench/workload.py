#!/usr/bin/env python3
"""Writes kustomization trees shaped like a GitOps repository, for the build and apply
benchmarks. Deterministic (no randomness, sorted output); Python standard library only.

Shape: `bases/base-N/` hold microservice apps (ServiceAccount, Role, RoleBinding, a static
ConfigMap, Deployment with init/app/sidecar containers, Service, Ingress, HPA, PDB,
NetworkPolicy and a `Widget` custom resource whose configMapRef follows renames through a
`configurations:` nameReference entry), a generated ConfigMap and Secret per app, and a
ClusterRole/ClusterRoleBinding pair. Each base is pulled by one or more branches of
overlays (`overlays/<branch>/level-K/`) that use namespace, namePrefix, labels and
commonLabels (selector-rewriting), commonAnnotations, images, replicas, configMapGenerator
(new and `behavior: merge`), secretGenerator (`behavior: merge`), strategic-merge,
JSON 6902 and label-selector-targeted patches. The root kustomization lists every branch,
the Widget CRD and a few platform ConfigMaps.

Resources built: 1 CRD + extras + per branch (Namespace + 2 cluster objects + 13 per app +
1 generated ConfigMap per overlay level). The presets build to exactly:
small 63, medium 1,021, wide 3,101 and large 10,051 resources.

  workload.py --preset medium OUTDIR
  workload.py --all-presets ROOTDIR      # ROOTDIR/<preset>/ for each preset
  workload.py --list
"""
import argparse
import json
import os
import re
import shutil

# bases, apps per base, overlay depth, branches per base, extra root ConfigMaps
PRESETS = {
    "small": dict(bases=2, apps=2, depth=1, branches=1, extras=2),
    "medium": dict(bases=12, apps=6, depth=3, branches=1, extras=12),
    "wide": dict(bases=1, apps=2, depth=1, branches=100, extras=100),
    "large": dict(bases=50, apps=15, depth=2, branches=1, extras=50),
}
OBJECTS_PER_APP = 13  # 11 manifests + generated ConfigMap + generated Secret
GROUP = "example.com"


def expected_resources(p):
    per_branch = 1 + 2 + OBJECTS_PER_APP * p["apps"] + p["depth"]
    return 1 + p["extras"] + p["bases"] * p["branches"] * per_branch


# --- a small YAML writer: block style, keys in insertion order --------------------------

PLAIN = re.compile(r"^[A-Za-z][A-Za-z0-9_./-]*$")
YAML11_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def scalar(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if PLAIN.match(value) and value.lower() not in YAML11_WORDS:
        return value
    return json.dumps(value)


def emit(value, indent=0):
    pad = " " * indent
    lines = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}{scalar(key)}:")
                lines.extend(emit(item, indent + 2 if isinstance(item, dict) else indent))
            else:
                empty = "{}" if isinstance(item, dict) else "[]" if isinstance(item, list) else None
                lines.append(f"{pad}{scalar(key)}: {empty or scalar(item)}")
    else:
        for item in value:
            if isinstance(item, (dict, list)) and item:
                nested = emit(item, indent + 2)
                lines.append(f"{pad}- {nested[0].lstrip()}")
                lines.extend(nested[1:])
            else:
                lines.append(f"{pad}- {scalar(item)}")
    return lines


def yaml_docs(*documents):
    return "---\n".join("\n".join(emit(d)) + "\n" for d in documents)


def write(root, relative, text):
    path = os.path.join(root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)


# --- the objects -------------------------------------------------------------------------

def meta(name, app=None):
    metadata = {"name": name}
    if app:
        metadata["labels"] = {"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "shop"}
    return metadata


def app_manifests(app, index):
    labels = {"app.kubernetes.io/name": app}
    container = lambda name, image, port=None: {  # noqa: E731
        "name": name,
        "image": image,
        **({"ports": [{"name": "http", "containerPort": port}]} if port else {}),
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
    }
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(app, app),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "serviceAccountName": app,
                    "initContainers": [container("migrate", f"registry.example.com/{app}-migrate:1.0.{index}")],
                    "containers": [
                        {**container("app", f"registry.example.com/{app}:1.0.{index}", 8080),
                         "envFrom": [{"configMapRef": {"name": f"{app}-env"}},
                                     {"secretRef": {"name": f"{app}-credentials"}}],
                         "env": [{"name": "APP_INDEX", "value": str(index)}],
                         "volumeMounts": [{"name": "static", "mountPath": "/etc/static"}]},
                        container("proxy", "registry.example.com/envoy:1.30.0", 9901),
                    ],
                    "volumes": [{"name": "static", "configMap": {"name": f"{app}-static"}}],
                },
            },
        },
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(app, app)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(app, app),
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(app, app),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": app},
         "subjects": [{"kind": "ServiceAccount", "name": app}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(f"{app}-static", app),
         "data": {"index.html": f"<h1>{app}</h1>\n", "robots.txt": "User-agent: *\n"}},
        deployment,
        {"apiVersion": "v1", "kind": "Service", "metadata": meta(app, app),
         "spec": {"selector": dict(labels), "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta(app, app),
         "spec": {"rules": [{"host": f"{app}.shop.example.com", "http": {"paths": [
             {"path": "/", "pathType": "Prefix",
              "backend": {"service": {"name": app, "port": {"number": 80}}}}]}}]}},
        {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta(app, app),
         "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": app},
                  "minReplicas": 1, "maxReplicas": 5,
                  "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                      "type": "Utilization", "averageUtilization": 75}}}]}},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta(app, app),
         "spec": {"maxUnavailable": 1, "selector": {"matchLabels": dict(labels)}}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta(app, app),
         "spec": {"podSelector": {"matchLabels": dict(labels)}, "policyTypes": ["Ingress"],
                  "ingress": [{"ports": [{"port": 8080}]}]}},
        {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": meta(app, app),
         "spec": {"size": index % 5 + 1, "configMapRef": {"name": f"{app}-env"}}},
    ]


def write_base(root, base, apps):
    directory = f"bases/{base}"
    resources = []
    config_maps, secrets = [], []
    for index in range(apps):
        app = f"{base}-app-{index}"
        write(root, f"{directory}/{app}.yaml", yaml_docs(*app_manifests(app, index)))
        write(root, f"{directory}/{app}.properties", f"log.level=info\nfeature.search={index % 2 == 0}\n")
        resources.append(f"{app}.yaml")
        config_maps.append({"name": f"{app}-env", "literals": [f"APP_NAME={app}", "LOG_FORMAT=json"],
                            "files": [f"settings.properties={app}.properties"]})
        secrets.append({"name": f"{app}-credentials", "literals": [f"token={app}-token-{index:04d}"]})
    write(root, f"{directory}/cluster.yaml", yaml_docs(
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(f"{base}-reader"),
         "rules": [{"apiGroups": [GROUP], "resources": ["widgets"], "verbs": ["get", "list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": meta(f"{base}-reader"),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"{base}-reader"},
         "subjects": [{"kind": "ServiceAccount", "name": f"{base}-app-0", "namespace": "default"}]},
    ))
    write(root, f"{directory}/widget-references.yaml", yaml_docs({"nameReference": [
        {"kind": "ConfigMap", "version": "v1",
         "fieldSpecs": [{"kind": "Widget", "group": GROUP, "path": "spec/configMapRef/name"}]}]}))
    write(root, f"{directory}/kustomization.yaml", yaml_docs({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": resources + ["cluster.yaml"],
        "configurations": ["widget-references.yaml"],
        "labels": [{"pairs": {"app.kubernetes.io/managed-by": "flux"}}],
        "configMapGenerator": config_maps,
        "secretGenerator": secrets,
    }))


def write_overlay(root, base, branch, level, depth, apps, tag=""):
    """One overlay level of a branch; level 1 pulls the base, each next level the previous."""
    directory = f"overlays/{branch}/level-{level}"
    below = f"../../../bases/{base}" if level == 1 else f"../level-{level - 1}"
    first_app = f"{base}-app-0"
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [below],
        # Branches of one base need their own prefix: the cluster-scoped objects meet at the root.
        "namePrefix": f"{tag}l{level}-",
        "commonAnnotations": {f"shop.example.com/level-{level}": branch},
        "configMapGenerator": [
            {"name": f"{branch}-level-{level}", "literals": [f"LEVEL={level}", f"BRANCH={branch}"]},
            {"name": f"{first_app}-env", "behavior": "merge", "literals": [f"OVERLAY_LEVEL={level}"]},
        ],
        "secretGenerator": [
            {"name": f"{first_app}-credentials", "behavior": "merge", "literals": [f"level={level}"]},
        ],
        "images": [{"name": f"registry.example.com/{first_app}", "newTag": f"2.{level}.0"}],
        "replicas": [{"name": first_app, "count": level + 1}],
        "patches": [
            {"target": {"kind": "Deployment", "labelSelector": "app.kubernetes.io/part-of=shop"},
             "patch": yaml_docs({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "any"},
                                 "spec": {"template": {"spec": {"containers": [
                                     {"name": "proxy", "env": [{"name": "LEVEL", "value": str(level)}]}]}}}})},
            {"target": {"kind": "Service", "name": f".*app-{(level - 1) % apps}"},
             "patch": yaml_docs([{"op": "replace", "path": "/spec/ports/0/port", "value": 8000 + level}])},
            {"target": {"group": "networking.k8s.io", "kind": "Ingress"},
             "patch": yaml_docs([{"op": "replace", "path": "/spec/rules/0/http/paths/0/pathType",
                                  "value": "ImplementationSpecific"}])},
        ],
    }
    if level == 1:
        kustomization["commonLabels"] = {"shop.example.com/branch": branch}
    else:
        kustomization["labels"] = [{"pairs": {f"shop.example.com/level-{level}": "true"},
                                    "includeSelectors": False}]
    if level == depth:
        namespace = f"shop-{branch}"
        kustomization["namespace"] = namespace
        kustomization["resources"].append("namespace.yaml")
        write(root, f"{directory}/namespace.yaml", yaml_docs(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}))
    write(root, f"{directory}/kustomization.yaml", yaml_docs(kustomization))


def widget_crd():
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


def write_tree(root, p):
    if os.path.exists(root):
        shutil.rmtree(root)
    leaves = []
    for b in range(p["bases"]):
        base = f"base-{b}"
        write_base(root, base, p["apps"])
        for n in range(p["branches"]):
            branch, tag = (f"{base}-{n}", f"b{n}") if p["branches"] > 1 else (base, "")
            for level in range(1, p["depth"] + 1):
                write_overlay(root, base, branch, level, p["depth"], p["apps"], tag)
            leaves.append(f"overlays/{branch}/level-{p['depth']}")
    extras = [{"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": f"platform-{i}"},
               "data": {"region": ["eu-west-1", "us-east-1", "ap-south-1"][i % 3], "shard": str(i)}}
              for i in range(p["extras"])]
    write(root, "platform/crds.yaml", yaml_docs(widget_crd()))
    write(root, "platform/settings.yaml", yaml_docs(*extras))
    write(root, "kustomization.yaml", yaml_docs({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": ["platform/crds.yaml", "platform/settings.yaml"] + leaves,
    }))
    files = sum(len(names) for _, _, names in os.walk(root))
    return files


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=list(PRESETS))
    parser.add_argument("--all-presets", action="store_true", help="write every preset into OUTDIR/<preset>/")
    parser.add_argument("--list", action="store_true", help="print the presets and their resource counts")
    parser.add_argument("outdir", nargs="?")
    args = parser.parse_args()
    if args.list:
        for name, p in PRESETS.items():
            print(f"{name}: {expected_resources(p)} resources {p}")
        return
    if not args.outdir or not (args.preset or args.all_presets):
        parser.error("give --preset NAME OUTDIR, --all-presets ROOTDIR or --list")
    presets = list(PRESETS) if args.all_presets else [args.preset]
    for name in presets:
        directory = os.path.join(args.outdir, name) if args.all_presets else args.outdir
        files = write_tree(directory, PRESETS[name])
        print(f"{name}: {expected_resources(PRESETS[name])} resources, {files} files -> {directory}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Cross-object checks of deploy/kubernetes that a schema cannot express: the Service selects
the Deployment's pods and targets its named port, the Ingress routes to that Service with
session affinity on X-Session-Id, the autoscaler scales the Deployment on CPU, both probes
ask GET /health on the serving port, and the limits fit a proxy in front: forwarded addresses are
trusted only from named proxies (TRUSTED_PROXIES set wherever TRUST_PROXY_HEADERS is on) and the
Ingress keeps a per-client connection share. Exits non-zero naming each broken link."""

import pathlib
import sys

import yaml


def load(folder):
    objs = {}
    for path in sorted(pathlib.Path(folder).glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                objs[doc["kind"]] = doc
    return objs


def main(folder):
    o = load(folder)
    errors = []

    def need(cond, msg):
        if not cond:
            errors.append(msg)

    for kind in ("Deployment", "Service", "Ingress", "HorizontalPodAutoscaler"):
        need(kind in o, f"no {kind}")
    if errors:
        print("\n".join(errors))
        return 1
    dep, svc, ing, hpa = (o[k] for k in ("Deployment", "Service", "Ingress", "HorizontalPodAutoscaler"))
    pod = dep["spec"]["template"]
    labels = pod["metadata"]["labels"]
    need(dep["spec"]["selector"]["matchLabels"].items() <= labels.items(),
         "Deployment selector does not match its pod labels")
    need(svc["spec"]["selector"].items() <= labels.items(), "Service does not select the pods")
    c = pod["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    target = svc["spec"]["ports"][0]["targetPort"]
    need(target in ports, f"Service targetPort {target!r} is not a container port")
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    need(str(ports.get("http")) == env.get("PORT"), "container port and PORT differ")
    for probe in ("readinessProbe", "livenessProbe"):
        p = c.get(probe, {}).get("httpGet", {})
        need(p.get("path") == "/health" and p.get("port") in ("http", ports.get("http")),
             f"{probe} is not GET /health on the serving port")
    need(pod["spec"].get("securityContext", {}).get("runAsNonRoot") is True, "pods may run as root")
    trust = str(env.get("TRUST_PROXY_HEADERS", "")).lower() in ("1", "true", "yes", "on")
    need(not trust or bool(env.get("TRUSTED_PROXIES")),
         "TRUST_PROXY_HEADERS without TRUSTED_PROXIES: every user would share the ingress's identity")
    need(not trust or "nginx.ingress.kubernetes.io/limit-connections" in ing["metadata"].get("annotations", {}),
         "the pods trust the ingress as a proxy but the Ingress keeps no per-client connection share")
    ann = ing["metadata"].get("annotations", {})
    need("x_session_id" in ann.get("nginx.ingress.kubernetes.io/upstream-hash-by", ""),
         "Ingress has no affinity on X-Session-Id")
    backends = [p["backend"]["service"] for r in ing["spec"]["rules"] for p in r["http"]["paths"]]
    need(all(b["name"] == svc["metadata"]["name"] for b in backends), "Ingress routes elsewhere")
    svc_ports = {p["name"] for p in svc["spec"]["ports"]}
    need(all(b["port"].get("name") in svc_ports for b in backends), "Ingress names no Service port")
    ref = hpa["spec"]["scaleTargetRef"]
    need(ref["kind"] == "Deployment" and ref["name"] == dep["metadata"]["name"],
         "the autoscaler scales something else")
    need(any(m.get("resource", {}).get("name") == "cpu" for m in hpa["spec"]["metrics"]),
         "the autoscaler does not scale on CPU")
    need(hpa["spec"]["minReplicas"] <= dep["spec"]["replicas"] <= hpa["spec"]["maxReplicas"],
         "Deployment replicas outside the autoscaler's range")
    for e in errors:
        print("FAIL:", e)
    if not errors:
        print(f"k8s manifests: {len(o)} objects consistent")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "deploy/kubernetes"))

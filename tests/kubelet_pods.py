"""Turns rendered Kubernetes manifests into the plain Pods a kubelet would run, for a smoke test
under `podman kube play` (which runs Pods, not Deployments, StatefulSets or Indexed Jobs):

- a Deployment gives one Pod, a StatefulSet one per replica (NAME-i, label
  apps.kubernetes.io/pod-index=i), an Indexed Job one per completion (annotation
  batch.kubernetes.io/job-completion-index=i), a JobSet one per completion of each Job of each
  replicated job, as its controller names them (JOBSET-RJOB-j-i, label
  jobset.sigs.k8s.io/jobset-name, the same index annotation) and reaches them (the host name
  JOBSET-RJOB-j-i.SUBDOMAIN, the subdomain being the JobSet's name by default);
- env from ConfigMaps (envFrom, configMapKeyRef) and downward-API fields are set to their values,
  and $(VAR) in args and in env values (of the variables before) is expanded, as the kubelet
  does;
- Services become host aliases: each pod gets a fixed address on the test's network, and every
  pod resolves the Services' names (and a StatefulSet's pod names under its Service) to them;
- volumes of kinds podman does not mount the same way become host folders the caller gives
  (`host_paths`: claim or secret name -> folder); probes, container ports and GPU limits are
  dropped (podman runs a probe through a shell the images do not have, and publishes a
  container port on the host).

    pods, addresses = kubelet_pods(objects, subnet="10.89.77", host_paths={...})
"""

import copy
import re

def _field(pod, path):
    if path == "metadata.name":
        return pod["metadata"]["name"]
    m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if not m:
        raise ValueError(f"fieldRef {path} is not emulated")
    return pod["metadata"].get(m.group(1), {})[m.group(2)]


def _env(container, pod, config_maps):
    values = {}
    for source in container.get("envFrom", []):
        values.update(config_maps[source["configMapRef"]["name"]])
    for e in container.get("env", []):
        if "value" in e:
            # $(VAR) names a variable defined before it, as the kubelet expands it.
            value = re.sub(r"\$\((\w+)\)", lambda m: values.get(m.group(1), m.group(0)),
                           e["value"])
        elif "fieldRef" in e.get("valueFrom", {}):
            value = _field(pod, e["valueFrom"]["fieldRef"]["fieldPath"])
        else:
            ref = e["valueFrom"]["configMapKeyRef"]
            value = config_maps[ref["name"]][ref["key"]]
        values[e["name"]] = str(value)
    return values


def _pod(name, template, labels=None, annotations=None):
    spec = copy.deepcopy(template["spec"])
    metadata = copy.deepcopy(template.get("metadata", {}))
    metadata["name"] = name
    metadata.setdefault("labels", {}).update(labels or {})
    metadata.setdefault("annotations", {}).update(annotations or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def kubelet_pods(objects, subnet, host_paths):
    """Returns (the Pods and ConfigMaps to play, {pod name: address})."""
    config_maps = {o["metadata"]["name"]: o.get("data", {}) for o in objects
                   if o["kind"] == "ConfigMap"}
    pods, aliases, jobset_hosts = [], {}, {}
    for o in objects:
        name, spec = o["metadata"]["name"], o.get("spec", {})
        if o["kind"] == "Deployment":
            pods.append(_pod(name, spec["template"]))
        elif o["kind"] == "StatefulSet":
            for i in range(spec.get("replicas", 1)):
                pods.append(_pod(f"{name}-{i}", spec["template"],
                                 labels={"apps.kubernetes.io/pod-index": str(i)}))
                aliases[f"{name}-{i}"] = f"{name}-{i}.{spec['serviceName']}"
        elif o["kind"] == "Job":
            assert spec.get("completionMode") == "Indexed", f"Job {name} is not Indexed"
            for i in range(spec["completions"]):
                pods.append(_pod(f"{name}-{i}", spec["template"],
                                 annotations={"batch.kubernetes.io/job-completion-index": str(i)}))
        elif o["kind"] == "JobSet":
            subdomain = spec.get("network", {}).get("subdomain", name)
            for replicated in spec["replicatedJobs"]:
                job = replicated["template"]["spec"]
                for j in range(replicated.get("replicas", 1)):
                    for i in range(job.get("completions", 1)):
                        pod = f"{name}-{replicated['name']}-{j}-{i}"
                        pods.append(_pod(pod, job["template"], labels={
                            "jobset.sigs.k8s.io/jobset-name": name,
                            "jobset.sigs.k8s.io/replicatedjob-name": replicated["name"]},
                            annotations={"batch.kubernetes.io/job-completion-index": str(i)}))
                        jobset_hosts[pod] = f"{pod}.{subdomain}"
    addresses = {p["metadata"]["name"]: f"{subnet}.{10 + i}" for i, p in enumerate(pods)}
    # A Service's name resolves to the address of the pod it selects (one pod each here).
    hosts = {}
    for o in objects:
        if o["kind"] != "Service":
            continue
        selector = o["spec"].get("selector", {})
        for p in pods:
            if all(p["metadata"]["labels"].get(k) == v for k, v in selector.items()):
                if o["spec"].get("clusterIP") == "None":
                    hosts[aliases[p["metadata"]["name"]]] = addresses[p["metadata"]["name"]]
                else:
                    hosts[o["metadata"]["name"]] = addresses[p["metadata"]["name"]]
    for pod, host in jobset_hosts.items():
        hosts[host] = addresses[pod]
    for p in pods:
        spec = p["spec"]
        spec["hostAliases"] = [{"ip": ip, "hostnames": [h]} for h, ip in sorted(hosts.items())]
        for c in spec["containers"]:
            env = _env(c, p, config_maps)
            c.pop("envFrom", None)
            c["env"] = [{"name": k, "value": v} for k, v in env.items()]
            c["args"] = [re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), a)
                         for a in c.get("args", [])]
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                c.pop(probe, None)
            c.pop("ports", None)  # podman would publish each on the host
            limits = c.get("resources", {}).get("limits", {})
            limits.pop("nvidia.com/gpu", None)
        for v in spec.get("volumes", []):
            source = v.get("persistentVolumeClaim", {}).get("claimName") or \
                v.get("secret", {}).get("secretName")
            if source in host_paths:
                for kind in ("persistentVolumeClaim", "secret"):
                    v.pop(kind, None)
                v["hostPath"] = {"path": host_paths[source], "type": "Directory"}
    configs = [o for o in objects if o["kind"] == "ConfigMap"]
    return configs + pods, addresses

"""The deployment files in cluster/ validate offline, and agree with the settings, the image and the jobs.

Core Kubernetes kinds are validated against the Kubernetes OpenAPI schemas that the kubernetes-validate
package ships (strict: unknown fields fail). Its wheel holds the schemas of every Kubernetes minor
version it supports, so nothing is fetched. Custom resources (KubeRay's RayCluster and RayJob, the Spark
operator's SparkApplication) are checked against the small schemas below, written from the operators'
API documentation, with their pod templates and environment lists validated by the core schemas. As those
schemas were written beside the manifests, two checks do not rely on them alone: every field a custom
resource uses, misspelt in turn, must be refused; and the SparkApplication, with the schema written for
it, is checked against the Spark operator's own API models (kubeflow-spark-api, generated from its CRD).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import tomllib
import types
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, Union, get_args, get_origin

import jsonschema
import kubernetes_validate
import pytest
import yaml
from pydantic import BaseModel

from lazygraph.runtime import storage
from lazygraph.settings import Settings, load_settings

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "cluster" / "k8s"
DOCKERFILE = REPO / "cluster" / "Dockerfile"
# The oldest Kubernetes still in common support; the manifests use nothing newer.
KUBERNETES_VERSION = "1.30"
IMAGE_REPOSITORY = "registry.example.com/lazygraph/lazygraph"

# ---- schemas of the custom resources ------------------------------------------------------------------
# KubeRay ray.io/v1, from its API reference and the Go types it is generated from:
#   https://ray-project.github.io/kuberay/reference/api/
#   https://docs.ray.io/en/latest/cluster/kubernetes/getting-started/rayjob-quick-start.html
#   https://github.com/ray-project/kuberay/blob/master/ray-operator/apis/ray/v1/raycluster_types.go
#   https://github.com/ray-project/kuberay/blob/master/ray-operator/apis/ray/v1/rayjob_types.go
# Spark operator sparkoperator.k8s.io/v1beta2, from its user guide and Go types:
#   https://www.kubeflow.org/docs/components/spark-operator/user-guide/using-sparkapplication/
#   https://github.com/kubeflow/spark-operator/blob/master/api/v1beta2/sparkapplication_types.go
# Only the fields those pages document are allowed (additionalProperties: false), so a misspelt field,
# which the operators would silently drop, fails here.
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
COUNT = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
BOOL = {"type": "boolean"}
TEXT = {"type": "string", "minLength": 1}
OBJECT = {"type": "object"}  # pod templates, env and volumes: checked by the core schemas (below)
LIST = {"type": "array"}
DNS_LABEL = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}

RAY_HEAD_GROUP = {
    "type": "object",
    "required": ["rayStartParams", "template"],
    "additionalProperties": False,
    "properties": {
        "serviceType": {"enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
        "headService": OBJECT,
        "enableIngress": BOOL,
        "rayStartParams": STRING_MAP,
        "template": OBJECT,
    },
}
RAY_WORKER_GROUP = {
    "type": "object",
    "required": ["groupName", "rayStartParams", "template"],
    "additionalProperties": False,
    "properties": {
        "groupName": DNS_LABEL,
        "replicas": COUNT,
        "minReplicas": COUNT,
        "maxReplicas": COUNT,
        "numOfHosts": {"type": "integer", "minimum": 1},
        "idleTimeoutSeconds": COUNT,
        "suspend": BOOL,
        "rayStartParams": STRING_MAP,
        "template": OBJECT,
        "scaleStrategy": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"workersToDelete": LIST, "multihostReplicasToDelete": LIST},
        },
    },
}
RAY_CLUSTER_SPEC = {
    "type": "object",
    "required": ["headGroupSpec"],
    "additionalProperties": False,
    "properties": {
        "rayVersion": {"type": "string", "pattern": r"^\d+\.\d+\.\d+$"},
        "enableInTreeAutoscaling": BOOL,
        "autoscalerOptions": OBJECT,
        "headServiceAnnotations": STRING_MAP,
        "suspend": BOOL,
        "managedBy": TEXT,
        "gcsFaultToleranceOptions": OBJECT,
        "headGroupSpec": RAY_HEAD_GROUP,
        "workerGroupSpecs": {"type": "array", "items": RAY_WORKER_GROUP},
    },
}
RAY_JOB_SPEC = {
    "type": "object",
    "required": ["entrypoint"],
    "anyOf": [{"required": ["rayClusterSpec"]}, {"required": ["clusterSelector"]}],
    "additionalProperties": False,
    "properties": {
        "entrypoint": TEXT,
        "runtimeEnvYAML": {"type": "string"},
        "jobId": TEXT,
        "submissionMode": {"enum": ["K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"]},
        "shutdownAfterJobFinishes": BOOL,
        "ttlSecondsAfterFinished": COUNT,
        "activeDeadlineSeconds": {"type": "integer", "minimum": 1},
        "backoffLimit": COUNT,
        "rayClusterSpec": RAY_CLUSTER_SPEC,
        "clusterSelector": STRING_MAP,
        "submitterPodTemplate": OBJECT,
        "submitterConfig": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"backoffLimit": COUNT},
        },
        "suspend": BOOL,
        "entrypointNumCpus": {"type": "number", "minimum": 0},
        "entrypointNumGpus": {"type": "number", "minimum": 0},
        "entrypointResources": {"type": "string"},
        "metadata": STRING_MAP,
        "managedBy": TEXT,
        "deletionStrategy": OBJECT,
    },
}
SPARK_POD = {  # SparkPodSpec: the fields DriverSpec and ExecutorSpec share
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "template": OBJECT,
        "cores": {"type": "integer", "minimum": 1},
        "coreLimit": TEXT,
        "coreRequest": TEXT,
        "memory": {"type": "string", "pattern": r"^\d+[kmgt]?$"},
        "memoryOverhead": TEXT,
        "gpu": OBJECT,
        "image": TEXT,
        "configMaps": LIST,
        "secrets": LIST,
        "env": LIST,
        "envFrom": LIST,
        "labels": STRING_MAP,
        "annotations": STRING_MAP,
        "volumeMounts": LIST,
        "affinity": OBJECT,
        "tolerations": LIST,
        "podSecurityContext": OBJECT,
        "securityContext": OBJECT,
        "schedulerName": TEXT,
        "sidecars": LIST,
        "initContainers": LIST,
        "hostNetwork": BOOL,
        "nodeSelector": STRING_MAP,
        "dnsConfig": OBJECT,
        "terminationGracePeriodSeconds": COUNT,
        "serviceAccount": TEXT,
        "hostAliases": LIST,
        "shareProcessNamespace": BOOL,
        "javaOptions": TEXT,
        "lifecycle": OBJECT,
        "ports": LIST,
        "priorityClassName": TEXT,
    },
}
SPARK_DRIVER = {  # DriverSpec
    **SPARK_POD,
    "properties": {
        **SPARK_POD["properties"],
        "podName": TEXT,
        "kubernetesMaster": TEXT,
        "serviceAnnotations": STRING_MAP,
        "serviceLabels": STRING_MAP,
    },
}
SPARK_EXECUTOR = {  # ExecutorSpec
    **SPARK_POD,
    "properties": {
        **SPARK_POD["properties"],
        "instances": {"type": "integer", "minimum": 1},
        "deleteOnTermination": BOOL,
    },
}
SPARK_APPLICATION_SPEC = {
    "type": "object",
    "required": ["type", "sparkVersion", "mainApplicationFile", "driver", "executor"],
    "additionalProperties": False,
    "properties": {
        "type": {"enum": ["Java", "Python", "Scala", "R"]},
        "sparkVersion": {"type": "string", "pattern": r"^\d+\.\d+\.\d+$"},
        "mode": {"enum": ["cluster", "client", "in-cluster-client"]},
        "proxyUser": TEXT,
        "image": TEXT,
        "imagePullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
        "imagePullSecrets": LIST,
        "mainClass": TEXT,
        "mainApplicationFile": TEXT,
        "arguments": {"type": "array", "items": {"type": "string"}},
        "sparkConf": STRING_MAP,
        "hadoopConf": STRING_MAP,
        "sparkConfigMap": TEXT,
        "hadoopConfigMap": TEXT,
        "volumes": LIST,
        "driver": SPARK_DRIVER,
        "executor": SPARK_EXECUTOR,
        "deps": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                name: {"type": "array", "items": {"type": "string"}}
                for name in (
                    "jars",
                    "files",
                    "pyFiles",
                    "packages",
                    "excludePackages",
                    "repositories",
                    "archives",
                )
            },
        },
        "restartPolicy": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "type": {"enum": ["Never", "Always", "OnFailure"]},
                "onSubmissionFailureRetries": COUNT,
                "onFailureRetries": COUNT,
                "onSubmissionFailureRetryInterval": {"type": "integer", "minimum": 1},
                "onFailureRetryInterval": {"type": "integer", "minimum": 1},
            },
        },
        "nodeSelector": STRING_MAP,
        "failureRetries": COUNT,
        "retryInterval": COUNT,
        "pythonVersion": {"enum": ["2", "3"]},
        "memoryOverheadFactor": TEXT,
        "monitoring": OBJECT,
        "batchScheduler": TEXT,
        "timeToLiveSeconds": COUNT,
        "batchSchedulerOptions": OBJECT,
        "sparkUIOptions": OBJECT,
        "driverIngressOptions": LIST,
        "dynamicAllocation": OBJECT,
    },
}


def _resource(api_version: str, kind: str, spec: dict) -> dict:
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": api_version},
            "kind": {"const": kind},
            "metadata": {
                "type": "object",
                "anyOf": [{"required": ["name"]}, {"required": ["generateName"]}],
                "properties": {
                    "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
                    "generateName": {"type": "string", "pattern": r"^[a-z0-9][-a-z0-9]*-$"},
                    "namespace": DNS_LABEL,
                    "labels": STRING_MAP,
                    "annotations": STRING_MAP,
                },
            },
            "spec": spec,
        },
    }


CUSTOM_RESOURCES = {
    ("ray.io/v1", "RayCluster"): _resource("ray.io/v1", "RayCluster", RAY_CLUSTER_SPEC),
    ("ray.io/v1", "RayJob"): _resource("ray.io/v1", "RayJob", RAY_JOB_SPEC),
    ("sparkoperator.k8s.io/v1beta2", "SparkApplication"): _resource(
        "sparkoperator.k8s.io/v1beta2", "SparkApplication", SPARK_APPLICATION_SPEC
    ),
}


# ---- reading the files --------------------------------------------------------------------------------
def _documents() -> list[tuple[str, dict]]:
    found = []
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                found.append((path.name, doc))
    return found


DOCUMENTS = _documents()


def _of_kind(kind: str) -> list[dict]:
    return [doc for _, doc in DOCUMENTS if doc["kind"] == kind]


def _one(kind: str) -> dict:
    (doc,) = _of_kind(kind)
    return doc


def _core_validate(doc: dict) -> None:
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def _validate_custom(doc: dict) -> None:
    schema = CUSTOM_RESOURCES.get((doc["apiVersion"], doc["kind"]))
    assert schema is not None, f"no schema for {doc['apiVersion']} {doc['kind']}: add one from its docs"
    jsonschema.Draft202012Validator(schema).validate(doc)
    for where, template in _pod_templates(doc):
        wrapped = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": template}
        try:
            _core_validate(wrapped)
        except kubernetes_validate.ValidationError as exc:
            raise AssertionError(f"{doc['kind']} {where}: {exc.message}") from exc


def _ray_cluster_specs(doc: dict) -> list[dict]:
    if doc["kind"] == "RayCluster":
        return [doc["spec"]]
    if doc["kind"] == "RayJob" and "rayClusterSpec" in doc["spec"]:
        return [doc["spec"]["rayClusterSpec"]]
    return []


def _pod_templates(doc: dict) -> Iterator[tuple[str, dict]]:
    """Every pod template of a custom resource, as a core PodTemplateSpec (Spark pods as one container)."""
    for spec in _ray_cluster_specs(doc):
        yield "head", spec["headGroupSpec"]["template"]
        for group in spec.get("workerGroupSpecs", []):
            yield group["groupName"], group["template"]
    if doc["kind"] == "SparkApplication":
        for role in ("driver", "executor"):
            pod = doc["spec"][role]
            container = {key: pod[key] for key in ("env", "envFrom", "volumeMounts") if key in pod}
            spec = {"containers": [{"name": role, "image": doc["spec"]["image"], **container}]}
            if "volumes" in doc["spec"]:
                spec["volumes"] = doc["spec"]["volumes"]
            yield role, {"spec": spec}


def _containers(doc: dict) -> Iterator[tuple[str, dict, dict]]:
    """(where, container, pod spec) of every container the resource starts that runs lazygraph or vLLM."""
    for where, template in _pod_templates(doc):
        for container in template["spec"]["containers"]:
            yield where, container, template["spec"]
    if doc["kind"] == "Deployment":
        for container in doc["spec"]["template"]["spec"]["containers"]:
            yield "pod", container, doc["spec"]["template"]["spec"]


def _config_data(kind: str, name: str) -> dict[str, str]:
    for doc in _of_kind(kind):
        if doc["metadata"]["name"] == name:
            return dict(doc.get("data") or {}) | dict(doc.get("stringData") or {})
    raise AssertionError(f"the manifests refer to the {kind} {name}, which none of them defines")


def _environment(container: dict) -> dict[str, str]:
    """The variables a container starts with: its envFrom sources (as defined here), then its env."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env |= _config_data("ConfigMap", source["configMapRef"]["name"])
        if "secretRef" in source:
            env |= _config_data("Secret", source["secretRef"]["name"])
    for item in container.get("env", []):
        env[item["name"]] = str(item.get("value", ""))
    return env


def _settings_under(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name in [n for n in os.environ if n.startswith("LAZYGRAPH_") and n != "LAZYGRAPH_HOME"]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return load_settings()


def _sub_model(annotation: Any) -> type[BaseModel] | None:
    candidates = [annotation, *get_args(annotation)]
    return next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)


def settings_field(name: str) -> str:
    """The dotted setting a LAZYGRAPH_ variable sets; AssertionError when it names none."""
    parts = name.removeprefix("LAZYGRAPH_").lower().split("__")
    model: type[BaseModel] = Settings
    for depth, part in enumerate(parts):
        field = model.model_fields.get(part)
        dotted = ".".join(parts[: depth + 1])
        assert field is not None, f"{name} names no setting: {dotted} does not exist"
        inner = _sub_model(field.annotation)
        if inner is None:
            assert depth == len(parts) - 1, f"{name}: {dotted} is a value, it has no {parts[depth + 1]}"
            return dotted
        model = inner
    raise AssertionError(f"{name} names the section {'.'.join(parts)}, not one setting")


def _load_job(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"job_{name}", REPO / "jobs" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pin(requirement: str) -> str:
    for line in (REPO / "requirements.txt").read_text().splitlines():
        if line.startswith(f"{requirement}=="):
            return line.split("==", 1)[1]
    raise AssertionError(f"{requirement} is not pinned in requirements.txt")


def _dockerfile_arg(name: str) -> str:
    match = re.search(rf"^ARG {name}=(\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert match, f"cluster/Dockerfile has no ARG {name}"
    return match.group(1)


def _app_dir() -> str:
    match = re.search(r"^WORKDIR (\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert match, "cluster/Dockerfile sets no WORKDIR for the checkout"
    return match.group(1)


def _repo_file(path_in_image: str) -> Path:
    """The file of this checkout that the image holds at ``path_in_image``."""
    app = _app_dir()
    assert path_in_image.startswith(app + "/"), f"{path_in_image} is not inside the image's checkout {app}"
    local = REPO / path_in_image[len(app) + 1 :]
    assert local.is_file(), f"{path_in_image} runs {local.relative_to(REPO)}, which does not exist"
    return local


# ---- validation --------------------------------------------------------------------------------------
def test_there_are_manifests_for_every_part_of_the_deployment() -> None:
    kinds = {doc["kind"] for _, doc in DOCUMENTS}
    assert {
        "SparkApplication",
        "RayCluster",
        "RayJob",
        "Deployment",
        "Service",
        "ConfigMap",
        "Secret",
    } <= kinds


@pytest.mark.parametrize(
    ("file", "doc"),
    [(f, d) for f, d in DOCUMENTS if (d["apiVersion"], d["kind"]) not in CUSTOM_RESOURCES],
    ids=lambda value: value if isinstance(value, str) else value["kind"],
)
def test_core_manifests_validate_against_the_kubernetes_schemas(file: str, doc: dict) -> None:
    _core_validate(doc)


@pytest.mark.parametrize(
    ("file", "doc"),
    [(f, d) for f, d in DOCUMENTS if (d["apiVersion"], d["kind"]) in CUSTOM_RESOURCES],
    ids=lambda value: value if isinstance(value, str) else value["kind"],
)
def test_custom_resources_use_only_their_operators_fields(file: str, doc: dict) -> None:
    _validate_custom(doc)


def test_the_validators_catch_mistakes() -> None:
    """The checks above fail on what the operators or the API server would refuse or drop."""
    job = _one("RayJob")
    misspelt = {**job, "spec": {**job["spec"], "shutdownAfterJobFinish": True}}
    with pytest.raises(jsonschema.ValidationError, match="shutdownAfterJobFinish"):
        _validate_custom(misspelt)
    group = {**job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0], "replicas": "2"}
    spec = {**job["spec"]["rayClusterSpec"], "workerGroupSpecs": [group]}
    with pytest.raises(jsonschema.ValidationError):
        _validate_custom({**job, "spec": {**job["spec"], "rayClusterSpec": spec}})
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]
    bad_env = [{"name": "X", "valueFromm": {}}]
    container = {**head["template"]["spec"]["containers"][0], "env": bad_env}
    template = {"spec": {**head["template"]["spec"], "containers": [container]}}
    spec = {**job["spec"]["rayClusterSpec"], "headGroupSpec": {**head, "template": template}}
    with pytest.raises(AssertionError, match="valueFromm"):
        _validate_custom({**job, "spec": {**job["spec"], "rayClusterSpec": spec}})
    service = _one("Service")
    with pytest.raises(kubernetes_validate.ValidationError):
        _core_validate({**service, "spec": {**service["spec"], "ports": [{"port": "http"}]}})
    with pytest.raises(AssertionError, match="names no setting"):
        settings_field("LAZYGRAPH_STORAGE__S3_ENDPONT")
    with pytest.raises(AssertionError, match="is a value"):
        settings_field("LAZYGRAPH_RAY__QUERY_ACTORS__MAX")


# Maps whose keys are the user's own (labels, Spark and Hadoop properties, `ray start` flags, quantities):
# a renamed key there is another valid entry, not a misspelt field.
FREE_FORM_MAPS = {
    "labels", "annotations", "rayStartParams", "sparkConf", "hadoopConf", "nodeSelector", "limits",
    "requests", "data", "stringData", "metadata",
}  # fmt: skip


def _key_paths(node: Any, path: tuple = ()) -> Iterator[tuple]:
    """The path of every mapping key in a document (list items by index)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*path, key)
            yield from _key_paths(value, (*path, key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _key_paths(item, (*path, index))


def _template_refused(original: dict, mutated: dict) -> bool:
    """Whether the core schemas refuse a pod template that the mutation changed (only those are checked)."""
    before = dict(_pod_templates(original))
    for where, template in _pod_templates(mutated):
        if before.get(where) != template:
            wrapped = {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {"name": "t"},
                "template": template,
            }
            try:
                _core_validate(wrapped)
            except kubernetes_validate.ValidationError:
                return True
    return False


def _with_key_renamed(doc: Any, path: tuple) -> Any:
    """A copy of ``doc`` whose key at ``path`` is misspelt (an "x" appended), the rest unchanged."""
    if len(path) == 1:
        return {(f"{k}x" if k == path[0] else k): v for k, v in doc.items()}
    head, rest = path[0], path[1:]
    if isinstance(doc, list):
        return [_with_key_renamed(item, rest) if i == head else item for i, item in enumerate(doc)]
    return {k: (_with_key_renamed(v, rest) if k == head else v) for k, v in doc.items()}


@pytest.mark.parametrize(
    ("file", "doc"),
    [(f, d) for f, d in DOCUMENTS if (d["apiVersion"], d["kind"]) in CUSTOM_RESOURCES],
    ids=lambda value: value if isinstance(value, str) else value["kind"],
)
def test_a_misspelling_of_any_field_a_custom_resource_uses_is_caught(file: str, doc: dict) -> None:
    """The custom-resource schemas were written beside the manifests, so the manifests passing them proves
    little on its own: here every field the manifest uses, at every depth, is misspelt in turn, and the
    check must refuse each (outside the maps whose keys are free), as the operator would drop it."""
    validator = jsonschema.Draft202012Validator(CUSTOM_RESOURCES[(doc["apiVersion"], doc["kind"])])
    missed = []
    checked = 0
    for path in _key_paths(doc):
        if path in (("apiVersion",), ("kind",)) or any(
            part in FREE_FORM_MAPS for part in path[:-1] if isinstance(part, str)
        ):
            continue  # the resource's type, which picks its schema; keys of free maps
        checked += 1
        mutated = _with_key_renamed(doc, path)
        if not validator.is_valid(mutated) or _template_refused(doc, mutated):
            continue
        missed.append(".".join(map(str, path)))
    assert checked > 20, "the manifest was walked"
    assert not missed, f"misspelt fields the check accepts in {file}: {missed}"


# ---- the Spark operator's own API models -----------------------------------------------------------------
# kubeflow-spark-api is generated by the Spark operator's project from the CRD the operator installs: a
# description of SparkApplication that was not written beside these manifests.
def _model_kind(annotation: Any) -> Any:
    """What a model field holds: a model class, ("list", kind), ("map", kind), or None for a scalar."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        kinds = [_model_kind(arg) for arg in args if arg is not type(None)]
        return kinds[0] if len(kinds) == 1 else None
    if origin is list:
        return ("list", _model_kind(args[0]))
    if origin is dict:
        return ("map", _model_kind(args[1]))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _fields_unknown_to(node: Any, kind: Any, path: tuple = ()) -> Iterator[str]:
    """The paths of the keys in ``node`` that the model ``kind`` does not have, at every depth."""
    if isinstance(kind, tuple):
        items = enumerate(node) if kind[0] == "list" else node.items()
        for key, item in items:
            yield from _fields_unknown_to(item, kind[1], (*path, key))
    elif isinstance(kind, type) and isinstance(node, dict):
        by_key = {info.alias or name: info for name, info in kind.model_fields.items()}
        for key, value in node.items():
            if key not in by_key:
                yield ".".join(map(str, (*path, key)))
            else:
                yield from _fields_unknown_to(value, _model_kind(by_key[key].annotation), (*path, key))


def _schema_fields_unknown_to(schema: dict, kind: Any, path: tuple = ()) -> Iterator[str]:
    """The properties the hand-written schema allows that the model ``kind`` does not have."""
    if isinstance(kind, tuple):
        inner = schema.get("items") if kind[0] == "list" else schema.get("additionalProperties")
        if isinstance(inner, dict):
            yield from _schema_fields_unknown_to(inner, kind[1], path)
    elif isinstance(kind, type):
        by_key = {info.alias or name: info for name, info in kind.model_fields.items()}
        for key, sub in schema.get("properties", {}).items():
            if key not in by_key:
                yield ".".join((*path, key))
            else:
                yield from _schema_fields_unknown_to(sub, _model_kind(by_key[key].annotation), (*path, key))


def _spark_application_model() -> type[BaseModel]:
    try:
        from kubeflow_spark_api.models import SparkV1beta2SparkApplication
    except ImportError as exc:  # an environment set up before the package was required
        raise AssertionError(
            "kubeflow-spark-api is not installed: pip install -r requirements.txt (it holds the Spark "
            "operator's SparkApplication API models)"
        ) from exc
    return SparkV1beta2SparkApplication


def test_the_spark_application_uses_only_fields_of_the_operators_own_api_models() -> None:
    """Every key of the SparkApplication, at every depth (pod fields, env and volumes included), is a field
    of the operator's generated models, with the type they declare (strict: "1" is not a core count)."""
    model = _spark_application_model()
    doc = _one("SparkApplication")
    model.from_dict(doc)  # required fields and types
    unknown = list(_fields_unknown_to(doc, model))
    assert not unknown, f"fields the Spark operator does not have (it would drop them): {unknown}"
    misspelt = {**doc, "spec": {**doc["spec"], "driver": {**doc["spec"]["driver"], "coreLimt": "1"}}}
    assert list(_fields_unknown_to(misspelt, model)) == ["spec.driver.coreLimt"], "the walk checks depth"
    wrong_type = {**doc, "spec": {**doc["spec"], "executor": {**doc["spec"]["executor"], "cores": "4"}}}
    with pytest.raises(ValueError, match="cores"):
        model.from_dict(wrong_type)


def test_the_hand_written_spark_application_schema_allows_only_real_fields() -> None:
    """The schema above was written from the operator's documentation; each property it allows must be a
    field of the operator's generated models, or a manifest could pass it with a field the operator drops."""
    model = _spark_application_model()
    schema = CUSTOM_RESOURCES[("sparkoperator.k8s.io/v1beta2", "SparkApplication")]
    invented = list(_schema_fields_unknown_to(schema, model))
    assert not invented, f"the schema allows fields SparkApplication does not have: {invented}"


# ---- agreement with the settings, the image and the entry points -------------------------------------------
def test_environment_variables_are_real_settings_with_valid_values(monkeypatch: pytest.MonkeyPatch) -> None:
    checked = 0
    for doc in [d for _, d in DOCUMENTS]:
        for where, container, _ in _containers(doc):
            env = _environment(container)
            for name in env:
                if name.startswith("LAZYGRAPH_"):
                    settings_field(name)
                    checked += 1
            try:
                _settings_under(env, monkeypatch)
            except Exception as exc:
                raise AssertionError(f"{doc['kind']} {where}: {exc}") from exc
    for name in _config_data("ConfigMap", "lazygraph-storage") | _config_data(
        "Secret", "lazygraph-storage-credentials"
    ):
        assert settings_field(name).startswith("storage."), f"{name} belongs in another ConfigMap"
    assert checked > 20


def test_the_storage_config_feeds_spark_and_deltalake_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    spark_app = _one("SparkApplication")
    env = _environment({"envFrom": spark_app["spec"]["driver"]["envFrom"]})
    settings = _settings_under(env, monkeypatch)
    endpoint = env["LAZYGRAPH_STORAGE__S3_ENDPOINT"]
    hadoop = storage.hadoop_conf(settings.storage)
    delta = settings.storage.delta_options("s3a://lazygraph/indexes/x")
    assert hadoop["fs.s3a.endpoint"] == delta["AWS_ENDPOINT_URL"] == endpoint
    secret = env["LAZYGRAPH_STORAGE__S3_SECRET_ACCESS_KEY"]
    assert hadoop["fs.s3a.secret.key"] == delta["AWS_SECRET_ACCESS_KEY"] == secret
    assert (
        hadoop["fs.s3a.path.style.access"] == "true" and delta["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] == "false"
    )
    # Every pod that touches the index reads the same storage settings.
    for doc in [d for _, d in DOCUMENTS if d["kind"] in ("RayCluster", "RayJob", "SparkApplication")]:
        for where, container, _ in _containers(doc):
            names = [s.get("configMapRef", s.get("secretRef", {})).get("name") for s in container["envFrom"]]
            assert names == ["lazygraph-storage", "lazygraph-storage-credentials"], f"{doc['kind']} {where}"


def test_images_are_the_ones_cluster_dockerfile_builds() -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    dockerfile = DOCKERFILE.read_text()
    stages = re.findall(r"^FROM (\S+)(?: AS (\S+))?$", dockerfile, re.MULTILINE)
    assert ("base", "gpu") in stages and stages[-1] == ("base", "cpu"), "cpu is the default (last) target"
    assert _one("SparkApplication")["spec"]["image"] == f"{IMAGE_REPOSITORY}:{version}"
    for doc in [d for _, d in DOCUMENTS if d["kind"] in ("RayCluster", "RayJob")]:
        for where, container, _ in _containers(doc):
            gpus = container.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0)
            tag = f"{version}-gpu" if gpus else version
            assert container["image"] == f"{IMAGE_REPOSITORY}:{tag}", f"{doc['kind']} {where}"
    vllm_image = _one("Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
    assert vllm_image == f"vllm/vllm-openai:v{_dockerfile_arg('VLLM_VERSION')}"


def test_runtime_versions_match_the_pins() -> None:
    ray, pyspark = _pin("ray"), _pin("pyspark")
    for doc in [d for _, d in DOCUMENTS]:
        for spec in _ray_cluster_specs(doc):
            assert spec["rayVersion"] == ray, (
                f"{doc['kind']} runs Ray {spec['rayVersion']}, the image has {ray}"
            )
    assert _one("SparkApplication")["spec"]["sparkVersion"] == pyspark
    assert re.search(rf"^FROM spark:{re.escape(pyspark)}-", DOCKERFILE.read_text(), re.MULTILINE)
    # hadoop-aws must be built for the Hadoop inside the installed pyspark.
    import pyspark as installed

    hadoop = _dockerfile_arg("HADOOP_VERSION")
    jars = Path(installed.__file__).parent / "jars"
    assert (jars / f"hadoop-client-api-{hadoop}.jar").exists(), (
        f"pyspark {pyspark} does not ship Hadoop {hadoop}"
    )


def test_the_spark_job_runs_the_index_entry_point_on_bucket_locations() -> None:
    spec = _one("SparkApplication")["spec"]
    assert spec["type"] == "Python" and spec["mainApplicationFile"].startswith("local://")
    assert _repo_file(spec["mainApplicationFile"].removeprefix("local://")) == REPO / "jobs" / "index_job.py"
    args = _load_job("index_job").parse_args(spec["arguments"])
    from lazygraph.ingest.readers import input_kind

    assert input_kind(args.input) in ("jsonl", "folder")
    for location in (args.input, args.index):
        assert not storage.is_local(storage.normalise(location)), (
            f"{location} must be reachable from every pod"
        )
    env = {item["name"]: item["value"] for item in spec["driver"]["env"]}
    assert env["LAZYGRAPH_SPARK__MASTER"].startswith("k8s://"), "the session must keep the operator's master"
    assert not storage.is_local(storage.normalise(env["LAZYGRAPH_SPARK__CHECKPOINT_DIR"]))


def test_the_ray_job_runs_the_batch_entry_point_on_the_index_spark_builds(tmp_path: Path) -> None:
    job = _one("RayJob")["spec"]
    argv = shlex.split(job["entrypoint"])
    assert argv[0] == "python"
    assert _repo_file(argv[1]) == REPO / "jobs" / "batch_job.py"
    args = _load_job("batch_job").parse_args(argv[2:])
    index_args = _load_job("index_job").parse_args(_one("SparkApplication")["spec"]["arguments"])
    assert storage.normalise(args.index) == storage.normalise(index_args.index)
    assert not storage.is_local(storage.normalise(args.out))
    assert args.preset is None or args.preset in Settings().presets
    # The queries file is where the head (which runs the job's driver) mounts the queries ConfigMap.
    head = job["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    mount = next(
        m for m in head["containers"][0]["volumeMounts"] if str(args.queries).startswith(m["mountPath"])
    )
    volume = next(v for v in head["volumes"] if v["name"] == mount["name"])
    data = _config_data("ConfigMap", volume["configMap"]["name"])
    key = str(args.queries)[len(mount["mountPath"]) + 1 :]
    assert key in data, f"ConfigMap {volume['configMap']['name']} has no {key}"
    from lazygraph.serve.queries import read_queries

    (tmp_path / key).write_text(data[key])
    assert read_queries(tmp_path / key)


@pytest.mark.parametrize("kind", ["RayCluster", "RayJob"])
def test_ray_clusters_have_room_for_the_actors_the_settings_ask_for(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool that does not fit waits for resources until ray.actor_start_timeout_s and stops the batch."""
    (spec,) = _ray_cluster_specs(_one(kind))
    head = spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert {p["containerPort"] for p in head["ports"]} >= {6379, 8265, 10001}, "GCS, dashboard/jobs, client"
    settings = _settings_under(_environment(head), monkeypatch)
    cpus = gpus = 0.0
    for group in spec.get("workerGroupSpecs", []):
        (container,) = group["template"]["spec"]["containers"]
        limits = container["resources"]["limits"]
        assert _environment(container) == _environment(head), f"group {group['groupName']} has other settings"
        cpus += group["replicas"] * _quantity(group["rayStartParams"].get("num-cpus", limits["cpu"]))
        gpus += group["replicas"] * float(limits.get("nvidia.com/gpu", 0))
    needed = settings.ray.query_actors * settings.ray.actor_num_cpus
    shared_llm = settings.llm.relevance.backend == "vllm" and settings.ray.shared_relevance_actor
    if shared_llm:
        needed += settings.ray.relevance_actor_num_cpus
        assert gpus >= max(1.0, settings.ray.actor_num_gpus), "the shared vLLM actor needs a GPU worker"
    assert cpus >= needed, f"{kind}: workers offer {cpus} CPUs, the actors need {needed}"


def _quantity(value: Any) -> float:
    text = str(value)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def test_the_openai_mode_reaches_the_vllm_service_with_the_model_it_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    head = _one("RayCluster")["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    settings = _settings_under(_environment(head), monkeypatch)
    deployment, service = _one("Deployment"), _one("Service")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["vllm", "serve"]
    flags = dict(arg.removeprefix("--").split("=", 1) for arg in container["args"][1:] if "=" in arg)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert int(flags["port"]) in ports.values()
    (port,) = service["spec"]["ports"]
    assert ports[port["targetPort"]] == int(flags["port"])
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    for role in (settings.llm.relevance, settings.llm.synthesis):
        assert role.backend == "openai" and role.base_url is not None
        url = re.match(r"^http://([^:/]+):(\d+)/v1$", role.base_url)
        assert url, f"{role.base_url} is not http://SERVICE:PORT/v1"
        assert url.group(1) == service["metadata"]["name"] and int(url.group(2)) == port["port"]
        assert role.model == flags["served-model-name"] == container["args"][0]
        assert int(flags["max-model-len"]) >= role.n_ctx
    # The relevance scores read the first token's top 10 log-probabilities (llm/openai_backend.py).
    assert int(flags["max-logprobs"]) >= 10


def test_settings_files_in_cluster_are_valid_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    paths = sorted((REPO / "cluster").rglob("lazygraph-*.yaml"))
    assert paths
    for path in paths:
        monkeypatch.setenv("LAZYGRAPH_CONFIG", str(path))  # load_settings(path) would leave it set
        settings = load_settings()
        assert settings.llm.relevance.backend in ("openai", "vllm"), f"{path.name} configures no served LLM"

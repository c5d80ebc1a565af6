"""Airflow KubernetesPodOperator pods turned into the tasks of a DAG run.

A KPO pod carries the task instance in unprefixed labels: ``dag_id``, ``task_id``, ``run_id``,
``try_number``, ``map_index`` (mapped tasks only) and ``kubernetes_pod_operator: "True"``; no
annotations of its own. Label values pass through Airflow's ``make_safe_label_value``: a value
with characters a label may not hold (every run_id with ``:`` or ``+``) or longer than 63
characters becomes its first 53 kept characters, ``-`` and 9 hex digits of its md5. The label is
therefore the run's key as it is, and a raw run id is only ever *matched* against it by applying
the same function (:func:`make_safe_label_value`), never recovered by parsing the label.

The raw run id can be shown when the DAG writes it on the pod itself
(``annotations={"inno-notify/airflow-run-id": "{{ run_id }}"}``): it is used only if it gives the
label back, so an annotation cannot claim another run.

KubernetesExecutor worker pods (``kubernetes_executor: "True"``) are Airflow's own workers, not
the tasks' work, and are not taken.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace

from ..links import mlflow_links
from ..model import PodRecord
from ..workflows import AIRFLOW_KPO_LABEL, WorkflowKind, WorkflowPod, airflow_run_uid
from .annotations import read_intent
from .config import ParseConfig
from .fields import JsonObject, SetAside, mapping, string_map
from .pod import parse_pod
from .steps import step_pod
from .storable import INDEXED_MAX_BYTES, storable

__all__ = ["RAW_RUN_ID_KEY", "make_safe_label_value", "parse_airflow_pod", "run_id_shown"]

RAW_RUN_ID_KEY = "inno-notify/airflow-run-id"
MAX_LABEL_LEN = 63
_UNSAFE = re.compile(r"^[^a-z0-9A-Z]*|[^a-zA-Z0-9_\-\.]|[^a-z0-9A-Z]*$")
_DIGITS = re.compile(r"[0-9]{1,9}")


def make_safe_label_value(value: str) -> str:
    """Airflow's ``make_safe_label_value`` (cncf.kubernetes ``pod_generator.py``), to the character."""
    safe = _UNSAFE.sub("", value)
    if len(safe) > MAX_LABEL_LEN or value != safe:
        # A hostile value may hold a lone surrogate (a JSON "\ud800" escape): hashed, not refused.
        digest = hashlib.md5(value.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()[:9]
        safe = safe[: MAX_LABEL_LEN - len(digest) - 1] + "-" + digest
    return safe


def run_id_shown(label: str, raw: str | None) -> str:
    """The run id to show: the raw one written on the pod if it is the one the label was made
    from, else the label."""
    if raw and len(raw) <= 4 * INDEXED_MAX_BYTES and make_safe_label_value(raw) == label:
        return storable(raw, INDEXED_MAX_BYTES)
    return label


def _number(value: str | None, default: int) -> int:
    return int(value) if value is not None and _DIGITS.fullmatch(value) else default


def parse_airflow_pod(
    obj: JsonObject, cfg: ParseConfig, notes: list[SetAside] | None = None, pod: PodRecord | None = None
) -> WorkflowPod | None:
    """The task pod of a DAG run, or None when the pod is no KubernetesPodOperator pod."""
    metadata = mapping(obj, "metadata")
    labels = string_map(metadata, "labels")
    dag_id, task_id, run_id = labels.get("dag_id"), labels.get("task_id"), labels.get("run_id")
    if labels.get(AIRFLOW_KPO_LABEL) != "True" or not dag_id or not task_id or not run_id:
        return None
    if pod is None:
        pod = parse_pod(obj, cfg, notes)
    annotations = mapping(metadata, "annotations")
    layers = (annotations, labels)
    intent = read_intent(layers, pod.namespace, cfg, notes)
    map_index = labels.get("map_index")
    step = f"{task_id}[{_number(map_index, -1)}]" if map_index is not None else task_id
    written = annotations.get(RAW_RUN_ID_KEY)
    raw_run = written if isinstance(written, str) else None
    task = step_pod(
        pod,
        cfg.cluster,
        WorkflowKind.AIRFLOW,
        workflow_uid=airflow_run_uid(pod.namespace, dag_id, run_id),
        workflow_name=storable(dag_id, INDEXED_MAX_BYTES),
        step_key=storable(step, INDEXED_MAX_BYTES),
        step=storable(step, INDEXED_MAX_BYTES),
    )
    return replace(
        task,
        attempt=_number(labels.get("try_number"), 1),
        run_id=run_id_shown(storable(run_id, INDEXED_MAX_BYTES), raw_run),
        owner=intent.owner,
        team=intent.team,
        notify=intent.notify,
        channels=intent.channels,
        links=mlflow_links(layers, cfg.mlflow_url),
    )

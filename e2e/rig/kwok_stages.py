"""The kwok Stage configuration that plays kubelet for the rig's fake nodes and pods.

Nodes become Ready at once and stay so through their Lease, which kwok renews (``--node-lease-duration-seconds``);
there is no delayed status heartbeat. kwok v0.8.0 can lose track of a delayed node job when a node's updates come in
a burst (right after it is created): such an orphaned heartbeat later wrote ``Ready=True`` over a node a test had
taken out of kwok's hands and made NotReady, and the TAS repair test read ``unhealthyNodes`` empty.

Pods go Running as soon as they are bound; pods owned by a Job succeed after ``job_seconds`` (overridable per pod
with kwok's ``pod-complete.stage.kwok.x-k8s.io/delay`` annotation, e.g. "30s"), or fail after as long with the
exit code a ``rig.kfed.io/exit-code`` annotation names (``EXIT_CODE_ANNOTATION``: Jobs that fail, for their
``backoffLimit`` and ``podFailurePolicy``); deleted pods are removed.
"""

from __future__ import annotations

COMPLETE_DELAY_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
EXIT_CODE_ANNOTATION = "rig.kfed.io/exit-code"
"""On a Job's pod template: its pods end Failed with this exit code (an integer, as a string) instead of Succeeded."""

_NODE_STATUS = """\
{{ $now := Now }}
conditions:
- type: Ready
  status: "True"
  reason: KubeletReady
  message: kwok node is ready
  lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ or .metadata.creationTimestamp $now | Quote }}
- type: MemoryPressure
  status: "False"
  reason: KubeletHasSufficientMemory
  message: kwok node has sufficient memory
  lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ or .metadata.creationTimestamp $now | Quote }}
- type: DiskPressure
  status: "False"
  reason: KubeletHasNoDiskPressure
  message: kwok node has no disk pressure
  lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ or .metadata.creationTimestamp $now | Quote }}
- type: PIDPressure
  status: "False"
  reason: KubeletHasSufficientPID
  message: kwok node has sufficient PID
  lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ or .metadata.creationTimestamp $now | Quote }}
addresses:
- address: {{ NodeIP | Quote }}
  type: InternalIP
- address: {{ .metadata.name | Quote }}
  type: Hostname
allocatable:
{{ YAML .status.allocatable 1 }}
capacity:
{{ YAML .status.capacity 1 }}
nodeInfo:
  architecture: amd64
  operatingSystem: linux
  kubeletVersion: {{ printf "kwok-%s" Version | Quote }}
  kubeProxyVersion: {{ printf "kwok-%s" Version | Quote }}
  containerRuntimeVersion: kwok
  kernelVersion: kwok
  osImage: kwok
  machineID: ""
  systemUUID: ""
  bootID: ""
phase: Running
"""


def _pod_conditions(*, ready: bool) -> str:
    """The pod conditions kubelet reports: scheduled and initialized, and ready only while running."""
    lines = ["conditions:"]
    for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
        is_readiness = kind in ("ContainersReady", "Ready")
        status = "True" if ready or not is_readiness else "False"
        lines += [f"- type: {kind}", f'  status: "{status}"']
        if not ready and is_readiness:
            lines.append("  reason: PodCompleted")
        lines.append("  lastTransitionTime: {{ $now | Quote }}")
    return "\n".join(lines) + "\n"


_POD_RUNNING = (
    """\
{{ $now := Now }}
"""
    + _pod_conditions(ready=True)
    + """\
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  started: true
  restartCount: 0
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName false .metadata.uid .metadata.name .metadata.namespace | Quote }}
phase: Running
startTime: {{ $now | Quote }}
"""
)


def _pod_terminated(*, phase: str, exit_code: str, reason: str) -> str:
    """The status template of a pod whose containers all ended (``exit_code``: a number, or a template expression)."""
    return (
        """\
{{ $now := Now }}
"""
        + _pod_conditions(ready=False)
        + """\
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: false
  started: false
  restartCount: 0
  state:
    terminated:
      exitCode: EXIT_CODE
      reason: REASON
      finishedAt: {{ $now | Quote }}
{{ end }}
phase: PHASE
""".replace("EXIT_CODE", exit_code)
        .replace("REASON", reason)
        .replace("PHASE", phase)
    )


_POD_SUCCEEDED = _pod_terminated(phase="Succeeded", exit_code="0", reason="Completed")
_POD_FAILED = _pod_terminated(
    phase="Failed", exit_code=f'{{{{ index $.metadata.annotations "{EXIT_CODE_ANNOTATION}" }}}}', reason="Error"
)


def _indent(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "".join(pad + line if line.strip() else line for line in text.splitlines(keepends=True))


def _job_pod_end(name: str, *, exit_code: str, job_ms: int, status: str) -> str:
    """The Stage that ends a running Job's pod ``job_ms`` after it runs (or its delay annotation's time) with
    ``status``, for the pods whose exit-code annotation ``exit_code`` (``Exists`` / ``DoesNotExist``)."""
    return f"""\
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: {name}
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: DoesNotExist
    - key: '.status.phase'
      operator: In
      values: ["Running"]
    - key: '.metadata.ownerReferences.[].kind'
      operator: In
      values: ["Job"]
    - key: '.metadata.annotations["{EXIT_CODE_ANNOTATION}"]'
      operator: {exit_code}
  delay:
    durationMilliseconds: {job_ms}
    durationFrom:
      expressionFrom: '.metadata.annotations["{COMPLETE_DELAY_ANNOTATION}"]'
  next:
    statusTemplate: |
{_indent(status, 6)}"""


def render_stages(*, job_seconds: float) -> str:
    """Multi-document YAML of every Stage kwok needs, with Job pods completing after ``job_seconds``."""
    job_ms = int(job_seconds * 1000)
    return f"""\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: kfed-node-initialize
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ["True"]
  next:
    statusTemplate: |
{_indent(_NODE_STATUS, 6)}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: kfed-pod-running
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: DoesNotExist
    - key: '.spec.nodeName'
      operator: Exists
    - key: '.status.phase'
      operator: In
      values: ["Pending"]
  next:
    statusTemplate: |
{_indent(_POD_RUNNING, 6)}
{_job_pod_end("kfed-pod-job-complete", exit_code="DoesNotExist", job_ms=job_ms, status=_POD_SUCCEEDED)}
{_job_pod_end("kfed-pod-job-fail", exit_code="Exists", job_ms=job_ms, status=_POD_FAILED)}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: kfed-pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: Exists
  next:
    delete: true
"""

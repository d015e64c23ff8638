"""Keeps kfed-manager's own visibility API certificate: the Secret's pair, the files the server loads, the caBundle.

Runs with ``--visibility-cert-secret`` (the chart's ``visibility.certificate.generatedBy: kfed-manager``, for
``helm template``, Argo CD and Flux, where the chart cannot keep a pair across renders). Every minute, and at start:

1. read the Secret (the chart renders it empty); if its pair will not do
   (``manager.decisions.visibility_certificate.pair_problem``: missing, broken, not for the Service's names, or
   ending within 30 days) make a new one and write it, signed by the Secret's CA when that CA will still do (so the
   caBundle does not change). Replicas race safely: the Secret is created only if absent
   (outside the chart; its Role does not allow it) and replaced only at the resourceVersion read, and the loser
   reads the winner's pair;
2. hand the pair to the visibility server (its files in a private directory, then a reload);
3. set the APIService's ``caBundle`` to the pair's CA, but only on the APIService that sends to kfed-manager's own
   Service: one that points elsewhere (Kueue's) is left alone, and says so.

A step that fails (a refusal, an outage, an APIService that is not kfed-manager's) is retried on the next round;
until then the server keeps the pair it has, and a Warning Event on the Secret (reason ``CertificateNotInPlace``),
the log line and the readiness detail say why, once per new problem. A pair made is a Normal Event
(``CertificateMade``).
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import structlog

from federation.kube.api import KubeApi
from federation.kube.errors import AlreadyExists, Conflict, KubeError
from federation.kube.recorder import EventSink
from federation.kube.resources import API_SERVICES, SECRETS
from manager.decisions.visibility_certificate import (
    Pair,
    ca_problem,
    new_pair,
    pair_from_secret,
    pair_problem,
    service_names,
)

log = structlog.get_logger(__name__)

CHECK_SECONDS = 60.0
REQUEST_TIMEOUT_SECONDS = 10.0
Obj = dict[str, Any]


class CertificateKeeper:
    def __init__(
        self,
        *,
        api: KubeApi,
        secret: tuple[str, str],
        service: str,
        api_service: str,
        cert_dir: Path,
        field_manager: str,
        on_renewed: Callable[[], Awaitable[None]],
        events: EventSink,
    ) -> None:
        """``secret``: (namespace, name); ``service``: kfed-manager's visibility Service, in the Secret's namespace;
        ``cert_dir``: where the pair's ``tls.crt`` and ``tls.key`` go for the server; ``on_renewed``: reloads it."""
        self._api = api
        self._namespace, self._secret = secret
        self._service = service
        self._names = service_names(service, self._namespace)
        self._api_service = api_service
        self._cert_dir = cert_dir
        self._field_manager = field_manager
        self._on_renewed = on_renewed
        self._events = events
        self._regarding = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": self._secret, "namespace": self._namespace},
        }
        self._installed: Pair | None = None
        self._problem = "the certificate has not been read yet"

    def readiness(self) -> tuple[bool, str]:
        """Readiness detail: passes always (the rest of kfed-manager works without the visibility API)."""
        return True, self._problem or "certificate and caBundle in place"

    async def run(self) -> None:
        """Check again every minute; the first :meth:`sync_once` is the caller's, before the server starts."""
        while True:
            await anyio.sleep(CHECK_SECONDS)
            await self.sync_once()

    async def sync_once(self) -> None:
        step = f"Secret {self._namespace}/{self._secret}"
        try:
            with anyio.fail_after(REQUEST_TIMEOUT_SECONDS):
                pair = await self._pair()
                if pair != self._installed:
                    self._install(pair)
                    await self._on_renewed()
                step = f"APIService {self._api_service}"
                problem = await self._ca_bundle(pair.ca)
        except (KubeError, TimeoutError) as err:
            problem = f"cannot keep the visibility API certificate: {step}: {err or 'timed out'}"
        if problem and problem != self._problem:
            log.error("visibility API certificate not in place", reason=problem)
            self._events.emit(
                self._regarding,
                reason="CertificateNotInPlace",
                note=problem,
                action="KeepCertificate",
                event_type="Warning",
            )
        elif not problem and self._problem:
            log.info("visibility API certificate in place", secret=f"{self._namespace}/{self._secret}")
        self._problem = problem

    async def _pair(self, *, attempts: int = 2) -> Pair:
        """The Secret's pair, made (or made again) when it will not do; a replica that lost the race reads again."""
        secret = await self._api.get_or_none(SECRETS, self._secret, namespace=self._namespace)
        pair = pair_from_secret(secret.get("data") if secret else None)
        now = dt.datetime.now(dt.UTC)
        why = pair_problem(pair, names=self._names, now=now)
        if why is None and pair is not None:
            return pair
        keep_ca = pair if pair is not None and ca_problem(pair, now=now) is None else None  # the caBundle stays
        fresh = new_pair(names=self._names, now=now, keep_ca=keep_ca)
        try:
            if secret is None:
                body: Obj = {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "type": "Opaque",
                    "metadata": {"name": self._secret, "namespace": self._namespace},
                    "data": fresh.secret_data(),
                }
                await self._api.create(SECRETS, body, namespace=self._namespace, field_manager=self._field_manager)
            else:
                meta = {k: v for k, v in secret["metadata"].items() if k != "managedFields"}
                await self._api.replace(
                    SECRETS,
                    {**secret, "metadata": meta, "data": fresh.secret_data()},
                    field_manager=self._field_manager,
                )
        except (AlreadyExists, Conflict):
            if attempts <= 1:
                raise
            return await self._pair(attempts=attempts - 1)
        log.info("visibility API certificate made", secret=f"{self._namespace}/{self._secret}", reason=why)
        kept = "the CA kept" if keep_ca is not None else "a new CA"
        note = f"Made the visibility API's serving certificate ({kept}): {why}"
        self._events.emit(self._regarding, reason="CertificateMade", note=note, action="KeepCertificate")
        return fresh

    def _install(self, pair: Pair) -> None:
        key = self._cert_dir / "tls.key"
        key.touch(mode=0o600)
        key.write_bytes(pair.key)
        (self._cert_dir / "tls.crt").write_bytes(pair.cert)
        self._installed = pair

    async def _ca_bundle(self, ca: bytes) -> str:
        """Set the APIService's caBundle to ``ca``; returns why it was not (empty: it is set)."""
        current = await self._api.get(API_SERVICES, self._api_service)
        spec = current.get("spec") or {}
        target = spec.get("service") or {}
        if (target.get("namespace"), target.get("name")) != (self._namespace, self._service):
            return (
                f"APIService {self._api_service} sends to Service {target.get('namespace')}/{target.get('name')}, "
                f"not to kfed-manager's {self._namespace}/{self._service}: its caBundle is left alone"
            )
        wanted = base64.b64encode(ca).decode()
        if spec.get("caBundle") != wanted:
            await self._api.patch(
                API_SERVICES,
                self._api_service,
                {"metadata": {"resourceVersion": current["metadata"]["resourceVersion"]}, "spec": {"caBundle": wanted}},
                field_manager=self._field_manager,
            )
            log.info("visibility APIService caBundle set", api_service=self._api_service)
        return ""

from federation.obs.health import HealthEndpoints


def test_readyz_lists_failing_checks() -> None:
    endpoints = HealthEndpoints()
    endpoints.add_readiness_check("caches", lambda: (True, ""))
    endpoints.add_readiness_check("remotes", lambda: (False, "worker-2 not connected"))
    status, _, body = endpoints.respond("/readyz")
    assert status == 503
    assert b"[-]remotes failed: worker-2 not connected" in body
    assert b"caches" not in body


def test_healthz_and_metrics() -> None:
    endpoints = HealthEndpoints(metrics=lambda: b"kueue_pending_workloads 0\n")
    assert endpoints.respond("/healthz")[0] == 200
    assert endpoints.respond("/metrics")[2].startswith(b"kueue_pending_workloads")
    assert endpoints.respond("/nope")[0] == 404


def test_server_answers_over_a_socket() -> None:
    import anyio

    endpoints = HealthEndpoints()
    endpoints.add_readiness_check("leader", lambda: (False, "standby"))

    async def scenario() -> bytes:
        async with anyio.create_task_group() as tg:
            port = await tg.start(
                lambda task_status: endpoints.serve(host="127.0.0.1", port=0, task_status=task_status)
            )
            async with await anyio.connect_tcp("127.0.0.1", port) as conn:
                await conn.send(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
                chunks = []
                with anyio.fail_after(5):
                    try:
                        while True:
                            chunks.append(await conn.receive())
                    except anyio.EndOfStream:
                        pass
            tg.cancel_scope.cancel()
        return b"".join(chunks)

    reply = anyio.run(scenario)
    assert reply.startswith(b"HTTP/1.1 503")
    assert reply.endswith(b"[-]leader failed: standby\nreadyz check failed")


def test_readyz_verbose_lists_every_check_with_its_detail() -> None:
    endpoints = HealthEndpoints()
    endpoints.add_readiness_check("caches", lambda: (True, "ok"))
    endpoints.add_readiness_check("remotes-connected", lambda: (True, "1/2 connected; degraded: w2 (no report)"))
    status, _, body = endpoints.respond("/readyz", verbose=True)
    assert status == 200
    assert body.decode().splitlines() == [
        "[+]caches ok: ok",
        "[+]remotes-connected ok: 1/2 connected; degraded: w2 (no report)",
        "readyz check passed",
    ]
    assert endpoints.respond("/readyz") == (200, "text/plain", b"ok")


def test_metrics_has_kueue_build_info_and_process_collectors() -> None:
    from federation.obs.metrics import Metrics

    metrics = Metrics()
    metrics.add_source(lambda: [("kueue_pending_workloads", ("cq", "active"), 2.0)])
    text = metrics.exposition().decode()
    assert 'kueue_pending_workloads{cluster_queue="cq",replica_role="standalone",status="active"} 2.0' in text
    assert "kueue_build_info{" in text
    assert "process_cpu_seconds_total" in text
    assert "python_gc_collections_total" in text

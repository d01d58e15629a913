"""The dashboard binds loopback by default and warns when it is bound anywhere else."""

from __future__ import annotations

import pytest

from microcoder.launch.config import load_config
from microcoder.launch.monitor.dashboard_server import DashboardServer, exposure_warning
from microcoder.launch.monitor.dashboard_store import MetricsStore


def test_the_default_dashboard_address_is_loopback_and_gets_no_warning():
    host = load_config(None, []).monitor.dashboard_host
    assert host == "127.0.0.1" and exposure_warning(host) is None


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.5"])
def test_loopback_addresses_get_no_warning(host):
    assert exposure_warning(host) is None


@pytest.mark.parametrize("host", ["0.0.0.0", "", "10.1.2.3", "gpu-node-7"])
def test_any_other_address_gets_a_warning_naming_it(host):
    warning = exposure_warning(host)
    assert warning and repr(host) in warning and "anyone who can reach" in warning


def test_a_dashboard_bound_on_every_interface_prints_the_warning_at_start(capsys):
    server = DashboardServer(MetricsStore(), dict, host="0.0.0.0").start()
    try:
        out = capsys.readouterr().out
    finally:
        server.stop()
    assert "WARNING: the dashboard binds every interface" in out


def test_a_loopback_dashboard_prints_no_warning(capsys):
    server = DashboardServer(MetricsStore(), dict).start()
    server.stop()
    assert "WARNING" not in capsys.readouterr().out

"""The human figures of a summary, and the view model built from domain records."""

from __future__ import annotations

import pytest

from inno_notify.adapters.channels import figures
from inno_notify.adapters.channels.views import SummaryView, group_totals
from inno_notify.domain.model import (
    GPU_SOURCE_AGENT,
    GpuUsage,
    JobStatus,
    MissingFigure,
    MissingReason,
    Requested,
    Usage,
)
from tests.adapters.channels.conftest import sample_job, sample_recommendations, sample_usage

GIB = 1024**3


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),
        (45.4, "45 s"),
        (60, "1 min"),
        (725, "12 min"),
        (3600, "1 h"),
        (11_520, "3 h 12 min"),
        (86_400, "1 d"),
        (2 * 86_400 + 5 * 3600 + 20, "2 d 5 h"),
    ],
)
def test_durations(seconds: float, text: str) -> None:
    assert figures.duration(seconds) == text


@pytest.mark.parametrize(
    ("num_bytes", "text"),
    [
        (int(42.5 * GIB), "42.5 GiB"),
        (64 * GIB, "64 GiB"),
        (512 * 1024**2, "512 MiB"),
        (int(1.04 * GIB), "1 GiB"),
    ],
)
def test_sizes(num_bytes: int, text: str) -> None:
    assert figures.size(num_bytes) == text


@pytest.mark.parametrize(
    ("reason", "text"),
    [
        (MissingReason.PROMETHEUS_UNAVAILABLE, "n/a (Prometheus unavailable)"),
        (None, "n/a (not measured)"),
        ("no terminated container", "n/a (no terminated container)"),
    ],
)
def test_missing_figures_say_why(reason: MissingReason | str | None, text: str) -> None:
    assert figures.not_available(reason) == text


def test_summary_view_spells_every_figure() -> None:
    view = SummaryView.from_records(sample_job(), sample_usage(), sample_recommendations())

    assert view.job_ref == "face-research/train-resnet-7"
    assert view.status_text == "failed (BackoffLimitExceeded)"
    assert view.exit_text == "137 (OOMKilled)"
    assert (view.runtime, view.queue_wait) == ("3 h 12 min", "2 min")
    assert view.gpu_minutes == "110 / 240 GPU-min"
    assert view.gpu_util == "46 % mean, 2 idle GPUs"
    assert view.peak_memory == "42.5 GiB of 64 GiB"
    assert view.peak_gpu_memory == "n/a (no samples)"
    # Largest waste first: the idle GPUs before the memory.
    assert [r.message for r in view.recommendations] == [
        "2 of 4 GPUs stayed idle: request 2.",
        "Peak RAM was 42.5 GiB: request 52 GiB.",
    ]


@pytest.mark.parametrize(
    ("usage", "field", "text"),
    [
        (None, "gpu_minutes", "n/a (not collected)"),
        (None, "peak_memory", "n/a (not collected)"),
        (Usage(gpu_minutes=240.0, missing=()), "gpu_minutes", "n/a (not measured) / 240 GPU-min"),
        (Usage(gpu_minutes=8.25, used_gpu_minutes=0.0), "gpu_minutes", "0 / 8.2 GPU-min"),
        (Usage(memory_peak_bytes=GIB), "peak_memory", "1 GiB of 64 GiB"),
        (
            Usage(gpu_memory_peak_bytes=12 * GIB, gpus=(GpuUsage("p", "p", "0", fb_total_bytes=80 * GIB),)),
            "peak_gpu_memory",
            "12 GiB of 80 GiB",
        ),
    ],
)
def test_null_figures_are_never_zero(usage: Usage | None, field: str, text: str) -> None:
    assert getattr(SummaryView.from_records(sample_job(), usage, []), field) == text


def test_a_cpu_job_says_no_gpu_was_requested() -> None:
    job = sample_job(
        requested=Requested(gpus=0.0, memory_bytes=None), status=JobStatus.SUCCEEDED, reason=None
    )
    view = SummaryView.from_records(job, Usage(memory_peak_bytes=2 * GIB), [])

    assert (view.gpu_minutes, view.peak_gpu_memory, view.peak_memory) == (
        "no GPU requested",
        "no GPU requested",
        "2 GiB (no request)",
    )
    assert view.status_text == "succeeded"


def test_group_totals_name_the_jobs_without_figures() -> None:
    measured = SummaryView.from_records(sample_job(), sample_usage(), [])
    unmeasured = SummaryView.from_records(sample_job(status=JobStatus.SUCCEEDED), None, [])

    totals = group_totals([measured, measured, unmeasured])

    assert (totals.jobs, totals.succeeded, totals.failed) == (3, 1, 2)
    assert totals.gpu_minutes == "221 / 480 GPU-min (1 job not measured)"
    assert group_totals([unmeasured]).gpu_minutes == "n/a (not collected)"


def test_a_time_sliced_gpu_measured_per_process_is_marked_as_the_jobs_share() -> None:
    row = GpuUsage(
        "p", "p", "node/0", fb_total_bytes=80 * GIB, shared=True, source=GPU_SOURCE_AGENT, sharing="resource"
    )
    usage = Usage(gpu_util_mean_percent=30.0, gpu_memory_peak_bytes=5 * GIB, gpus=(row,))
    view = SummaryView.from_records(sample_job(), usage, [])
    assert view.gpu_util == "30 % mean (shared GPU: this job's share)"
    assert view.peak_gpu_memory == "5 GiB of 80 GiB (shared GPU: this job's share)"


A100, H100, A100_PCIE = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe"


def _gpu(pod: str, name: str, model: str | None, mig: str | None = None) -> GpuUsage:
    return GpuUsage(pod, pod, name, f"GPU-{name.split('/')[0]}", model, mig_profile=mig)


@pytest.mark.parametrize(
    ("usage", "text"),
    [
        (Usage(gpu_model=A100, gpus=tuple(_gpu("p", f"{i}", A100) for i in range(4))), f"4 × {A100}"),
        # A GPU that served two pods (a retry) counts once; on several models the most first.
        (
            Usage(
                gpus=(_gpu("p", "0", H100), _gpu("q", "0", H100), _gpu("q", "1", A100), _gpu("q", "2", A100))
            ),
            f"2 × {A100} + 1 × {H100}",
        ),
        # MIG: the parent GPU's model and the instance's profile.
        (Usage(gpus=(_gpu("p", "0/mig1", A100_PCIE, "3g.40gb"),)), f"1 × {A100_PCIE} MIG 3g.40gb"),
        (Usage(gpus=(_gpu("p", "0", None),), missing=()), "n/a (not measured)"),
        (
            Usage(missing=(MissingFigure("gpu_model", MissingReason.SHORTER_THAN_SCRAPE),)),
            "n/a (shorter than one scrape)",
        ),
        (None, "n/a (not collected)"),
    ],
)
def test_the_gpus_a_job_ran_on(usage: Usage | None, text: str) -> None:
    assert SummaryView.from_records(sample_job(), usage, []).gpu_model == text


def test_a_cpu_job_names_no_gpu_model() -> None:
    job = sample_job(requested=Requested(gpus=0.0))
    assert SummaryView.from_records(job, Usage(), []).gpu_model == ""
